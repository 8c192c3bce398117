"""Snapshot + streaming on the real stack: the fold of a compacted CDC topic equals the table."""

from __future__ import annotations

import random
import string
import threading
import time
from typing import Any

import psycopg
import pytest
from cdc_helpers import RECORD_FORMATS, decode_all, read_topic, unique
from confluent_kafka.admin import ConfigResource

from cdc.change_event import ChangeEvent, Op, Tombstone
from cdc.connect_client import ConnectClient
from cdc.fold import fold
from cdc.values import UNCHANGED
from devstack.connectors import ConnectorFactory
from devstack.crash import StackFaults
from devstack.kafka_security import KafkaAccess

pytestmark = pytest.mark.integration
Conn = psycopg.Connection[tuple[Any, ...]]


def _table_state(pg: Conn, table: str) -> dict[tuple[Any, ...], dict[str, Any]]:
    cur = pg.execute(f"SELECT * FROM {table}")  # type: ignore[arg-type]
    names = [d.name for d in cur.description or ()]
    return {(row[0],): dict(zip(names, row, strict=True)) for row in cur.fetchall()}


def _fold_equals(pg: Conn, table: str, kafka: KafkaAccess, topic: str) -> dict[tuple[Any, ...], Any]:
    """Read the topic until its fold equals the table (bounded); return the fold."""
    expected = _table_state(pg, table)
    records = read_topic(kafka, topic, until=lambda rs: fold(decode_all(rs)) == expected, timeout=60)
    return fold(decode_all(records))


def test_snapshot_then_changes_fold_to_the_table(
    kafka: KafkaAccess, pg: Conn, tables: list[str], connectors: ConnectorFactory, connect: ConnectClient
) -> None:
    table = f"public.{unique('orders')}"
    tables.append(f"table:{table}")
    pg.execute(f"CREATE TABLE {table} (id int PRIMARY KEY, item text NOT NULL, qty int)")  # type: ignore[arg-type]
    pg.execute(f"INSERT INTO {table} SELECT g, 'item' || g, g FROM generate_series(1, 5) g")  # type: ignore[arg-type]
    spec = connectors.start(connectors.spec([table]))
    connect.wait_snapshot_complete(spec.name, timeout=60)
    topic = spec.topic_for(table)

    snap = read_topic(kafka, topic, until=lambda rs: len(rs) >= 5)
    assert {e.op for e in decode_all(snap) if isinstance(e, ChangeEvent)} == {Op.READ}

    pg.execute(f"INSERT INTO {table} VALUES (6, 'new', 1)")  # type: ignore[arg-type]
    pg.execute(f"UPDATE {table} SET qty = qty * 10 WHERE id IN (1, 6)")  # type: ignore[arg-type]
    pg.execute(f"DELETE FROM {table} WHERE id IN (2, 3)")  # type: ignore[arg-type]
    state = _fold_equals(pg, table, kafka, topic)
    assert sorted(state) == [(1,), (4,), (5,), (6,)] and state[(6,)]["qty"] == 10

    items = decode_all(read_topic(kafka, topic, until=lambda rs: len(rs) >= 12))
    ops = [i.op if isinstance(i, ChangeEvent) else "tombstone" for i in items]
    assert ops.count(Op.CREATE) == 1 and ops.count(Op.UPDATE) == 2 and ops.count(Op.DELETE) == 2
    deleted = [i.key for i in items if isinstance(i, Tombstone)]
    assert deleted == [{"id": 2}, {"id": 3}]

    admin = kafka.admin()
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    config = admin.describe_configs([resource])[resource].result(timeout=10)
    assert config["cleanup.policy"].value == "compact"


@pytest.mark.parametrize("connector_format", RECORD_FORMATS, indirect=True)
def test_toast_column_not_touched_is_unchanged(
    kafka: KafkaAccess, pg: Conn, tables: list[str], connectors: ConnectorFactory
) -> None:
    table = f"public.{unique('toast')}"
    tables.append(f"table:{table}")
    pg.execute(f"CREATE TABLE {table} (id int PRIMARY KEY, body text, n int)")  # type: ignore[arg-type]
    pg.execute(f"ALTER TABLE {table} ALTER COLUMN body SET STORAGE EXTERNAL")  # type: ignore[arg-type]
    spec = connectors.start(connectors.spec([table]))
    body = "".join(random.choices(string.ascii_letters + string.digits, k=5000))
    pg.execute(f"INSERT INTO {table} VALUES (1, %s, 1)", (body,))  # type: ignore[arg-type]
    pg.execute(f"UPDATE {table} SET n = 2 WHERE id = 1")  # type: ignore[arg-type]
    items = decode_all(
        read_topic(kafka, spec.topic_for(table), until=lambda rs: len(rs) >= 2),
        connectors.schemas,
    )
    update = items[-1]
    assert isinstance(update, ChangeEvent) and update.op is Op.UPDATE and update.after is not None
    assert update.after["body"] is UNCHANGED and update.after["n"] == 2
    assert fold(items)[(1,)] == {"id": 1, "body": body, "n": 2}


