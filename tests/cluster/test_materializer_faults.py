"""The products materializer on the Spark standalone cluster (spark://, executors in the workers' own
environment), fed by Debezium (Avro) while rows change, through three faults in turn, `verify` exact
after each: kill -9 of a Spark worker mid-batch (its tasks run again on the other worker; the driver
goes on), of the broker leading the source partition (the Kafka source follows the election), and of
the driver (restarted from its checkpoint)."""

from __future__ import annotations

import re
import time
import uuid
from decimal import Decimal

import psycopg
import pytest
from cluster_helpers import RUNS, Cluster, RowChanges, changing, wait_until

from devstack import spark_cluster
from devstack.connectors import ConnectorFactory
from devstack.crash import StackFaults
from devstack.materializer_runs import MaterializerFactory, MaterializerRun
from materializers.ops.verify import verify
from shop.products import TABLE_DDL

pytestmark = [pytest.mark.cluster, pytest.mark.integration]
# The snapshot: a first batch long enough to lose a worker in the middle of it, and larger than a
# cluster driver's batch (50,000 records), so the executors apply it, its reads split over every slot.
ROWS = 100_000
WORKERS = ("spark-worker", "spark-worker-2")


PRODUCT_CHANGES = RowChanges(
    new_row=lambda i: (i, f"p{i}", "new", Decimal("9.99"), 1),
    update_set="stock = stock + 1, price = price + 0.01",
)


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

    with changing(dsn, table, PRODUCT_CHANGES) as changes:
        job = materializer_factory.start("shop.products:PRODUCTS", topic=topic, table=table, trigger="1s")
        # On the cluster: the backfill batch's tasks running on both workers' executors, then one
        # worker (and its executor) gone in the middle of them.
        wait_until(
            lambda: all(_running_tasks(cluster, w) for w in WORKERS), "tasks on both workers' executors"
        )
        assert job.committed().batch_id < 0, "the backfill batch ended before a worker could be lost"
        worker = WORKERS[run % 2]
        killed_at = time.monotonic()
        faults.crash(worker)
        wait_until(
            lambda: job.committed().batch_id >= 0, "the backfill batch, finished without the lost worker"
        )
        record["worker_killed_batch_done_s"] = round(time.monotonic() - killed_at, 2)
        lost = re.findall(r"Lost executor|ExecutorLostFailure|Lost task", job.log.read_text(errors="replace"))
        assert lost, "the driver never noticed the lost worker's executor"
        record["lost_task_lines"] = len(lost)
    _exact(materializer_factory, job, dsn, slot)
    faults.recover()  # the worker back: the next faults start from the whole cluster
    assert job.process.poll() is None and job.restarts == 0  # the same driver went on

    with changing(dsn, table, PRODUCT_CHANGES) as more:
        time.sleep(3)
        victim, batch = cluster.leader_of(topic, 0), job.committed().batch_id
        killed_at = time.monotonic()
        faults.crash(cluster.broker_service(victim))
        cluster.wait_for_leader(topic, 0, not_on=victim)
        wait_until(lambda: job.committed().batch_id > batch + 1, "a batch begun after the kill")
        record["broker_killed_next_batch_s"] = round(time.monotonic() - killed_at, 2)
        time.sleep(3)
    _exact(materializer_factory, job, dsn, slot)
    assert job.process.poll() is None and job.restarts == 0
    faults.recover()

    with changing(dsn, table, PRODUCT_CHANGES) as last:
        time.sleep(3)
        materializer_factory.crash(job)
        batch = job.committed().batch_id
        materializer_factory.restart(job)
        record["driver_restart_first_batch_s"] = round(
            wait_until(lambda: job.committed().batch_id > batch, "a batch of the restarted driver"), 2
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
