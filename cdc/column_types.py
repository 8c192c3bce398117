"""Which captured columns Debezium cannot carry faithfully, decided from catalog facts (pure).

Debezium's Postgres connector drops some types from its change events without an error, sends others
as NULL, or loses part of the value; a consumer then holds wrong data and never learns it. `classify`
turns each captured column's catalog facts into findings before a connector is registered:
- `refuse`: values are lost or wrong for every row (the column is missing, always NULL, or its values
  are ambiguous), or data in the table would be snapshotted wrong — pre-flight fails;
- `warn`: only some values would be lost (NaN in a numeric array, a 2-dimensional value in an array
  column); the column is still captured and the warning names the CHECK constraint that rules those
  values out (once that constraint exists and is validated, the warning goes away; so does the
  refusal of a column declared multi-dimensional whose CHECK keeps its values one-dimensional).

Assumptions: the connector runs with the settings `cdc.connector_spec` renders (pgoutput,
decimal.handling.mode=string, time.precision.mode=adaptive_time_microseconds, JsonConverter with
schemas); `_TYPES` holds what was measured on Postgres 15 with Debezium 3.6.1 for the same row read by
the snapshot and by streaming. A type missing from it is a warning ("not in the tested type table"),
never silence. Domains are resolved to their base type before classification (the caller does that).
Values Python's datetime cannot hold (BC, infinity, 24:00) get no finding: the decoder refuses them
by name at run time, and warning on every date column would drown the findings that matter.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from string import Template
from typing import Literal

Level = Literal["refuse", "warn"]

# Snapshot modes whose snapshot reads the tables' rows (no_data and never only stream).
_SNAPSHOT_READS_DATA = frozenset({"initial", "always", "initial_only", "when_needed"})


@dataclass(frozen=True, slots=True)
class PgType:
    """A catalog type after following domains: pg_type.typname, its kind (typtype) and schema."""

    name: str
    kind: str = "b"  # b base, c composite, e enum, m multirange, p pseudo, r range
    schema: str = "pg_catalog"


@dataclass(frozen=True, slots=True, kw_only=True)
class ColumnFacts:
    """What the catalog says about one column (pg_attribute, pg_type, format_type, pg_constraint)."""

    table: str  # schema.table
    column: str
    type: str  # format_type(atttypid, atttypmod): as declared, a domain by its name
    base: PgType  # after following domains; an array is its array type (_numeric)
    element: PgType | None = None  # for arrays: the element type, domains followed
    ndims: int = 0  # declared dimensions (attndims, or the domain's typndims); Postgres does not enforce it
    generated: bool = False  # pg_attribute.attgenerated is set
    # Validated CHECK constraints on this column alone or on its domains, as pg_get_constraintdef writes them.
    checks: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class SnapshotDates:
    """Rows of one date (or date[]) column that the snapshot would send wrong, counted in the table."""

    column: str
    type: str
    bc_rows: int  # rows with a date before 0001-01-01 (not -infinity)
    gap_rows: int  # rows with a date in 1582-10-05..1582-10-14


@dataclass(frozen=True, slots=True, kw_only=True)
class ColumnFinding:
    table: str
    column: str
    type: str
    level: Level
    problem: str
    workaround: str

    def message(self) -> str:
        return (
            f"column {self.table}.{self.column} ({self.type}): {self.problem}. Workaround: {self.workaround}"
        )

    def as_problem(self) -> tuple[str, str]:
        """The (field, message) pair `PreflightFailed` carries; the field is the column."""
        return (f"{self.table}.{self.column}", self.message())


@dataclass(frozen=True, slots=True)
class Rule:
    """One verdict of the type table: how bad, what goes wrong, and what to do about it.

    The texts are templates: $col, $table, $type, $ndims, and $exclude (an entry for column.exclude.list).
    `guard` is a pattern over a CHECK constraint's normalised text ($col lower-case, or `value` in a
    domain): when one of the column's checks matches it, the values the rule worries about cannot occur.
    """

    level: Level
    problem: str
    workaround: str
    guard: str | None = None


_EXCLUDE = "exclude the column (column.exclude.list: $exclude)"
# Not a generated column: pgoutput on Postgres 15 does not stream them (measured: snapshot only).
_TRIGGER_COPY = "a text or jsonb copy filled by a trigger (generated columns are not streamed)"
_MISSING = "Debezium does not know the type and leaves the column out of every change event, without an error"


def _dropped(how: str) -> Rule:
    return Rule("refuse", _MISSING, f"{how}; or {_EXCLUDE} and capture {_TRIGGER_COPY}")


DROPPED = _dropped("store it as text or jsonb")
DROPPED_COMPOSITE = _dropped("store its fields as ordinary columns, or the value as jsonb")
DROPPED_MULTIRANGE = _dropped("store it as an array of ranges (range[] arrives exactly) or as text")
DROPPED_ARRAY = _dropped("store it as text[] ($col::text[]) or jsonb")
BIT_ARRAY = Rule(
    "refuse",
    "Debezium sends bit(n)[] arrays as NULL, whatever they hold",
    f"store the bits as text[] or integer[]; or {_EXCLUDE}",
)
NAME = Rule(
    "refuse",
    "the snapshot carries name values, but every streamed change sends NULL",
    f"change the column to text (ALTER TABLE $table ALTER COLUMN $col TYPE text); or {_EXCLUDE}",
)
VARBIT = Rule(
    "refuse",
    "Debezium sends bit varying as an integer, so leading zeros and the length are lost ('0101' and "
    "'101' arrive alike; varbit(1) arrives as a boolean), and the decoder refuses such values",
    f"use bit(n) when the length is fixed (it arrives as exact text); or {_EXCLUDE} and capture "
    f"{_TRIGGER_COPY}",
)
NUMERIC_SPECIALS = Rule(
    "warn",
    "an array holding NaN, Infinity or -Infinity arrives as NULL, the whole array",
    "forbid those values: CHECK (NOT ($col && ARRAY['NaN','Infinity','-Infinity']::numeric[])); or "
    f"{_EXCLUDE} and capture {_TRIGGER_COPY}",
    guard=r"(?=.*'nan')(?=.*'infinity')(?=.*'-infinity')",
)
TIMETZ = Rule(
    "warn",
    "the value '24:00:00+00' arrives as 00:00:00Z",
    "forbid 24:00: CHECK ($col::time < '24:00:00'); or use time or timestamptz",
    guard=r"'24:00:00'",
)
TIMETZ_ARRAY = Rule(
    "warn",
    "an element '24:00:00+00' arrives as 00:00:00Z",
    "forbid 24:00: CHECK ('24:00:00' <> ALL ($col::time[])); or use time[] or timestamptz[]",
    guard=r"'24:00:00'",
)
UNTESTED = Rule(
    "warn",
    "this type is not in the tested type table, so pre-flight cannot tell whether Debezium carries it exactly",
    f"check a snapshot row and a streamed change of it through the connector before relying on it; or {_EXCLUDE}",
)
GENERATED = Rule(
    "refuse",
    "a generated column: the snapshot reads it, but pgoutput does not publish generated columns, so "
    "every streamed change lacks it",
    f"{_EXCLUDE} and compute it where the changes are consumed, or make it an ordinary column filled "
    "by a BEFORE INSERT OR UPDATE trigger",
)
_NDIMS_GUARD = r"array_ndims\(($col|value)\)(=1|<2|<=1)"
MULTI_DIM_DECLARED = Rule(
    "refuse",
    "the column is declared with $ndims dimensions, and Debezium sends a multi-dimensional array as NULL "
    "elements ('{{1},{2}}' as [null, null]) or as Java object names",
    "redeclare it with one dimension (ALTER TABLE $table ALTER COLUMN $col TYPE $type) and add "
    f"CHECK (array_ndims($col) = 1); or store it as jsonb; or {_EXCLUDE}",
    guard=_NDIMS_GUARD,
)
MULTI_DIM_POSSIBLE = Rule(
    "warn",
    "Postgres does not enforce an array's dimensions, and Debezium sends a multi-dimensional value "
    "as NULL elements ('{{1},{2}}' as [null, null]) or as Java object names",
    "keep it one-dimensional: CHECK (array_ndims($col) = 1)",
    guard=_NDIMS_GUARD,
)

Verdict = Rule | None  # None: arrives exactly, no finding

# The type table: pg_catalog type name -> (verdict as a column, verdict as an array's element).
# Measured on the stack; None ("exact") means the snapshot and streaming both carry every value exactly.
_EXACT = "int2 int4 int8 float4 float8 bool text varchar bpchar char uuid date time timestamp timestamptz"
_EXACT_TOO = "json jsonb bytea inet cidr macaddr macaddr8 oid tsvector"
_ARRAY_LOST = "money interval point xml"  # exact as a column, left out as an array
_LOST = "line lseg box path polygon circle pg_lsn tsquery regclass tid jsonpath txid_snapshot"
_TYPES: Mapping[str, tuple[Verdict, Verdict]] = {
    **dict.fromkeys(f"{_EXACT} {_EXACT_TOO}".split(), (None, None)),
    **dict.fromkeys(_ARRAY_LOST.split(), (None, DROPPED_ARRAY)),
    **dict.fromkeys(_LOST.split(), (DROPPED, DROPPED_ARRAY)),
    "numeric": (None, NUMERIC_SPECIALS),
    "timetz": (TIMETZ, TIMETZ_ARRAY),
    "bit": (None, BIT_ARRAY),
    "varbit": (VARBIT, DROPPED_ARRAY),
    "name": (NAME, DROPPED_ARRAY),
}
# Extension types keep their name in whatever schema the extension was installed into.
_EXTENSION_TYPES: Mapping[str, tuple[Verdict, Verdict]] = {"hstore": (None, None)}
# Kinds other than base types (pg_type.typtype), whatever their name.
_KINDS: Mapping[str, tuple[Verdict, Verdict]] = {
    "c": (DROPPED_COMPOSITE, DROPPED_ARRAY),
    "e": (None, None),
    "r": (None, None),
    "m": (DROPPED_MULTIRANGE, DROPPED_ARRAY),
}


def _verdict(t: PgType, *, element: bool) -> Verdict:
    if t.kind in _KINDS:
        pair = _KINDS[t.kind]
    elif t.kind == "b" and t.schema == "pg_catalog" and t.name in _TYPES:
        pair = _TYPES[t.name]
    elif t.kind == "b" and t.name in _EXTENSION_TYPES:
        pair = _EXTENSION_TYPES[t.name]
    else:
        return UNTESTED
    return pair[1] if element else pair[0]


@dataclass(frozen=True, slots=True)
class ColumnSelection:
    """Debezium's column.include.list / column.exclude.list: regexes over schema.table.column.

    Debezium splits each list at unescaped commas, trims the parts and full-matches them case-
    insensitively. A pattern Python cannot compile is ignored, so pre-flight checks more columns rather
    than fewer (an unreadable include list includes everything).
    """

    include: tuple[re.Pattern[str], ...] | None = None
    exclude: tuple[re.Pattern[str], ...] = ()

    @classmethod
    def from_options(cls, options: Mapping[str, str]) -> ColumnSelection:
        include = options.get("column.include.list")
        exclude = options.get("column.exclude.list")
        included = _patterns(include) if include else None
        return cls(
            include=included if included else None,
            exclude=_patterns(exclude) if exclude else (),
        )

    def captures(self, table: str, column: str) -> bool:
        name = f"{table}.{column}"
        if self.include is not None and not any(p.fullmatch(name) for p in self.include):
            return False
        return not any(p.fullmatch(name) for p in self.exclude)


def _patterns(text: str) -> tuple[re.Pattern[str], ...]:
    parts = (p.strip().replace("\\,", ",") for p in re.split(r"(?<!\\),", text))
    out = []
    for part in parts:
        if part:
            try:
                out.append(re.compile(part, re.IGNORECASE))
            except re.error:
                continue
    return tuple(out)


def exclude_entry(table: str, column: str) -> str:
    """A column.exclude.list regex matching exactly this column."""
    return ".".join(re.escape(part) for part in (*table.split(".", 1), column))


def snapshot_reads_data(snapshot_mode: str, options: Mapping[str, str]) -> bool:
    """Whether the connector's snapshot reads the tables' rows (and so could send a date wrong)."""
    if snapshot_mode == "configuration_based":
        return options.get("snapshot.mode.configuration.based.snapshot.data", "false").lower() == "true"
    return snapshot_mode in _SNAPSHOT_READS_DATA


def is_date_column(c: ColumnFacts) -> bool:
    """date or date[] after domains: the columns whose values the snapshot may send wrong."""
    t = c.element or c.base
    return t.kind == "b" and t.schema == "pg_catalog" and t.name == "date"


def classify(columns: Iterable[ColumnFacts], selection: ColumnSelection) -> tuple[ColumnFinding, ...]:
    """Findings for every captured column, in column order; columns Debezium does not capture are skipped."""
    out: list[ColumnFinding] = []
    for c in columns:
        if selection.captures(c.table, c.column):
            out.extend(_finding(c, rule) for rule in _rules(c) if not _guarded(c, rule))
    return tuple(out)


def _rules(c: ColumnFacts) -> list[Rule]:
    rules = [GENERATED] if c.generated else []
    if c.element is None:
        verdict = _verdict(c.base, element=False)
        return rules + ([verdict] if verdict else [])
    verdict = _verdict(c.element, element=True)
    if verdict is not None and verdict.level == "refuse":
        return [*rules, verdict]  # the array is lost anyway; its dimensions do not matter
    dims = MULTI_DIM_DECLARED if c.ndims > 1 else MULTI_DIM_POSSIBLE
    return [*rules, *([verdict] if verdict else []), dims]


def _guarded(c: ColumnFacts, rule: Rule) -> bool:
    if rule.guard is None:
        return False
    pattern = re.compile(Template(rule.guard).safe_substitute(col=re.escape(_normalised(c.column))))
    return any(pattern.search(_normalised(check)) for check in c.checks)


def _normalised(check: str) -> str:
    # pg_get_constraintdef quotes identifiers only when needed and spaces operators; compare without both.
    return re.sub(r'[\s"]', "", check).lower()


def _finding(c: ColumnFacts, rule: Rule) -> ColumnFinding:
    names = {
        "col": c.column,
        "table": c.table,
        "type": c.type,  # format_type shows one [] whatever the declared dimensions
        "ndims": str(c.ndims),
        "exclude": exclude_entry(c.table, c.column),
    }
    return ColumnFinding(
        table=c.table,
        column=c.column,
        type=c.type,
        level=rule.level,
        problem=Template(rule.problem).safe_substitute(names),
        workaround=Template(rule.workaround).safe_substitute(names),
    )


def snapshot_date_findings(table: str, counts: Sequence[SnapshotDates]) -> tuple[ColumnFinding, ...]:
    """Refusals for date columns holding rows the snapshot would send wrong (streaming is exact)."""
    out = []
    for n in counts:
        wrong = []
        if n.bc_rows:
            wrong.append(
                f"{n.bc_rows} row(s) with BC dates as the AD date of the same year ('0044-03-15 BC' as 0044-03-15)"
            )
        if n.gap_rows:
            wrong.append(f"{n.gap_rows} row(s) with dates in 1582-10-05..1582-10-14 shifted by 10 days")
        if wrong:
            out.append(
                ColumnFinding(
                    table=table,
                    column=n.column,
                    type=n.type,
                    level="refuse",
                    problem=f"the snapshot would send {' and '.join(wrong)}; streamed changes carry them exactly",
                    workaround=Template(_DATE_FIX).substitute(exclude=exclude_entry(table, n.column)),
                )
            )
    return tuple(out)


# lc_monetary values whose money text Debezium parses back exactly ("$1,234.50": it drops one leading
# symbol and every comma). Measured: under de_DE ("1.234,50 €") the connector's task FAILS on the first
# money value; a locale with '.' grouping and a one-character prefix would even parse to a wrong number.
_PLAIN_MONEY_LOCALE = re.compile(r"^(C|POSIX|C\.utf-?8|en_US(\.[\w-]+)?)$", re.IGNORECASE)


def money_findings(columns: Iterable[ColumnFacts], lc_monetary: str, user: str) -> tuple[ColumnFinding, ...]:
    """Refusals for money columns when the connector's sessions format money for another locale."""
    if _PLAIN_MONEY_LOCALE.match(lc_monetary):
        return ()
    return tuple(
        ColumnFinding(
            table=c.table,
            column=c.column,
            type=c.type,
            level="refuse",
            problem=f"money is formatted for lc_monetary={lc_monetary} in the connector's sessions, which "
            "Debezium cannot parse ('Failed to parse money value' fails its task) or parses wrong",
            workaround=f"ALTER ROLE {user} SET lc_monetary = 'C' (only the connector's own sessions change); "
            f"or store the amount as numeric; or {Template(_EXCLUDE).substitute(exclude=exclude_entry(c.table, c.column))}",
        )
        for c in columns
        if c.base.name == "money" and c.element is None
    )


_DATE_FIX = (
    "correct those rows before the snapshot; or set snapshot_mode: no_data (only changes from then on "
    f"are captured); or {_EXCLUDE}"
)
