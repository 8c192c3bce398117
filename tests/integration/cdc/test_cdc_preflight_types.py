"""Pre-flight reads the captured columns' types from the real catalog and refuses or warns per column."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import psycopg
import pytest
from cdc_helpers import decode_all, read_topic, unique

from cdc.change_event import ChangeEvent
from cdc.cli import EXIT_OK, EXIT_REFUSED, main
from cdc.connect_client import ConnectClient
from cdc.connector_spec import DatabaseSpec
from cdc.errors import PreflightFailed
from cdc.preflight import examine, run_preflight
from devstack.connectors import ConnectorFactory
from devstack.kafka_security import KafkaAccess

pytestmark = pytest.mark.integration

Pg = psycopg.Connection[tuple[Any, ...]]


def _create(pg: Pg, tables: list[str], prefix: str, columns: str) -> str:
    table = f"public.{unique(prefix)}"
    tables.append(f"table:{table}")
    pg.execute(f"CREATE TABLE {table} (id int PRIMARY KEY, {columns})")
    return table


def _refused_columns(exc: PreflightFailed) -> dict[str, str]:
    return {field.rsplit(".", 1)[-1]: message for field, message in exc.problems if field.count(".") == 2}


def test_refused_types_are_named_per_column_until_excluded(
    pg: Pg, tables: list[str], connectors: ConnectorFactory
) -> None:
    pair = unique("pair")
    tables.append(f"type:{pair}")
    pg.execute(f"CREATE TYPE {pair} AS (a int, b text)")
    table = _create(
        pg,
        tables,
        "pfref",
        f"c_pair {pair}, c_varbit bit varying(8), c_name name, c_box box, c_grid int8[][], c_ok text, "
        "c_gen text GENERATED ALWAYS AS (c_ok || '!') STORED",
    )
    with pytest.raises(PreflightFailed) as info:
        run_preflight(connectors.spec([table]), at=connectors.preflight_at)
    refused = _refused_columns(info.value)
    assert sorted(refused) == ["c_box", "c_gen", "c_grid", "c_name", "c_pair", "c_varbit"]
    assert f"column {table}.c_pair ({pair}):" in refused["c_pair"]
    assert "(bit varying(8))" in refused["c_varbit"] and "leading zeros" in refused["c_varbit"]
    assert "streamed change sends NULL" in refused["c_name"]
    assert "2 dimensions" in refused["c_grid"]
    for message in refused.values():
        assert f"column.exclude.list: {table}." in message

    excluded = ",".join(f"{table}.{c}" for c in ("c_pair", "c_varbit", "c_name", "c_box", "c_gen"))
    excluded += rf",{table.replace('.', chr(92) + '.')}\.C_GRID"  # a regex, matched case-insensitively
    spec = connectors.spec([table], extra={"column.exclude.list": excluded})
    run_preflight(spec, at=connectors.preflight_at)
    assert examine(spec, at=connectors.preflight_at).warnings == ()  # c_ok and id are plain


def test_numeric_arrays_and_timetz_warn_until_checks_rule_the_values_out(
    pg: Pg, tables: list[str], connectors: ConnectorFactory
) -> None:
    money, amounts = unique("money"), unique("amounts")
    tables.extend([f"domain:{money}", f"domain:{amounts}"])
    pg.execute(f"CREATE DOMAIN {money} AS numeric(8, 2)")
    pg.execute(f"CREATE DOMAIN {amounts} AS numeric[]")
    table = _create(pg, tables, "pfwarn", f"c_nums numeric[], c_at timetz, c_price {money}, c_dom {amounts}")
    spec = connectors.spec([table])
    run_preflight(spec, at=connectors.preflight_at)  # warnings do not refuse
    report = examine(spec, at=connectors.preflight_at)
    assert report.problems == ()
    found = [(w.column, w.type, w.level) for w in report.warnings]
    assert found == [
        ("c_nums", "numeric[]", "warn"),
        ("c_nums", "numeric[]", "warn"),
        ("c_at", "time with time zone", "warn"),
        ("c_dom", amounts, "warn"),  # a domain over numeric[] is a numeric[]
        ("c_dom", amounts, "warn"),
    ]
    assert "NaN" in report.warnings[0].problem and "array_ndims(c_nums)" in report.warnings[1].workaround

    pg.execute(
        f"ALTER TABLE {table} ADD CHECK (NOT (c_nums && ARRAY['NaN','Infinity','-Infinity']::numeric[])), "
        "ADD CHECK (array_ndims(c_nums) = 1), ADD CHECK (c_at::time < '24:00:00')"
    )
    pg.execute(f"ALTER DOMAIN {amounts} ADD CHECK (array_ndims(VALUE) = 1)")
    assert [
        (w.column, w.problem.split(",")[0]) for w in examine(spec, at=connectors.preflight_at).warnings
    ] == [("c_dom", "an array holding NaN")]


def test_dates_the_snapshot_would_send_wrong_refuse_only_a_snapshot_that_reads_rows(
    pg: Pg, tables: list[str], connectors: ConnectorFactory
) -> None:
    table = _create(pg, tables, "pfdate", "c_day date, c_days date[], c_fine date")
    pg.execute(
        f"INSERT INTO {table} VALUES "
        "(1, '0044-03-15 BC', '{2024-01-01}', '2024-01-01'), (2, '1582-10-10', NULL, '1582-10-04'), "
        "(3, '-infinity', '{1582-10-14,0001-01-01 BC}', '1582-10-15'), (4, 'infinity', '{}', NULL)"
    )
    with pytest.raises(PreflightFailed) as info:
        run_preflight(connectors.spec([table]), at=connectors.preflight_at)  # snapshot_mode initial
    refused = _refused_columns(info.value)
    assert sorted(refused) == ["c_day", "c_days"]
    assert (
        "1 row(s) with BC dates" in refused["c_day"]
        and "1 row(s) with dates in 1582-10-05" in refused["c_day"]
    )
    assert (
        "1 row(s) with BC dates" in refused["c_days"] and "1 row(s) with dates in 1582" in refused["c_days"]
    )
    assert "snapshot_mode: no_data" in refused["c_days"]

    for spec in (
        connectors.spec([table], snapshot_mode="no_data"),
        connectors.spec([table], extra={"column.exclude.list": f"{table}.c_day.*"}),
    ):
        run_preflight(spec, at=connectors.preflight_at)
    pg.execute(f"UPDATE {table} SET c_day = '2000-01-01', c_days = NULL")
    run_preflight(connectors.spec([table], snapshot_mode="always"), at=connectors.preflight_at)


def _spec_file(stack: Any, tmp_path: Path, table: str, heartbeat: str) -> Path:
    """A spec whose heartbeat table does not exist yet: validate must not count that against it."""
    name = unique("pfcli").replace("_", "-")
    db = DatabaseSpec.from_dsn(stack.connect_view.pg_dsn)
    path = tmp_path / f"{name}.yaml"
    path.write_text(
        f"name: {name}\n"
        f"database: {{hostname: '{db.hostname}', port: {db.port}, user: {db.user}, dbname: {db.dbname}"
        + (f", password: '{db.password}'" if db.password else "")
        + "}\n"
        f"topic_prefix: {name.replace('-', '_')}\n"
        f"tables: [{table}]\n"
        f"heartbeat: {{table: {heartbeat}}}\n"
    )
    return path


def test_cli_validate_shows_warnings_and_refuses_refused_columns(
    stack: Any,
    pg: Pg,
    tables: list[str],
    connect: ConnectClient,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    cli_flags: list[str],
    preflight_flags: list[str],
) -> None:
    monkeypatch.setenv("COLUMNS", "300")  # rich tables as wide as their text, so lines stay whole
    warned = _create(pg, tables, "pfcliw", "c_at timetz")
    refused = _create(pg, tables, "pfclir", "c_at timetz, c_box box")
    # A heartbeat table whose name is part of the refused table's: its absence is forgiven, not the box.
    heartbeat = refused[: len("public.pfclir")]

    assert (
        main(["validate", str(_spec_file(stack, tmp_path, warned, heartbeat)), *cli_flags, *preflight_flags])
        == EXIT_OK
    )
    out = capsys.readouterr().out
    assert "pre-flight warnings" in out and "c_at" in out and "time with time zone" in out
    assert "CHECK (c_at::time < '24:00:00')" in out and "is valid" in out

    assert (
        main(
            [
                "validate",
                str(_spec_file(stack, tmp_path, warned, heartbeat)),
                "--json",
                *cli_flags,
                *preflight_flags,
            ]
        )
        == EXIT_OK
    )
    doc = json.loads(capsys.readouterr().out)
    assert doc["valid"] is True and doc["errors"] == []
    (warning,) = doc["warnings"]
    assert (warning["table"], warning["column"], warning["level"]) == (warned, "c_at", "warn")
    assert warning["problem"] and warning["workaround"]

    assert (
        main(["validate", str(_spec_file(stack, tmp_path, refused, heartbeat)), *cli_flags, *preflight_flags])
        == EXIT_REFUSED
    )
    out = capsys.readouterr().out
    assert f"{refused}.c_box" in out and "is invalid" in out and "pre-flight warnings" in out
    assert (
        main(
            [
                "validate",
                str(_spec_file(stack, tmp_path, refused, heartbeat)),
                "--json",
                *cli_flags,
                *preflight_flags,
            ]
        )
        == EXIT_REFUSED
    )
    doc = json.loads(capsys.readouterr().out)
    assert [field for field, _ in doc["errors"]] == [f"{refused}.c_box"]
    assert [w["column"] for w in doc["warnings"]] == ["c_at"]

    # apply refuses the same way, registers nothing, and still shows the warnings
    own_heartbeat = f"public.{unique('pfhb')}"
    tables.append(f"table:{own_heartbeat}")  # apply creates it before checking
    spec_path = _spec_file(stack, tmp_path, refused, own_heartbeat)
    assert main(["apply", str(spec_path), *cli_flags, *preflight_flags]) == EXIT_REFUSED
    captured = capsys.readouterr()
    assert (
        "c_at" in captured.out
        and f"{refused}.c_box" in captured.err
        and "nothing was registered" in captured.err
    )
    assert spec_path.stem not in connect.list_connectors()


def test_money_formatted_for_another_locale_is_refused_until_the_connector_role_uses_c(
    stack: Any, kafka: KafkaAccess, pg: Pg, tables: list[str], connectors: ConnectorFactory
) -> None:
    """Debezium parses money text by dropping one symbol and the commas: under de_DE ("1.234,50 €")
    its task failed on the first value (measured), so pre-flight refuses; the role setting fixes it."""
    role = unique("money_role")
    table = _create(pg, tables, "pfmoney", "amount money")
    password = unique("pw")  # a container's Postgres asks every login over TCP for its password
    pg.execute(f"CREATE ROLE {role} LOGIN REPLICATION SUPERUSER PASSWORD '{password}'")
    try:
        pg.execute(f"ALTER ROLE {role} SET lc_monetary = 'de_DE.UTF-8'")
        pg.execute(f"INSERT INTO {table} VALUES (1, 1234.5), (2, -0.01)")
        base = DatabaseSpec.from_dsn(stack.connect_view.pg_dsn)
        login = DatabaseSpec(
            hostname=base.hostname, port=base.port, user=role, password=password, dbname=base.dbname
        )
        spec = connectors.spec([table], database=login)
        with pytest.raises(PreflightFailed) as info:
            run_preflight(spec, at=connectors.preflight_at)
        [message] = _refused_columns(info.value).values()
        assert "lc_monetary=de_DE.UTF-8" in message and f"ALTER ROLE {role} SET lc_monetary = 'C'" in message

        pg.execute(f"ALTER ROLE {role} SET lc_monetary = 'C'")
        connectors.start(spec)
        pg.execute(f"INSERT INTO {table} VALUES (3, 98765.43)")
        topic = spec.topic_for(table)
        rows = decode_all(read_topic(kafka, topic, until=lambda rs: len(rs) >= 3))
        amounts = {e.after["id"]: e.after["amount"] for e in rows if isinstance(e, ChangeEvent) and e.after}
        assert amounts == {1: Decimal("1234.50"), 2: Decimal("-0.01"), 3: Decimal("98765.43")}
    finally:
        connectors.cleanup()
        connectors.created.clear()
        pg.execute(f"DROP OWNED BY {role}")
        pg.execute(f"DROP ROLE {role}")
