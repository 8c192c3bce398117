"""Every captured value arrives exactly or is refused by name, on the real stack (issue: CDC never silently
wrong). The same row is read twice, by the snapshot and by streaming, since Debezium reads them apart
(JDBC for the snapshot, pgoutput's text for streaming)."""

from __future__ import annotations

import json
from datetime import UTC, date, datetime, time
from decimal import Decimal
from typing import Any
from uuid import UUID

import psycopg
import pytest
from cdc_helpers import RECORD_FORMATS, decode_all, read_topic, unique

from cdc.change_event import ChangeEvent, decode_record
from cdc.cli import EXIT_FAILED, EXIT_REFUSED, main
from cdc.connector_spec import TopicSpec
from cdc.errors import ChangeEventDecodeError
from devstack.connectors import ConnectorFactory
from devstack.kafka_security import KafkaAccess

pytestmark = pytest.mark.integration

# column, type, literal, the exact Python value expected from both paths
EXACT = [
    ("n_inf", "numeric", "'Infinity'", Decimal("Infinity")),
    ("n_ninf", "numeric", "'-Infinity'", Decimal("-Infinity")),
    ("n_nan", "numeric(12,2)", "'NaN'", None),
    ("n_tiny", "numeric", "1e-300", Decimal("1e-300")),
    ("bits", "bit(6)", "B'000101'", "000101"),
    ("money_neg", "money", "'-1234567.89'", Decimal("-1234567.89")),
    # Debezium reports a domain's own name as the source type, so its numeric digits stay text (exact).
    ("dom_n", "{t}_dn", "12.5", "12.50"),
    ("d_arr", "date[]", "'{2020-01-01,NULL,1500-01-01}'", (date(2020, 1, 1), None, date(1500, 1, 1))),
    ("ts_arr", "timestamp[]", "'{2020-01-01 10:00:00.123456}'", (datetime(2020, 1, 1, 10, 0, 0, 123456),)),
    ("ts3_arr", "timestamp(3)[]", "'{2020-01-01 10:00:00.123}'", (datetime(2020, 1, 1, 10, 0, 0, 123000),)),
    ("t3_arr", "time(3)[]", "'{10:00:00.123}'", (time(10, 0, 0, 123000),)),
    ("tstz_arr", "timestamptz[]", "'{2020-01-01 10:00+02}'", (datetime(2020, 1, 1, 8, tzinfo=UTC),)),
    ("ttz_arr", "timetz[]", "'{10:00:00+02}'", (time(8, tzinfo=UTC),)),
    (
        "uuid_arr",
        "uuid[]",
        "'{a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11}'",
        (UUID("a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"),),
    ),
    ("jsonb_arr", "jsonb[]", "ARRAY['{\"a\": [1, null]}'::jsonb]", ({"a": [1, None]},)),
    ("enum_arr", "{t}_en[]", "'{a,b}'", ("a", "b")),
    ("tsv", "tsvector", "'a fat cat'", "'a' 'cat' 'fat'"),
    ("rng", "int4range", "'[1,5)'", "[1,5)"),
    ("ts_gap", "timestamp", "'1582-10-10 10:00'", datetime(1582, 10, 10, 10)),
    ("iv_big", "interval", "'-178000000 years'", None),  # checked below: months only
]


def _create(pg: psycopg.Connection[tuple[Any, ...]], tables: list[str], t: str, columns: str) -> str:
    tables.extend([f"table:public.{t}", f"type:{t}_en", f"domain:{t}_dn"])
    pg.execute(f"CREATE DOMAIN {t}_dn AS numeric(8,2) CHECK (VALUE > 0)")  # type: ignore[arg-type]
    pg.execute(f"CREATE TYPE {t}_en AS ENUM ('a', 'b')")  # type: ignore[arg-type]
    pg.execute(f"CREATE TABLE public.{t} (id int PRIMARY KEY, {columns})")  # type: ignore[arg-type]
    return f"public.{t}"


