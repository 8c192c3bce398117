"""Aggregate views on the real stack: order events -> windowed aggregate (Spark state) -> Delta MERGE.

Event time is the envelope's `timestamp` header. One partition, so batch order is record order; each
`drive` is one driver run (`driver_loop.run`, availableNow): a later run is a restart from the checkpoint,
whose watermark the previous run's batches advanced.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from conftest import crash_at_failpoint, read_all
from records import OrderEvents

from devstack.event_records import register_schema
from kafkakit.positions import parse_start
from materializers.aggregates.declaration import AggregateView, Aggregation, Derived, materializer
from materializers.aggregates.job import AggregateJob, table_path
from materializers.aggregates.verify import verify_aggregate
from materializers.catalog import lookup
from materializers.decode.avro_events import NOT_KNOWN
from materializers.errors import StateIncompatible
from materializers.plan import JobPlan
from materializers.runtime import driver_loop, status
from materializers.views.warehouse.delta import query
from shop.sku_per_minute import SKU_PER_MINUTE_VIEW

pytestmark = pytest.mark.integration

T0 = 1_764_000_000_000 - 1_764_000_000_000 % 60_000  # a minute boundary (ms)
MINUTE = 60_000


def view_on(topic: str, **changes: Any) -> AggregateView:
    """The shop's example on `topic`, with a max besides and 1 minute of lateness."""
    shop = SKU_PER_MINUTE_VIEW
    return dataclasses.replace(
        shop,
        name="skus",
        source=dataclasses.replace(shop.source, topic=topic),
        allowed_lateness="1 minute",
        aggregations=(*shop.aggregations, Aggregation(op="max", column="unit_price_cents", name="top_price")),
        **changes,
    )


class Lines:
    """`order.line_added` events with an envelope time, produced to one topic."""

    def __init__(self, registry: str, uid: str, producer: Any, topic: str) -> None:
        # Subjects `<topic>-<event type>`, as the event store names them: the job reads no other's ids.
        self.events = OrderEvents(registry, uid, subject_prefix=topic)
        self.producer, self.topic, self.n = producer, topic, 0

    def add(self, at_ms: int, sku: str, quantity: int, price: int = 100) -> None:
        self.n += 1
        key, value, headers = self.events.record(
            f"o-{self.n}", 1, "order.line_added", order_id=f"o-{self.n}", sku=sku, quantity=quantity,
            unit_price_cents=price,
        )  # fmt: skip
        self.producer.produce(
            self.topic, key=key, value=value, headers=[*headers, ("timestamp", str(at_ms).encode())]
        )

    def flush(self) -> None:
        self.producer.flush()


def drive(spark: Any, plan: JobPlan, start: str = "earliest") -> status.JobStatus:
    """One driver run to the end of the topic (a thread: pytest keeps its signal handlers)."""
    code: list[int] = []
    thread = threading.Thread(
        target=lambda: code.append(
            driver_loop.run([AggregateJob(spark, plan)], parse_start(start), available_now=True)
        )
    )
    thread.start()
    thread.join(300)
    final = status.read(plan.job_dir)
    assert final is not None
    assert code == [0], final.last_error
    return final


def rows(plan: JobPlan) -> list[tuple[Any, ...]]:
    found = query(str(table_path(plan)), "SELECT * FROM t ORDER BY window_start, sku")
    return [
        (int(r["window_start"].timestamp() * 1000) - T0, r["sku"], r["lines"], r["units"], r["top_price"])  # type: ignore[attr-defined]
        for r in found
    ]


def merge_engines(table: Path) -> set[str]:
    """The engines that wrote a table's MERGE commits (Spark's `engineInfo`, delta-rs's `clientVersion`)."""
    found = set()
    for commit in (table / "_delta_log").glob("*.json"):
        for line in commit.read_text().splitlines():
            info = json.loads(line).get("commitInfo") or {}
            if info.get("operation") == "MERGE":
                engine = info.get("engineInfo") or info.get("clientVersion") or "?"
                found.add(engine.split("/")[0].split(":")[0])
    return found


