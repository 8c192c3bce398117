"""Pure decisions: Connect response parsing, pre-flight and health assessments, JSON rendering."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime
from decimal import Decimal

from cdc.change_event import ChangeEvent, Op, RecordPosition, SourcePosition
from cdc.column_types import ColumnFacts, PgType, SnapshotDates
from cdc.connect_client import ConnectorStatus, TaskStatus, parse_status, parse_validation, snapshot_finished
from cdc.connector_spec import ConnectorSpec, DatabaseSpec, HeartbeatSpec, RegistrySpec
from cdc.health import ConnectorHealth, SlotInfo, assess
from cdc.preflight import PostgresFacts, TableFacts, column_warnings
from cdc.preflight import assess as preflight_assess
from cdc.render import event_json
from cdc.values import UNCHANGED, Interval

SPEC = ConnectorSpec(
    name="c1",
    database=DatabaseSpec(hostname="h", user="dbz", dbname="shop"),
    topic_prefix="p",
    tables=("public.a", "public.nokey", "public.keyed"),
    message_key_columns=(("public.keyed", ("code",)),),
    registry=RegistrySpec(url="http://apicurio:8080"),  # the default format (Avro) needs one
)


def test_validation_errors_per_field_plus_unknown_options() -> None:
    body = {
        "name": "io.debezium.connector.postgresql.PostgresConnector",
        "error_count": 1,
        "configs": [
            {
                "definition": {"name": "database.hostname"},
                "value": {"name": "database.hostname", "errors": ['FATAL: role "x" does not exist']},
            },
            {"definition": {"name": "slot.name"}, "value": {"name": "slot.name", "errors": []}},
            {"definition": {"name": "internal.flag"}},
        ],
    }
    result = parse_validation(
        body, {"slot.name": "s", "snapshot.mod": "x", "topic.creation.default.partitions": "1"}
    )
    assert not result.ok
    assert result.field_errors == (
        ("database.hostname", 'FATAL: role "x" does not exist'),
        ("snapshot.mod", "unknown option: neither Connect nor the connector defines it; check the spelling"),
    )


def test_status_and_snapshot_offsets() -> None:
    status = parse_status(
        {
            "name": "c1",
            "connector": {"state": "RUNNING", "worker_id": "w:1"},
            "tasks": [{"id": 0, "state": "FAILED", "worker_id": "w:1", "trace": "boom\n at x"}],
        }
    )
    assert status.failed and not status.running and status.failure_trace == "boom\n at x"
    assert not snapshot_finished({"offsets": []})
    during = {
        "offsets": [
            {
                "partition": {"server": "p"},
                "offset": {"lsn": 1, "snapshot": True, "last_snapshot_record": False},
            }
        ]
    }
    last = {
        "offsets": [
            {
                "partition": {"server": "p"},
                "offset": {"lsn": 1, "snapshot": True, "last_snapshot_record": True},
            }
        ]
    }
    streaming = {"offsets": [{"partition": {"server": "p"}, "offset": {"lsn": 9, "txId": 3}}]}
    assert not snapshot_finished(during) and snapshot_finished(last) and snapshot_finished(streaming)


def test_preflight_assessment_names_each_problem() -> None:
    facts = PostgresFacts(
        wal_level="replica",
        can_replicate=False,
        tables=(
            TableFacts(table="public.a", exists=False, primary_key=(), columns=frozenset()),
            TableFacts(table="public.nokey", exists=True, primary_key=(), columns=frozenset({"x"})),
            TableFacts(table="public.keyed", exists=True, primary_key=(), columns=frozenset({"code"})),
            TableFacts(
                table="public.cdc_heartbeat",
                exists=True,
                primary_key=("connector",),
                columns=frozenset({"connector"}),
            ),
        ),
    )
    problems = preflight_assess(SPEC, facts)
    assert [field for field, _ in problems] == [
        "wal_level",
        "database.user",
        "table.include.list",
        "table.include.list",
    ]
    assert "public.a does not exist" in problems[2][1] and "public.nokey has no primary key" in problems[3][1]


def _typed_table(*, dates_error: str | None = None) -> TableFacts:
    def col(name: str, base: str, element: str | None = None) -> ColumnFacts:
        return ColumnFacts(
            table="public.a",
            column=name,
            type=f"{element}[]" if element else base,
            base=PgType(base),
            element=PgType(element) if element else None,
        )

    return TableFacts(
        table="public.a",
        exists=True,
        primary_key=("id",),
        columns=frozenset({"id", "shape", "amounts", "d"}),
        column_types=(
            col("id", "int4"),
            col("shape", "box"),
            col("amounts", "_numeric", "numeric"),
            col("d", "date"),
        ),
        snapshot_dates=(SnapshotDates(column="d", type="date", bc_rows=1, gap_rows=0),),
        snapshot_dates_error=dates_error,
    )


def test_preflight_refuses_columns_as_problems_and_keeps_warnings_apart() -> None:
    spec = ConnectorSpec(
        name="c1",
        database=DatabaseSpec(hostname="h", user="dbz", dbname="shop"),
        topic_prefix="p",
        tables=("public.a",),
        heartbeat=HeartbeatSpec(enabled=False),
        registry=SPEC.registry,
    )
    facts = PostgresFacts(wal_level="logical", can_replicate=True, tables=(_typed_table(),))
    problems = preflight_assess(spec, facts)
    assert [field for field, _ in problems] == ["public.a.shape", "public.a.d"]
    assert "(box)" in problems[0][1] and "BC dates" in problems[1][1]
    assert [(w.column, w.level) for w in column_warnings(spec, facts)] == [("amounts", "warn")] * 2

    # Not captured, not checked; and a snapshot that reads no rows cannot send a date wrong.
    quiet = replace(spec, extra={"column.exclude.list": "public.a.shape"}, snapshot_mode="no_data")
    assert preflight_assess(quiet, facts) == []

    denied = PostgresFacts(
        wal_level="logical", can_replicate=True, tables=(_typed_table(dates_error="permission denied"),)
    )
    assert preflight_assess(quiet, denied) == []
    excluded = replace(spec, extra={"column.exclude.list": "public.a.shape"})
    assert "GRANT SELECT ON public.a TO dbz" in preflight_assess(excluded, denied)[0][1]


def _health(state: str, slot: SlotInfo | None) -> ConnectorHealth:
    task = TaskStatus(id=0, state=state, worker_id="w", trace=None)
    status = ConnectorStatus(name="c1", state="RUNNING", worker_id="w", trace=None, tasks=(task,))
    return ConnectorHealth(name="c1", slot_name="s1", status=status, slot=slot, topic_ends=())


def test_health_warnings() -> None:
    ok_slot = SlotInfo(
        slot_name="s1",
        plugin="pgoutput",
        active=True,
        wal_status="reserved",
        retained_bytes=10,
        unconfirmed_bytes=0,
    )
    assert assess([_health("RUNNING", ok_slot)], [], threshold_bytes=100) == ()
    big = SlotInfo(
        slot_name="s1",
        plugin="pgoutput",
        active=False,
        wal_status="lost",
        retained_bytes=5 * 1024**2,
        unconfirmed_bytes=0,
    )
    orphan = SlotInfo(
        slot_name="old",
        plugin="pgoutput",
        active=False,
        wal_status="reserved",
        retained_bytes=1,
        unconfirmed_bytes=1,
    )
    warnings = assess([_health("FAILED", big)], [orphan], threshold_bytes=1024)
    assert len(warnings) == 5
    assert "task 0 FAILED" in warnings[0] and "retains 5.0 MiB" in warnings[1] and "inactive" in warnings[2]
    assert "lost required WAL" in warnings[3] and "pg_drop_replication_slot('old')" in warnings[4]
    assert "does not exist" in assess([_health("RUNNING", None)], [], threshold_bytes=1)[0]
    aside = replace(_health("RUNNING", ok_slot), oversize_topic="shop.oversize", oversize_records=2)
    [warning] = assess([aside], [], threshold_bytes=100)
    assert (
        "2 change record(s) over topics.max_message_bytes" in warning and "cdc tail shop.oversize" in warning
    )


def test_event_json_is_exact_and_json_serialisable() -> None:
    event = ChangeEvent(
        op=Op.UPDATE,
        key={"id": 1},
        before=None,
        after={
            "id": 1,
            "n": Decimal("NaN"),
            "f": float("-inf"),
            "b": b"\x00",
            "big": UNCHANGED,
            "i": Interval(months=1),
        },
        source=SourcePosition(
            connector_name="p",
            db="d",
            schema="public",
            table="t",
            lsn=5,
            tx_id=7,
            commit_time=datetime(2024, 1, 1, tzinfo=UTC),
            snapshot="false",
        ),
        event_time=None,
        position=RecordPosition(topic="p.public.t", partition=0, offset=3),
    )
    doc = json.loads(json.dumps(event_json(event)))
    assert doc["after"] == {
        "id": 1,
        "n": "NaN",
        "f": "-Infinity",
        "b": "AA==",
        "big": {"unchanged": True},
        "i": "P0Y1M0DT0H0M0S",
    }
    assert (
        doc["op"] == "UPDATE"
        and doc["source"]["commit_time"] == "2024-01-01T00:00:00+00:00"
        and doc["offset"] == 3
    )
