"""CDC on two Connect workers: kill -9 the worker running the Debezium task while rows change. The task
resumes on the other worker, and the fold of the compacted topic equals the table."""

from __future__ import annotations

import time
import uuid
from typing import Any

import httpx
import psycopg
import pytest
from cluster_helpers import RUNS, Cluster, RowChanges, changing
from confluent_kafka import Consumer, TopicPartition

from cdc.change_event import decode_record
from cdc.connect_client import ConnectClient
from cdc.fold import fold
from devstack.connectors import ConnectorFactory
from devstack.crash import StackFaults
from kafkakit.clients import admin_client
from kafkakit.errors import ToolkitError

pytestmark = [pytest.mark.cluster, pytest.mark.integration]
ROWS = 500


COUNTER_CHANGES = RowChanges(
    new_row=lambda i: (i, f"n{i}", 0), update_set="n = n + 1", inserts=0.4, pause_s=0.01, seed=7
)


def _table(dsn: str, table: str) -> dict[tuple[Any, ...], dict[str, Any]]:
    with psycopg.connect(dsn) as pg:
        rows = pg.execute(f"SELECT id, name, n FROM {table}").fetchall()
    return {(r[0],): {"id": r[0], "name": r[1], "n": r[2]} for r in rows}


def _fold_until_equal(cluster: Cluster, topic: str, expected: dict[Any, Any], schemas: Any) -> int:
    """Read the topic from the start until its fold equals `expected`; returns the records read."""
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": f"fold-{uuid.uuid4().hex[:8]}"})
    items: list[Any] = []
    try:
        partitions = consumer.list_topics(topic, timeout=30).topics[topic].partitions
        consumer.assign([TopicPartition(topic, p, -2) for p in partitions])
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            for msg in consumer.consume(1000, timeout=1.0):
                if msg.error() is None:
                    items.append(
                        decode_record(
                            topic=topic,
                            partition=msg.partition() or 0,
                            offset=msg.offset() or 0,
                            key=msg.key(),
                            value=msg.value(),
                            schemas=schemas,
                        )
                    )
            state = fold(items)
            if state == expected:
                return len(items)
        raise AssertionError(f"{topic}: the fold of {len(items)} records never equalled the table")
    finally:
        consumer.close()


@pytest.mark.parametrize("connector_format", ["avro"], indirect=True)
@pytest.mark.parametrize("run", RUNS)
def test_killing_the_worker_running_the_task_moves_it_and_the_topic_still_folds_to_the_table(
    run: int,
    cluster: Cluster,
    faults: StackFaults,
    connector_factory: ConnectorFactory,
    fault_record: dict[str, object],
) -> None:
    dsn = cluster.handle.endpoints.pg_dsn
    table = f"public.failover_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(dsn, autocommit=True) as pg:
        pg.execute(f"CREATE TABLE {table} (id int PRIMARY KEY, name text NOT NULL, n int NOT NULL)")
        pg.execute(f"INSERT INTO {table} SELECT g, 'n' || g, 0 FROM generate_series(1, {ROWS}) g")
    spec = connector_factory.start(connector_factory.spec([table]))
    topic = spec.topic_for(table)
    with changing(dsn, table, COUNTER_CHANGES) as done:
        time.sleep(3)
        before = ConnectClient(cluster.connect_url(1)).status(spec.name)
        victim = cluster.connect_worker_named(before.tasks[0].worker_id)
        survivor = ConnectClient(cluster.connect_url(2 if victim == "connect" else 1))
        killed_at = time.monotonic()
        faults.crash(victim)
        moved = _wait_task_elsewhere(survivor, spec.name, before.tasks[0].worker_id)
        resumed_s = time.monotonic() - killed_at
        time.sleep(5)  # changes made while the task runs on the survivor
    changes = _fold_until_equal(cluster, topic, _table(dsn, table), connector_factory.schemas)
    with admin_client({"bootstrap.servers": cluster.bootstrap}) as admin:
        partitions = admin.list_topics(topic, timeout=30).topics[topic].partitions.values()
    assert {len(p.replicas) for p in partitions} == {3}  # Connect created it with the brokers' default RF
    faults.recover()  # the killed worker back before the factory deletes the connector through it
    fault_record.update(
        scenario="cdc: kill -9 the Connect worker running the Debezium task mid-stream",
        run=run,
        killed=victim,
        task_now_on=moved,
        changes_written=done[0],
        records_folded=changes,
        task_running_elsewhere_s=round(resumed_s, 2),
    )


def _wait_task_elsewhere(connect: ConnectClient, name: str, old_worker: str, timeout_s: float = 120.0) -> str:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            status = connect.status(name)
        except (httpx.HTTPError, ToolkitError):  # the survivor answers 409/5xx while the group rebalances
            status = None
        if (
            status
            and status.tasks
            and status.tasks[0].state == "RUNNING"
            and status.tasks[0].worker_id != old_worker
        ):
            return status.tasks[0].worker_id
        time.sleep(0.5)
    raise AssertionError(f"the task of {name} did not run on another worker within {timeout_s}s")