def at(minute: float) -> int:
    return T0 + int(minute * MINUTE)


@pytest.fixture
def lines(endpoints: Any, uid: str, producer: Any, topics: Any) -> Lines:
    return Lines(endpoints.schema_registry_url, uid, producer, topics("mat-agg"))


def test_order_lateness_and_restarts(spark: Any, lines: Lines, run_config: Any, tmp_path: Path) -> None:
    spec = materializer(view_on(lines.topic))
    plan = JobPlan.of(spec, run_config(topic=lines.topic))
    # Run 1: out of order within one batch, and across the minute boundary.
    lines.add(at(0.5), "A", 1, 100)
    lines.add(at(1.2), "A", 2, 300)
    lines.add(at(0.1), "A", 4, 200)  # earlier than the record before: its window is still open
    lines.add(at(0.9), "B", 1, 50)
    lines.flush()
    first = drive(spark, plan)
    assert rows(plan) == [(0, "A", 2, 5, 200), (0, "B", 1, 1, 50), (MINUTE, "A", 1, 2, 300)]
    assert first.late_dropped == 0 and first.refused == 0

    # Run 2 (a restart from the checkpoint): time moves to minute 5 -> watermark 4:00 after this batch.
    lines.add(at(5.0), "C", 1, 10)
    lines.add(at(1.5), "A", 3, 100)  # behind the newest time, but the watermark is still 0:12: kept
    lines.flush()
    drive(spark, plan)
    assert rows(plan) == [
        (0, "A", 2, 5, 200), (0, "B", 1, 1, 50), (MINUTE, "A", 2, 5, 300), (5 * MINUTE, "C", 1, 1, 10),
    ]  # fmt: skip

    # Run 3: windows ending at or before 4:00 are closed: those records are dropped and counted;
    # 4:30 is within the lateness and lands in its window.
    lines.add(at(0.7), "A", 9, 999)
    lines.add(at(0.8), "A", 9, 999)  # the same window and group: Spark counts the pair once
    lines.add(at(2.5), "B", 9, 999)
    lines.add(at(3.9), "D", 9, 999)
    lines.add(at(4.5), "C", 2, 20)
    lines.flush()
    third = drive(spark, plan)
    expected = [
        (0, "A", 2, 5, 200), (0, "B", 1, 1, 50), (MINUTE, "A", 2, 5, 300),
        (4 * MINUTE, "C", 1, 2, 20), (5 * MINUTE, "C", 1, 1, 10),
    ]  # fmt: skip
    assert rows(plan) == expected
    assert third.late_dropped == 3 and third.refused == 0

    # A restart with nothing new changes nothing and keeps the totals.
    again = drive(spark, plan)
    assert rows(plan) == expected and again.late_dropped == 3
    # verify: the batch recomputation, less what each batch's watermark dropped, equals the table;
    # 4 late (record, window) pairs in 3 windows, which Spark counted as 3 dropped rows.
    check = verify_aggregate(spark, plan)
    assert (check.difference_count, check.windows, check.late_pairs, check.late_windows) == (0, 5, 4, 3)
    assert (check.counted_late, check.refused, check.batches) == (
        3,
        0,
        len(list((plan.checkpoint / "commits").glob("[0-9]*"))),
    )

    # Replay from offset 0 into a new checkpoint and table (a new home) gives the same table: the
    # replay reads the same records in one batch, so only the records that were late are compared.
    # Its MERGE is Spark's (no batch is written from the driver), the runs above delta-rs's.
    fresh = JobPlan.of(
        spec, run_config(topic=lines.topic, home=tmp_path / "replay", warehouse_driver_rows="0")
    )
    drive(spark, fresh)
    assert merge_engines(table_path(plan)) == {"delta-rs"} and merge_engines(table_path(fresh)) == {
        "Apache-Spark"
    }
    replayed = rows(fresh)
    late = {(0, "A"), (2 * MINUTE, "B"), (3 * MINUTE, "D")}
    assert [r for r in replayed if r[:2] not in late] == [r for r in expected if r[:2] not in late]
    assert verify_aggregate(spark, fresh).difference_count == 0

    # A table that drifted from its source: one value changed, one window lost.
    table = table_path(fresh)
    spark.sql(f"UPDATE delta.`{table}` SET units = 99 WHERE sku = 'D'")
    spark.sql(
        f"DELETE FROM delta.`{table}` WHERE sku = 'B' AND window_start > timestamp_millis({T0 + MINUTE})"
    )
    drifted = verify_aggregate(spark, fresh)
    assert drifted.difference_count == 2
    by_sku = {d.key["sku"]: d for d in drifted.differences}
    assert by_sku["D"].expected is not None and by_sku["D"].expected["units"] == "9"
    assert by_sku["D"].found is not None and by_sku["D"].found["units"] == "99"
    lost = by_sku["B"].expected
    assert (
        lost is not None and (lost["units"], lost["top_price"]) == ("9", "999") and by_sku["B"].found is None
    )


