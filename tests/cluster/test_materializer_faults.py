"""The products materializer on the Spark standalone cluster (spark://, executors in the workers' own
environment), fed by Debezium (Avro) while rows change, through three faults in turn, `verify` exact
after each: kill -9 of a Spark worker mid-batch (its tasks run again on the other worker; the driver
goes on), of the broker leading the source partition (the Kafka source follows the election), and of
the driver (restarted from its checkpoint)."""

from __future__ import annotations

import random
import re
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from decimal import Decimal

import psycopg
import pytest
from cluster_helpers import RUNS, Cluster

from devstack import spark_cluster
from devstack.connectors import ConnectorFactory
from devstack.crash import StackFaults
from devstack.materializer_runs import MaterializerFactory, MaterializerRun
from materializers.verify import verify
from shop.products import TABLE_DDL

pytestmark = [pytest.mark.cluster, pytest.mark.integration]
ROWS = 20_000  # the snapshot: a first batch long enough to lose a worker in the middle of it
WORKERS = ("spark-worker", "spark-worker-2")


@contextmanager
def changing(dsn: str, table: str) -> Iterator[list[int]]:
    """Updates, inserts and deletes in their own transactions (~50/s) while the block runs; a writer
    that fails fails the test."""
    stop, done, failed = threading.Event(), [0], []

    def write() -> None:
        rng = random.Random(11)
        with psycopg.connect(dsn, autocommit=True) as pg:
            (next_id,) = pg.execute(f"SELECT coalesce(max(id), 0) + 1 FROM {table}").fetchone() or (1,)
            while not stop.is_set():
                kind, some = rng.random(), rng.randrange(1, next_id)
                if kind < 0.3:
                    pg.execute(
                        f"INSERT INTO {table} VALUES (%s, %s, 'new', %s, 1)",
                        (next_id, f"p{next_id}", Decimal("9.99")),
                    )
                    next_id += 1
                elif kind < 0.9:
                    pg.execute(
                        f"UPDATE {table} SET stock = stock + 1, price = price + 0.01 WHERE id = %s", (some,)
                    )
                else:
                    pg.execute(f"DELETE FROM {table} WHERE id = %s", (some,))
                done[0] += 1
                time.sleep(0.02)

    def guarded() -> None:
        try:
            write()
        except BaseException as exc:
            failed.append(exc)

    writer = threading.Thread(target=guarded, daemon=True)
    writer.start()
    try:
        yield done
    finally:
        stop.set()
        writer.join(30)
    assert not failed, failed
    assert done[0] > 0


def _settled(dsn: str, slot: str, timeout_s: float = 120.0) -> None:
    """Every change committed so far is in Kafka: Debezium confirmed the WAL position past it."""
    with psycopg.connect(dsn, autocommit=True) as pg:
        (lsn,) = pg.execute("SELECT pg_current_wal_lsn()").fetchone() or (None,)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            row = pg.execute(
                "SELECT confirmed_flush_lsn >= %s FROM pg_replication_slots WHERE slot_name = %s", (lsn, slot)
            ).fetchone()
            if row and row[0]:
                return
            time.sleep(0.5)
    raise AssertionError(f"Debezium did not confirm {lsn} on slot {slot} within {timeout_s}s")


def _exact(materializers: MaterializerFactory, run: MaterializerRun, dsn: str, slot: str) -> None:
    _settled(dsn, slot)
    materializers.wait_caught_up(run, timeout_s=300)
    differences = verify(run.plan)
    assert differences == [], differences[:5]


def _wait(condition: Callable[[], bool], what: str, timeout_s: float = 240.0) -> float:
    started = time.monotonic()
    while not condition():
        assert time.monotonic() - started < timeout_s, f"timed out waiting for {what}"
        time.sleep(0.2)
    return time.monotonic() - started