@pytest.mark.parametrize("connector_format", RECORD_FORMATS, indirect=True)
def test_wide_types_arrive_exactly_from_snapshot_and_stream(
    kafka: KafkaAccess,
    pg: psycopg.Connection[tuple[Any, ...]],
    tables: list[str],
    connectors: ConnectorFactory,
) -> None:
    t = unique("exact")
    table = _create(pg, tables, t, ", ".join(f"{c} {ty.format(t=t)}" for c, ty, _, _ in EXACT))
    insert = f"INSERT INTO {table} VALUES (%s, " + ", ".join(lit for _, _, lit, _ in EXACT) + ")"
    pg.execute(insert.replace("%s", "1"))  # type: ignore[arg-type]
    spec = connectors.start(connectors.spec([table]))
    pg.execute(insert.replace("%s", "2"))  # type: ignore[arg-type]
    records = read_topic(kafka, spec.topic_for(table), until=lambda rs: len(rs) >= 2)
    rows = {
        i.after["id"]: i
        for i in decode_all(records, connectors.schemas)
        if isinstance(i, ChangeEvent) and i.after
    }
    assert rows[1].source.is_snapshot and not rows[2].source.is_snapshot
    for row in (rows[1].after, rows[2].after):
        assert row is not None
        got = {c: row[c] for c, _, _, want in EXACT if want is not None}
        assert got == {c: want for c, _, _, want in EXACT if want is not None}
        assert row["iv_big"].months == -178_000_000 * 12 and row["n_nan"].is_nan()


# column, type, literal: each one refused by name on the streaming path
REFUSED = [
    ("flags", "bit varying(20)", "'10110'"),
    ("born", "date", "'0044-03-15 BC'"),
    ("at_bc", "timestamp", "'0044-03-15 10:00 BC'"),
    ("grid", "text[]", "'{{a,b},{c,d}}'"),
    ("never", "timestamptz", "'-infinity'"),
    ("midnight", "time", "'24:00:00'"),
]


@pytest.mark.parametrize("connector_format", RECORD_FORMATS, indirect=True)
def test_values_that_cannot_be_exact_are_refused_by_name_and_others_still_decode(
    stack: Any,
    kafka: KafkaAccess,
    pg: psycopg.Connection[tuple[Any, ...]],
    tables: list[str],
    connectors: ConnectorFactory,
    capsys: pytest.CaptureFixture[str],
    cli_flags: list[str],
) -> None:
    t = unique("refuse")
    table = _create(pg, tables, t, ", ".join(f"{c} {ty}" for c, ty, _ in REFUSED))
    # Past pre-flight on purpose (it refuses bit varying): this test is about what reaches the decoder.
    spec = connectors.start(connectors.spec([table], snapshot_mode="no_data"), preflight=False)
    for n, (column, _, literal) in enumerate(REFUSED, start=1):
        pg.execute(f"INSERT INTO {table} (id, {column}) VALUES ({n}, {literal})")  # type: ignore[arg-type]
    pg.execute(f"INSERT INTO {table} (id) VALUES (100)")  # type: ignore[arg-type]
    topic = spec.topic_for(table)
    records = read_topic(kafka, topic, until=lambda rs: len(rs) >= len(REFUSED) + 1)
    refused: dict[str, ChangeEventDecodeError] = {}
    decoded = []
    for r in records:
        try:
            decoded.append(
                decode_record(
                    topic=r.topic,
                    partition=r.partition,
                    offset=r.offset,
                    key=r.key,
                    value=r.value,
                    schemas=connectors.schemas,
                )
            )
        except ChangeEventDecodeError as exc:
            assert exc.column is not None, str(exc)
            refused[exc.column] = exc
    assert sorted(refused) == sorted(c for c, _, _ in REFUSED)
    for column, refusal in refused.items():
        assert refusal.table == table and refusal.fix and (refusal.topic, refusal.partition) == (topic, 0)
        assert f"{table}.{column}" in str(refusal) and "Fix:" in str(refusal)
    assert refused["flags"].source_type == "VARBIT" and "leading zeros" in str(refused["flags"])
    assert "multi-dimensional" in str(refused["grid"])
    assert [e.after["id"] for e in decoded if isinstance(e, ChangeEvent) and e.after] == [100]

    flags = [*cli_flags, "--registry-url", stack.schema_registry_url]
    capsys.readouterr()
    assert main(["tail", topic, "--from-beginning", "--idle-timeout", "3", *flags]) == EXIT_REFUSED
    stopped = capsys.readouterr()
    assert stopped.out == "" and "flags" in stopped.err  # the first record is refused: nothing printed
    skip = ["tail", topic, "--from-beginning", "--idle-timeout", "3", "--on-error", "skip", "--json", *flags]
    assert main(skip) == EXIT_REFUSED
    out = capsys.readouterr()
    assert [json.loads(line)["after"]["id"] for line in out.out.splitlines()] == [100]
    skipped = [json.loads(line) for line in out.err.splitlines()]
    assert sorted(s["column"] for s in skipped) == sorted(refused)
    assert sorted(s["skipped"]["offset"] for s in skipped) == sorted(e.offset for e in refused.values())