def test_correct_policy_updates_closed_windows_within_the_horizon(
    spark: Any, lines: Lines, run_config: Any
) -> None:
    """late_policy "correct": windows close 1 minute after the newest event time, but Spark keeps their
    state 10 minutes: a record of a closed window updates its row (a correction, counted); one behind
    the horizon is dropped (counted)."""
    view = view_on(lines.topic, late_policy="correct", correction_horizon="10 minutes")
    plan = JobPlan.of(materializer(view), run_config(topic=lines.topic))
    lines.add(at(0.5), "A", 1, 100)
    lines.add(at(1.2), "A", 2, 300)
    lines.flush()
    drive(spark, plan)
    lines.add(at(5.0), "C", 1, 10)  # the newest time: windows ending at or before 4:00 are closed
    lines.flush()
    drive(spark, plan)
    lines.add(at(0.7), "A", 9, 999)  # a closed window, within the horizon: corrected
    lines.add(at(2.5), "B", 9, 999)  # a closed window without a row yet: corrected (a new row)
    lines.add(at(4.5), "C", 2, 20)  # an open window: no correction
    lines.add(at(-7.0), "E", 9, 999)  # behind the horizon (-5:00): dropped
    lines.flush()
    final = drive(spark, plan)
    assert rows(plan) == [
        (0, "A", 2, 10, 999), (MINUTE, "A", 1, 2, 300), (2 * MINUTE, "B", 1, 9, 999),
        (4 * MINUTE, "C", 1, 2, 20), (5 * MINUTE, "C", 1, 1, 10),
    ]  # fmt: skip
    assert (final.corrected, final.late_dropped, final.refused) == (2, 1, 0)
    check = verify_aggregate(spark, plan)
    assert (check.difference_count, check.late_pairs) == (0, 1)


def test_current_window_per_group_in_redis(spark: Any, lines: Lines, run_config: Any) -> None:
    """redis_current: each group's newest window in Redis beside the table; a late update of an older
    window leaves a newer one alone; a restart writing nothing new changes nothing."""
    plan = JobPlan.of(materializer(view_on(lines.topic, redis_current=True)), run_config(topic=lines.topic))
    current = AggregateJob(spark, plan).current
    assert current is not None
    lines.add(at(0.5), "A", 1, 100)
    lines.add(at(1.2), "A", 2, 300)
    lines.add(at(0.9), "B", 4, 50)
    lines.flush()
    drive(spark, plan)
    assert current.read(["A"]) == {
        "window_start": str(T0 + MINUTE), "window_end": str(T0 + 2 * MINUTE),
        "lines": "1", "units": "2", "line_cents": "600", "orders": "1", "top_price": "300",
    }  # fmt: skip
    assert current.read(["B"]) is not None and current.read(["B"])["window_start"] == str(T0)  # type: ignore[index]
    lines.add(at(0.7), "A", 3, 100)  # window 0 of A, still open: the table changes, Redis keeps minute 1
    lines.add(at(2.5), "B", 1, 70)
    lines.flush()
    drive(spark, plan)
    assert current.read(["A"])["window_start"] == str(T0 + MINUTE)  # type: ignore[index]
    assert (0, "A", 2, 4, 100) in rows(plan)
    b = current.read(["B"])
    assert b is not None and (b["window_start"], b["units"]) == (str(T0 + 2 * MINUTE), "1")
    assert current.read(["Z"]) is None