@pytest.mark.parametrize("connector_format", ["avro"], indirect=True)
@pytest.mark.parametrize("run", RUNS)
def test_a_worker_a_broker_and_the_driver_killed_in_turn_leave_every_view_exact(
    run: int,
    cluster: Cluster,
    faults: StackFaults,
    connector_factory: ConnectorFactory,
    materializer_factory: MaterializerFactory,
    fault_record: dict[str, object],
) -> None:
    dsn = cluster.handle.endpoints.pg_dsn
    table = f"public.products_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(dsn, autocommit=True) as pg:
        pg.execute(f"CREATE TABLE {table} ({TABLE_DDL})")
        pg.execute(
            f"INSERT INTO {table} SELECT g, 'p' || g, 'product ' || g, 1.00 + g / 100.0, g % 50 "
            f"FROM generate_series(1, {ROWS}) g"
        )
    spec = connector_factory.start(connector_factory.spec([table]))
    topic, slot = spec.topic_for(table), spec.resolved_slot_name
    record: dict[str, object] = {"run": run, "rows": ROWS}

    with changing(dsn, table) as changes:
        job = materializer_factory.start("shop.products:PRODUCTS", topic=topic, table=table, trigger="1s")
        # On the cluster: the backfill batch's tasks running on both workers' executors, then one
        # worker (and its executor) gone in the middle of them.
        _wait(lambda: all(_running_tasks(cluster, w) for w in WORKERS), "tasks on both workers' executors")
        assert job.committed().batch_id < 0, "the backfill batch ended before a worker could be lost"
        worker = WORKERS[run % 2]
        killed_at = time.monotonic()
        faults.crash(worker)
        _wait(lambda: job.committed().batch_id >= 0, "the backfill batch, finished without the lost worker")
        record["worker_killed_batch_done_s"] = round(time.monotonic() - killed_at, 2)
        lost = re.findall(r"Lost executor|ExecutorLostFailure|Lost task", job.log.read_text(errors="replace"))
        assert lost, "the driver never noticed the lost worker's executor"
        record["lost_task_lines"] = len(lost)
    _exact(materializer_factory, job, dsn, slot)
    faults.recover()  # the worker back: the next faults start from the whole cluster
    assert job.process.poll() is None and job.restarts == 0  # the same driver went on

    with changing(dsn, table) as more:
        time.sleep(3)
        victim, batch = cluster.leader_of(topic, 0), job.committed().batch_id
        killed_at = time.monotonic()
        faults.crash(cluster.broker_service(victim))
        cluster.wait_for_leader(topic, 0, not_on=victim)
        _wait(lambda: job.committed().batch_id > batch + 1, "a batch begun after the kill")
        record["broker_killed_next_batch_s"] = round(time.monotonic() - killed_at, 2)
        time.sleep(3)
    _exact(materializer_factory, job, dsn, slot)
    assert job.process.poll() is None and job.restarts == 0
    faults.recover()

    with changing(dsn, table) as last:
        time.sleep(3)
        materializer_factory.crash(job)
        batch = job.committed().batch_id
        materializer_factory.restart(job)
        record["driver_restart_first_batch_s"] = round(
            _wait(lambda: job.committed().batch_id > batch, "a batch of the restarted driver"), 2
        )
    _exact(materializer_factory, job, dsn, slot)
    fault_record.update(
        scenario="materializer on spark://: kill -9 a Spark worker mid-batch, then the source's leader "
        "broker, then the driver; verify exact after each",
        changes=changes[0] + more[0] + last[0],
        **record,
    )


def _running_tasks(cluster: Cluster, worker: str) -> bool:
    """The worker's executor of the running application has started a task (its own log says so)."""
    state = spark_cluster.master_state(cluster.ports["spark_master_ui"]) or {}
    active = state.get("activeapps")
    apps = [str(a.get("id")) for a in active if isinstance(a, dict)] if isinstance(active, list) else []
    logs = [p for app in apps for p in (cluster.config.state_dir / worker / "work" / app).glob("*/stderr")]
    return any("Running task" in p.read_text(errors="replace") for p in logs)
