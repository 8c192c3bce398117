"""Pre-flight's type table: which captured columns are refused, warned about, or pass (pure)."""

from __future__ import annotations

import pytest

from cdc.column_types import (
    ColumnFacts,
    ColumnFinding,
    ColumnSelection,
    PgType,
    SnapshotDates,
    classify,
    exclude_entry,
    is_date_column,
    money_findings,
    snapshot_date_findings,
    snapshot_reads_data,
)

ALL = ColumnSelection()
T = "public.t"


def scalar(
    type_: str, name: str | None = None, *, kind: str = "b", schema: str = "pg_catalog"
) -> ColumnFacts:
    return ColumnFacts(table=T, column="c", type=type_, base=PgType(name or type_, kind, schema))


def array(
    element: str, *, kind: str = "b", schema: str = "pg_catalog", ndims: int = 1, checks: tuple[str, ...] = ()
) -> ColumnFacts:
    return ColumnFacts(
        table=T,
        column="c",
        type=f"{element}[]",
        base=PgType(f"_{element}", "b", schema),
        element=PgType(element, kind, schema),
        ndims=ndims,
        checks=checks,
    )


def levels(*columns: ColumnFacts, selection: ColumnSelection = ALL) -> list[str]:
    return [f.level for f in classify(columns, selection)]


@pytest.mark.parametrize(
    "typname",
    [
        "int2", "int4", "int8", "numeric", "money", "float4", "float8", "bool", "text", "varchar",
        "bpchar", "char", "uuid", "date", "time", "timestamp", "timestamptz", "interval", "json",
        "jsonb", "bytea", "bit", "xml", "inet", "cidr", "macaddr", "macaddr8", "oid", "point", "tsvector",
    ],
)  # fmt: skip
def test_types_that_arrive_exactly_have_no_finding(typname: str) -> None:
    assert levels(scalar(typname)) == []


@pytest.mark.parametrize(
    "typname",
    ["line", "lseg", "box", "path", "polygon", "circle", "pg_lsn", "tsquery", "varbit", "name", "regclass"],
)
def test_types_debezium_drops_or_garbles_are_refused(typname: str) -> None:
    (finding,) = classify([scalar(typname)], ALL)
    assert finding.level == "refuse"
    assert "column.exclude.list: public.t.c" in finding.workaround


def test_kinds_decide_for_user_types_whatever_their_name() -> None:
    assert levels(scalar("mood", kind="e", schema="public")) == []
    assert levels(scalar("floatrange", kind="r", schema="public")) == []
    assert levels(scalar("pair", kind="c", schema="public")) == ["refuse"]
    assert levels(scalar("int4multirange", kind="m")) == ["refuse"]
    # hstore lives where its extension was installed; a base type named like a built-in does not pass as it.
    assert levels(scalar("hstore", schema="ext")) == []
    assert levels(scalar("box", schema="public")) == ["warn"]
    (untested,) = classify([scalar("citext", schema="public")], ALL)
    assert untested.level == "warn" and "not in the tested type table" in untested.problem


def test_name_and_varbit_say_what_is_lost() -> None:
    name, varbit = classify(
        [scalar("name"), ColumnFacts(table=T, column="v", type="bit varying(5)", base=PgType("varbit"))], ALL
    )
    assert "streamed change sends NULL" in name.problem and "TYPE text" in name.workaround
    assert varbit.type == "bit varying(5)" and "leading zeros" in varbit.problem
    assert "bit(n)" in varbit.workaround and "column.exclude.list: public.t.v" in varbit.workaround


def test_timetz_warns_with_a_check_that_silences_it() -> None:
    (warning,) = classify([scalar("time with time zone", "timetz")], ALL)
    assert warning.level == "warn" and "24:00:00" in warning.problem
    assert "CHECK (c::time < '24:00:00')" in warning.workaround
    guarded = ColumnFacts(
        table=T,
        column="c",
        type="time with time zone",
        base=PgType("timetz"),
        checks=("CHECK (((c)::time without time zone < '24:00:00'::time without time zone))",),
    )
    assert levels(guarded) == []


def test_every_array_warns_about_dimensions_until_a_check_keeps_it_one_dimensional() -> None:
    (dims,) = classify([array("int4")], ALL)
    assert dims.level == "warn" and "CHECK (array_ndims(c) = 1)" in dims.workaround
    assert levels(array("int4", checks=("CHECK ((array_ndims(c) = 1))",))) == []
    assert levels(array("int4", checks=("CHECK ((array_ndims(VALUE) = 1))",))) == []  # a domain's
    assert levels(array("int4", checks=("CHECK ((array_length(c, 1) < 5))",))) == ["warn"]
    quoted = ColumnFacts(
        table=T,
        column="Big",
        type="integer[]",
        base=PgType("_int4"),
        element=PgType("int4"),
        checks=('CHECK ((array_ndims("Big") = 1))',),
    )
    assert levels(quoted) == []


def test_a_declared_multi_dimensional_array_is_refused() -> None:
    (finding,) = classify([array("int8", ndims=2)], ALL)
    assert finding.level == "refuse" and "2 dimensions" in finding.problem
    assert "ALTER COLUMN c TYPE int8[]" in finding.workaround


def test_numeric_arrays_warn_about_special_values() -> None:
    special, dims = classify([array("numeric")], ALL)
    assert special.level == dims.level == "warn"
    assert "NaN" in special.problem and "ARRAY['NaN','Infinity','-Infinity']::numeric[]" in special.workaround
    forbidden = "CHECK ((NOT (c && ARRAY['NaN'::numeric, 'Infinity'::numeric, '-Infinity'::numeric])))"
    assert [f.problem for f in classify([array("numeric", checks=(forbidden,))], ALL)] == [dims.problem]