def test_a_16_mb_row_is_carried_and_the_connector_keeps_running(
    kafka: KafkaAccess,
    pg: psycopg.Connection[tuple[Any, ...]],
    tables: list[str],
    connectors: ConnectorFactory,
) -> None:
    table = f"public.{unique('big')}"
    tables.append(f"table:{table}")
    pg.execute(f"CREATE TABLE {table} (id int PRIMARY KEY, body text, blob bytea)")  # type: ignore[arg-type]
    spec = connectors.start(connectors.spec([table], snapshot_mode="no_data"))
    body = "é" * (8 << 20)  # 16 MiB of UTF-8
    pg.execute(f"INSERT INTO {table} VALUES (1, %s, NULL)", (body,))  # type: ignore[arg-type]
    blob = bytes(range(256)) * ((12 << 20) // 256)  # 16 MiB once base64'd into the JSON record
    pg.execute(f"INSERT INTO {table} VALUES (2, NULL, %s)", (blob,))  # type: ignore[arg-type]
    pg.execute(f"INSERT INTO {table} VALUES (3, 'small', NULL)")  # type: ignore[arg-type]
    records = read_topic(kafka, spec.topic_for(table), until=lambda rs: len(rs) >= 3, timeout=120)
    assert max(len(r.value or b"") for r in records) > 16 << 20
    rows = {e.after["id"]: e.after for e in decode_all(records) if isinstance(e, ChangeEvent) and e.after}
    assert rows[1]["body"] == body and rows[2]["blob"] == blob and rows[3]["body"] == "small"
    status = connectors.connect.status(spec.name)
    assert status.running and all(task.state == "RUNNING" for task in status.tasks)


def test_a_row_over_the_limit_is_set_aside_and_every_other_row_still_flows(
    kafka: KafkaAccess,
    pg: psycopg.Connection[tuple[Any, ...]],
    tables: list[str],
    connectors: ConnectorFactory,
    capsys: pytest.CaptureFixture[str],
    cli_flags: list[str],
) -> None:
    big, other = f"public.{unique('over')}", f"public.{unique('other')}"
    tables.extend([f"table:{big}", f"table:{other}"])
    for table in (big, other):
        pg.execute(f"CREATE TABLE {table} (id int PRIMARY KEY, body text)")  # type: ignore[arg-type]
    limit = 1 << 20
    spec = connectors.spec([big, other], snapshot_mode="no_data", topics=TopicSpec(max_message_bytes=limit))
    connectors.start(spec)
    # Worst case (every character escaped) over the limit, the record itself under it: measured, passed.
    near = "n" * 300_000
    pg.execute(f"INSERT INTO {big} VALUES (1, %s)", (near,))  # type: ignore[arg-type]
    pg.execute(f"INSERT INTO {big} VALUES (2, %s)", ("x" * (2 << 20),))  # type: ignore[arg-type]
    pg.execute(f"INSERT INTO {big} VALUES (3, 'after')")  # type: ignore[arg-type]
    pg.execute(f"INSERT INTO {other} VALUES (1, 'other table')")  # type: ignore[arg-type]
    rows = decode_all(read_topic(kafka, spec.topic_for(big), until=lambda rs: len(rs) >= 2))
    assert [
        (e.after["id"], len(e.after["body"])) for e in rows if isinstance(e, ChangeEvent) and e.after
    ] == [
        (1, len(near)),
        (3, 5),
    ]
    assert len(read_topic(kafka, spec.topic_for(other), until=lambda rs: len(rs) >= 1)) == 1
    assert spec.oversize_topic is not None
    [marker] = read_topic(kafka, spec.oversize_topic, until=lambda rs: len(rs) >= 1)
    doc = json.loads(marker.value or b"")["payload"]
    assert doc["source_topic"] == spec.topic_for(big) and doc["max_bytes"] == limit
    assert doc["size_bytes"] > 2 << 20 and doc["op"] == "c" and doc["source"]["table"] == big.split(".")[1]
    assert json.loads(marker.key or b"")["payload"]["key"] == "Struct{id=2}"
    status = connectors.connect.status(spec.name)
    assert status.running and all(task.state == "RUNNING" for task in status.tasks)

    capsys.readouterr()
    assert main(["health", spec.name, "--json", *cli_flags]) == EXIT_FAILED
    report = json.loads(capsys.readouterr().out)
    assert report["connectors"][0]["oversize_records"] == 1
    assert any("1 change record(s) over topics.max_message_bytes" in w for w in report["warnings"])