@pytest.mark.parametrize("connector_format", RECORD_FORMATS, indirect=True)
def test_schema_change_while_running(
    kafka: KafkaAccess,
    pg: Conn,
    tables: list[str],
    connectors: ConnectorFactory,
    connect: ConnectClient,
    connector_format: str,
) -> None:
    table = f"public.{unique('evolve')}"
    tables.append(f"table:{table}")
    pg.execute(f"CREATE TABLE {table} (id int PRIMARY KEY, a text, b int)")  # type: ignore[arg-type]
    spec = connectors.start(connectors.spec([table]))
    topic = spec.topic_for(table)
    pg.execute(f"INSERT INTO {table} VALUES (1, 'one', 1)")  # type: ignore[arg-type]
    pg.execute(f"ALTER TABLE {table} ADD COLUMN c numeric(10, 2)")  # type: ignore[arg-type]
    pg.execute(f"INSERT INTO {table} VALUES (2, 'two', 2, 2.50)")  # type: ignore[arg-type]
    pg.execute(f"ALTER TABLE {table} DROP COLUMN b")  # type: ignore[arg-type]
    pg.execute(f"UPDATE {table} SET a = 'uno' WHERE id = 1")  # type: ignore[arg-type]
    records = read_topic(kafka, topic, until=lambda rs: len(rs) >= 3)
    items = decode_all(records, connectors.schemas)
    shapes = [tuple(i.after) for i in items if isinstance(i, ChangeEvent) and i.after is not None]
    assert shapes == [("id", "a", "b"), ("id", "a", "b", "c"), ("id", "a", "c")]
    if connector_format == "avro":  # each shape its own writer schema, registered and read mid-stream
        assert len({(r.value or b"")[1:5] for r in records}) == 3
    assert connect.status(spec.name).running  # no restart needed
    # Rows untouched since DROP COLUMN keep the old column in their latest event: project on the
    # table's current columns before comparing.
    current = _table_state(pg, table)
    folded = fold(items)
    assert {k: {c: row[c] for c in current[k]} for k, row in folded.items()} == current
    assert "b" in folded[(2,)] and "b" not in folded[(1,)]


def _burst(pg: Conn, table: str, start: int, count: int = 50, pause_s: float = 0.0) -> None:
    """Upserts over 70 keys with a delete every 7th change: inserts, updates and deletes interleaved."""
    for i in range(start, start + count):
        pg.execute(
            f"INSERT INTO {table} VALUES (%s, 0) ON CONFLICT (id) DO UPDATE SET v = {table}.v + 1",  # type: ignore[arg-type]
            (i % 70,),
        )
        if i % 7 == 0:
            pg.execute(f"DELETE FROM {table} WHERE id = %s", ((i * 3) % 70,))  # type: ignore[arg-type]
        time.sleep(pause_s)


def test_connect_worker_kill_9_mid_stream_loses_nothing(
    stack: Any,
    kafka: KafkaAccess,
    pg: Conn,
    tables: list[str],
    connectors: ConnectorFactory,
    connect: ConnectClient,
    stack_faults: StackFaults,
) -> None:
    """kill -9 the Connect worker while changes stream, write while it is down, restart it: the fold of
    the topic is exact (Debezium resends from its last flushed offset: duplicates allowed, gaps not)."""
    table = f"public.{unique('crash')}"
    tables.append(f"table:{table}")
    pg.execute(f"CREATE TABLE {table} (id int PRIMARY KEY, v int NOT NULL)")  # type: ignore[arg-type]
    spec = connectors.start(connectors.spec([table]))

    def write_steadily() -> None:
        with psycopg.connect(stack.pg_dsn, autocommit=True) as writer:
            _burst(writer, table, 0, count=300, pause_s=0.02)

    writer = threading.Thread(target=write_steadily)
    writer.start()
    time.sleep(2)  # let the stream get going: the crash must land mid-stream
    stack_faults.crash("connect")
    writer.join()  # the rest of the changes are written while no worker runs
    stack_faults.recover()
    connect.wait_running(spec.name, timeout=90)
    _burst(pg, table, 300)
    state = _fold_equals(pg, table, kafka, spec.topic_for(table))
    assert len(state) == len(_table_state(pg, table)) > 0


def test_connector_and_task_restart_lose_nothing(
    kafka: KafkaAccess, pg: Conn, tables: list[str], connectors: ConnectorFactory, connect: ConnectClient
) -> None:
    """Restart the connector (with tasks) and then one task mid-stream; the fold stays exact.

    Killing the Connect worker process is left to the stack owner's tests (shared worker).
    """
    table = f"public.{unique('restart')}"
    tables.append(f"table:{table}")
    pg.execute(f"CREATE TABLE {table} (id int PRIMARY KEY, v int NOT NULL)")  # type: ignore[arg-type]
    spec = connectors.start(connectors.spec([table]))
    topic = spec.topic_for(table)

    _burst(pg, table, 0)
    connect.restart(spec.name, only_failed=False)
    _burst(pg, table, 50)
    connect.wait_running(spec.name, timeout=60)
    connect.restart_task(spec.name, 0)
    _burst(pg, table, 100)
    connect.wait_running(spec.name, timeout=60)
    _burst(pg, table, 150)
    state = _fold_equals(pg, table, kafka, topic)
    assert len(state) == len(_table_state(pg, table)) > 0