def test_changed_window_refused(spark: Any, lines: Lines, run_config: Any) -> None:
    lines.add(at(0.5), "A", 1)
    lines.flush()
    plan = JobPlan.of(materializer(view_on(lines.topic)), run_config(topic=lines.topic))
    drive(spark, plan)
    before = rows(plan)
    log = sorted(p.name for p in (table_path(plan) / "_delta_log").iterdir())
    offsets = sorted(p.name for p in (plan.checkpoint / "offsets").iterdir())
    lines.add(at(0.6), "A", 1)
    lines.flush()
    wider = JobPlan.of(materializer(view_on(lines.topic, window="2 minutes")), run_config(topic=lines.topic))
    with pytest.raises(
        StateIncompatible, match=r"state fingerprint.*window_ms: 60000 -> 120000.*--from earliest"
    ):
        AggregateJob(spark, wider).start(parse_start("earliest"), available_now=True)
    assert rows(plan) == before
    assert sorted(p.name for p in (table_path(plan) / "_delta_log").iterdir()) == log
    assert sorted(p.name for p in (plan.checkpoint / "offsets").iterdir()) == offsets
    # Through the driver's path too: the run fails, its status names the problem.
    code: list[int] = []
    thread = threading.Thread(
        target=lambda: code.append(
            driver_loop.run([AggregateJob(spark, wider)], parse_start("earliest"), available_now=True)
        )
    )
    thread.start()
    thread.join(120)
    failed = status.read(wider.job_dir)
    assert code == [1] and failed is not None and "state fingerprint" in failed.last_error


def test_refused_records_counted(spark: Any, lines: Lines, run_config: Any, endpoints: Any, uid: str) -> None:
    lines.add(at(0.5), "A", 1)
    key, value, headers = lines.events.record(
        "o-x", 1, "order.line_added", order_id="o-x", sku="A", quantity=1, unit_price_cents=1
    )
    lines.producer.produce(lines.topic, key=key, value=value, headers=headers)  # no envelope time
    timed = [*headers, ("timestamp", str(at(0.6)).encode())]
    lines.producer.produce(lines.topic, key=key, value=value[:7], headers=timed)  # the body cut short
    # A body that decodes under the schema its id names, but that schema is another topic's.
    foreign = register_schema(endpoints.schema_registry_url, f"other-{uid}-value", FOREIGN_SCHEMA)
    lines.producer.produce(
        lines.topic, key=key, value=b"\x00" + foreign.to_bytes(4, "big") + b"\x02", headers=timed
    )
    lines.add(T0 + 80 * 365 * 24 * 60 * MINUTE, "A", 1)  # decades ahead: it would close every window
    created = lines.events.record("o-y", 1, "order.created", order_id="o-y", customer_id="c")  # not read
    lines.producer.produce(lines.topic, key=created[0], value=created[1], headers=created[2])
    lines.flush()
    plan = JobPlan.of(materializer(view_on(lines.topic)), run_config(topic=lines.topic))
    final = drive(spark, plan)
    assert rows(plan) == [(0, "A", 1, 1, 100)]
    assert final.refused == 4 and final.late_dropped == 0
    check = verify_aggregate(spark, plan)
    assert (check.difference_count, check.refused, check.counted_refused) == (0, 4, 4)
    # Each refused record is a dead letter (offsets 1-4; 0 was counted, 5 is not this view's type),
    # with its bytes and the reason, sent once: a restart with nothing new sends nothing again.
    letters = {int(dict(m.headers())["dlq-source-offset"]): m for m in read_all(endpoints, plan.dlq_topic)}
    assert sorted(letters) == [1, 2, 3, 4]
    reasons = {o: dict(m.headers())["dlq-error"].decode() for o, m in letters.items()}
    assert reasons[1] == "no event time: @envelope is missing or null"
    assert reasons[2].startswith("Avro body does not decode with writer schema id")
    assert reasons[3] == f"schema id {foreign}{NOT_KNOWN}"
    assert "is more than max_ahead (1 hour) past the batch's time" in reasons[4]
    assert letters[2].value() == value[:7] and letters[2].key() == key
    again = drive(spark, plan)
    assert again.refused == 4 and len(read_all(endpoints, plan.dlq_topic)) == 4