@pytest.mark.parametrize("element", ["varbit", "money", "interval", "name", "point", "xml", "box", "tsquery"])
def test_arrays_debezium_drops_are_refused_without_a_dimension_warning(element: str) -> None:
    (finding,) = classify([array(element)], ALL)
    assert finding.level == "refuse" and "leaves the column out" in finding.problem


def test_bit_arrays_composite_arrays_and_exact_arrays() -> None:
    (bits,) = classify([array("bit")], ALL)
    assert bits.level == "refuse" and "NULL" in bits.problem
    assert levels(array("pair", kind="c", schema="public")) == ["refuse"]
    for element in ("int2", "int8", "text", "uuid", "date", "timestamptz", "jsonb", "bytea", "bpchar"):
        assert levels(array(element)) == ["warn"]  # only the dimension warning
    assert levels(array("mood", kind="e", schema="public")) == ["warn"]
    assert levels(array("timetz")) == ["warn", "warn"]


def test_generated_columns_are_refused() -> None:
    generated = ColumnFacts(table=T, column="g", type="text", base=PgType("text"), generated=True)
    (finding,) = classify([generated], ALL)
    assert finding.level == "refuse" and "pgoutput does not publish generated columns" in finding.problem


def test_excluded_or_not_included_columns_are_not_checked() -> None:
    box = ColumnFacts(table="public.Shapes", column="Box", type="box", base=PgType("box"))
    assert levels(box) == ["refuse"]
    for options in (
        {"column.exclude.list": r"public\.shapes\.box"},  # case-insensitive, like Debezium
        {"column.exclude.list": "other.x.y, public.shapes.b.x"},  # the regex dot matches any character
        {"column.exclude.list": r"a{1\,2}.b.c,public\.Shapes\..*"},  # an escaped comma stays in the regex
        {"column.include.list": r"public\.Shapes\.id"},
    ):
        assert levels(box, selection=ColumnSelection.from_options(options)) == [], options
    for options in (
        {"column.exclude.list": "public.Shapes.Bo"},  # full match, not a prefix
        {"column.exclude.list": "public.Shapes.(Box"},  # not a regex Python reads: checked, not skipped
        {"column.include.list": "public.Shapes.(id"},
    ):
        assert levels(box, selection=ColumnSelection.from_options(options)) == ["refuse"], options


def test_the_suggested_exclude_entry_excludes_exactly_that_column() -> None:
    entry = exclude_entry("public.a$b", "c.d")
    selection = ColumnSelection.from_options({"column.exclude.list": entry})
    assert not selection.captures("public.a$b", "c.d")
    assert selection.captures("public.a$b", "cxd") and selection.captures("public.ab", "c.d")


def test_snapshot_modes_that_read_rows() -> None:
    assert all(snapshot_reads_data(m, {}) for m in ("initial", "always", "initial_only", "when_needed"))
    assert not snapshot_reads_data("no_data", {})
    assert not snapshot_reads_data("configuration_based", {})
    data = {"snapshot.mode.configuration.based.snapshot.data": "true"}
    assert snapshot_reads_data("configuration_based", data)


def test_date_columns_are_found_through_domains_and_arrays() -> None:
    assert is_date_column(scalar("birthday", "date"))
    assert is_date_column(array("date"))
    assert not is_date_column(scalar("timestamp")) and not is_date_column(scalar("date", schema="public"))


def test_dates_the_snapshot_would_send_wrong_are_refused_with_counts() -> None:
    counts = (
        SnapshotDates(column="d", type="date", bc_rows=2, gap_rows=0),
        SnapshotDates(column="fine", type="date", bc_rows=0, gap_rows=0),
        SnapshotDates(column="da", type="date[]", bc_rows=1, gap_rows=3),
    )
    d, da = snapshot_date_findings(T, counts)
    assert (d.column, d.level) == ("d", "refuse") and "2 row(s) with BC dates" in d.problem
    assert "1582" not in d.problem
    assert "1 row(s) with BC" in da.problem and "3 row(s) with dates in 1582-10-05..1582-10-14" in da.problem
    assert "snapshot_mode: no_data" in da.workaround and "column.exclude.list: public.t.da" in da.workaround


def test_every_message_names_table_column_type_problem_and_workaround() -> None:
    columns = [scalar("box"), scalar("time with time zone", "timetz"), array("numeric", ndims=3)]
    findings: list[ColumnFinding] = list(classify(columns, ALL))
    findings += snapshot_date_findings(T, [SnapshotDates(column="d", type="date", bc_rows=1, gap_rows=1)])
    assert [f.level for f in findings] == ["refuse", "warn", "warn", "refuse", "refuse"]
    for f in findings:
        field, message = f.as_problem()
        assert field == f"public.t.{f.column}"
        assert message.startswith(f"column public.t.{f.column} ({f.type}): {f.problem}. Workaround: ")
        assert f.workaround and "$" not in message


@pytest.mark.parametrize("locale", ["C", "POSIX", "C.UTF-8", "C.utf8", "en_US.UTF-8", "en_US"])
def test_money_passes_under_locales_debezium_parses(locale: str) -> None:
    assert money_findings([scalar("money")], locale, "dbz") == ()


@pytest.mark.parametrize("locale", ["de_DE.UTF-8", "nl_NL.utf8", "pt_BR"])
def test_money_is_refused_under_other_locales_naming_the_role_fix(locale: str) -> None:
    [finding] = money_findings([scalar("money"), scalar("numeric")], locale, "dbz")
    assert finding.level == "refuse" and f"lc_monetary={locale}" in finding.problem
    assert "ALTER ROLE dbz SET lc_monetary = 'C'" in finding.workaround