FOREIGN_SCHEMA = json.dumps({"type": "record", "name": "Foreign", "fields": [{"name": "n", "type": "long"}]})


def test_kill_after_merge_then_restart(lines: Lines, run_config: Any, endpoints: Any, tmp_path: Path) -> None:
    """kill -9 of the driver (`materializers start sku_per_minute`, the shop's example: 1 minute
    windows, 2 minutes of lateness) after its MERGE, before Spark committed the batch."""
    lines.add(at(0.2), "A", 1, 100)
    lines.add(at(0.4), "A", 2, 100)
    lines.add(at(10.0), "Z", 1, 5)  # the watermark moves to 8:00 once this batch is done
    lines.flush()
    config = run_config()
    argv = [
        sys.executable, "-m", "materializers.cli", "--home", str(config.home), "start", "sku_per_minute",
        "--topic", lines.topic, "--from", "earliest", "--available-now",
    ]  # fmt: skip
    env = {**os.environ, **endpoints.as_env()}
    crash_at_failpoint(argv, env, "after-merge", tmp_path / "reached")
    plan = JobPlan.of(lookup("sku_per_minute"), config.with_overrides(topic=lines.topic))
    assert not (plan.checkpoint / "commits" / "0").exists()  # merged, never committed
    # Not late for Spark: the restart re-runs batch 0 and then reads these in batch 1, and Spark drops
    # input by the watermark of the batch before (0 here), while it evicts by the current one (8:00).
    lines.add(at(0.6), "A", 4, 100)
    lines.add(at(9.5), "A", 3, 100)
    lines.flush()

    restarted = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300)
    assert restarted.returncode == 0, restarted.stderr[-3000:]
    found = query(str(table_path(plan)), "SELECT * FROM t ORDER BY window_start, sku")
    assert [
        (int(r["window_start"].timestamp() * 1000) - T0, r["sku"], r["lines"], r["units"], r["line_cents"])  # type: ignore[attr-defined]
        for r in found
    ] == [(0, "A", 3, 7, 700), (9 * MINUTE, "A", 1, 3, 300), (10 * MINUTE, "Z", 1, 1, 5)]
    # The re-run batch 0 committed nothing (Delta's txn): create, batch 0, batch 1.
    assert len(list((table_path(plan) / "_delta_log").glob("*.json"))) == 3
    shown = subprocess.run(
        [sys.executable, "-m", "materializers.cli", "--home", str(config.home), "status", "--json"],
        env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    (job,) = json.loads(shown.stdout)
    assert job["name"] == "sku_per_minute" and job["state"] == "stopped" and job["late_dropped"] == 0
    table = subprocess.run(
        [sys.executable, "-m", "materializers.cli", "--home", str(config.home), "status"],
        env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert "LATE" in table.stdout.splitlines()[0]
    verified = subprocess.run(
        [*argv[:5], "verify", "sku_per_minute", "--topic", lines.topic],
        env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert verified.returncode == 0, verified.stderr[-3000:]
    assert "0 difference(s)" in verified.stdout and "refused: 0 record(s)" in verified.stdout
    # The same name with a wider window, from the command line: refused before a session or a write.
    (tmp_path / "wider_skus.py").write_text(
        "import dataclasses\n"
        "from materializers.aggregates.declaration import materializer\n"
        "from shop.sku_per_minute import SKU_PER_MINUTE_VIEW\n"
        "WIDER = materializer(dataclasses.replace(SKU_PER_MINUTE_VIEW, window='2 minutes'))\n"
    )
    log = sorted(p.name for p in (table_path(plan) / "_delta_log").iterdir())
    wider = [*argv[:5], "start", "wider_skus:WIDER", *argv[7:]]
    refused = subprocess.run(
        wider, env={**env, "PYTHONPATH": str(tmp_path)}, capture_output=True, text=True, timeout=120
    )
    assert refused.returncode == 2 and "state fingerprint" in refused.stderr, refused.stderr[-2000:]
    assert "window_ms: 60000 -> 120000" in refused.stderr
    assert sorted(p.name for p in (table_path(plan) / "_delta_log").iterdir()) == log


def test_sliding_windows(spark: Any, lines: Lines, run_config: Any) -> None:
    """A 2-minute window sliding by 1 minute: each event counts in the two windows that hold it."""
    lines.add(at(1.5), "A", 1, 100)
    lines.add(at(2.5), "A", 2, 300)
    lines.flush()
    plan = JobPlan.of(
        materializer(view_on(lines.topic, window="2 minutes", slide="1 minute")),
        run_config(topic=lines.topic),
    )
    drive(spark, plan)
    assert rows(plan) == [(0, "A", 1, 1, 100), (MINUTE, "A", 2, 3, 300), (2 * MINUTE, "A", 1, 2, 300)]
    check = verify_aggregate(spark, plan)
    assert (check.difference_count, check.windows, check.late_pairs) == (0, 3, 0)


def test_event_time_from_a_field(spark: Any, lines: Lines, run_config: Any) -> None:
    """An event's own long field as epoch milliseconds (here a derived one); no envelope time needed."""
    for minute, sku in ((0.5, "A"), (1.5, "A"), (1.7, "B")):
        key, value, headers = lines.events.record(
            "o-f", 1, "order.line_added", order_id="o-f", sku=sku, quantity=1, unit_price_cents=at(minute)
        )
        lines.producer.produce(lines.topic, key=key, value=value, headers=headers)  # no `timestamp` header
    lines.flush()
    shop = view_on(lines.topic)
    timed = dataclasses.replace(
        shop,
        event_time="at_ms",
        derived=(*shop.derived, Derived(name="at_ms", sql="unit_price_cents", type="long")),
    )
    plan = JobPlan.of(materializer(timed), run_config(topic=lines.topic))
    final = drive(spark, plan)
    assert [r[:4] for r in rows(plan)] == [(0, "A", 1, 1), (MINUTE, "A", 1, 1), (MINUTE, "B", 1, 1)]
    assert final.refused == 0


PROVIDER = "spark.sql.streaming.stateStore.providerClass"
HDFS = "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider"


def store_of(plan: JobPlan) -> str:
    """The state store the checkpoint's newest batch ran on (Spark keeps it in the offset log)."""
    newest = max(int(p.name) for p in (plan.checkpoint / "offsets").iterdir() if p.name.isdigit())
    metadata = (plan.checkpoint / "offsets" / str(newest)).read_text().splitlines()[1]
    return str(json.loads(metadata)["conf"][PROVIDER])


def test_state_store_is_rocksdb_and_an_older_checkpoint_keeps_its_own(
    spark: Any, lines: Lines, run_config: Any, tmp_path: Path
) -> None:
    """A new checkpoint's state is in RocksDB (the toolkit's session default); one begun on Spark's
    HDFS-backed store keeps that store when restarted under the new default, and stays exact."""
    spec = materializer(view_on(lines.topic))
    new = JobPlan.of(spec, run_config(topic=lines.topic))
    old = JobPlan.of(spec, run_config(topic=lines.topic, home=tmp_path / "hdfs"))
    default = spark.conf.get(PROVIDER)
    assert default.endswith("RocksDBStateStoreProvider")
    lines.add(at(0.5), "A", 1, 100)
    lines.flush()
    spark.conf.set(PROVIDER, HDFS)  # as a checkpoint started by the toolkit's previous version
    try:
        drive(spark, old)
    finally:
        spark.conf.set(PROVIDER, default)
    lines.add(at(0.7), "A", 2, 300)
    lines.flush()
    drive(spark, old)
    drive(spark, new)
    assert (store_of(old), store_of(new)) == (HDFS, default)
    assert rows(old) == rows(new) == [(0, "A", 2, 3, 300)]
