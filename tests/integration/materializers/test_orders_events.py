"""Event-sourced orders -> Redis current state + Delta facts; poison records -> dead letters."""

from __future__ import annotations

import struct
import threading
from typing import Any

import pytest
from conftest import read_all, run_once
from records import OrderEvents
from test_one_driver import wait_for

from kafkakit.positions import parse_start
from materializers.ops.verify import verify
from materializers.runtime import driver_loop, lifecycle, timeline
from materializers.runtime.job import Job, JobPlan
from materializers.views.warehouse.delta import query
from shop.orders import ORDERS

pytestmark = pytest.mark.integration


# Batches after the first of a query are applied from the driver when small (one Spark job), larger
# ones by the executors: each path must fold, dead-letter and deduplicate alike.
PATHS = pytest.mark.parametrize("small_batch_rows", ["10000", "0"], ids=["driver", "executors"])


@PATHS
def test_order_fold_facts_and_dead_letters(
    spark: Any, topics: Any, producer: Any, run_config: Any, endpoints: Any, uid: str, small_batch_rows: str
) -> None:
    events = OrderEvents(endpoints.schema_registry_url, uid)
    topic = topics("mat-orders")
    good = [
        events.record("o-1", 1, "order.created", order_id="o-1", customer_id="c-9"),
        events.record(
            "o-1", 2, "order.line_added", order_id="o-1", sku="A", quantity=2, unit_price_cents=150
        ),
        events.record("o-1", 3, "order.line_added", order_id="o-1", sku="B", quantity=1, unit_price_cents=99),
        events.record("o-1", 4, "order.line_removed", order_id="o-1", sku="B"),
        events.record("o-1", 5, "order.placed", order_id="o-1", total_cents=300),
        events.record("o-2", 1, "order.created", order_id="o-2", customer_id="c-1"),
        events.record("o-2", 2, "order.cancelled", order_id="o-2", reason="changed mind"),
    ]
    plan = JobPlan.of(ORDERS, run_config(topic=topic, small_batch_rows=small_batch_rows))
    producer.produce(topic, key=good[0][0], value=good[0][1], headers=good[0][2])
    producer.flush()
    first = run_once(spark, plan)  # the query's first batch: the rest come in a later, known-size batch
    for key, value, headers in good[1:3]:
        producer.produce(topic, key=key, value=value, headers=headers)
    created = good[0]
    poison = [
        (created[0], b"\x01" + created[1][1:], created[2]),  # wrong magic byte
        (created[0], struct.pack(">bI", 0, 987_654_321) + b"\x02", created[2]),  # id unknown to the registry
        (b"o-3", created[1], [("event-type", b"order.exploded"), ("stream-version", b"1")]),  # unknown type
        (b"o-4", good[1][1][:6], [("event-type", b"order.line_added"), ("stream-version", b"1")]),  # cut body
    ]
    for key, value, headers in poison:
        producer.produce(topic, key=key, value=value, headers=headers)
    for key, value, headers in good[3:]:
        producer.produce(topic, key=key, value=value, headers=headers)
    producer.flush()
    job = run_once(spark, plan, job=first)  # the same driver: it knows order.created's schema
    steps = job.clock.take(1)
    assert ("decode_to_driver" in steps) == (small_batch_rows != "0") and "cache" in steps
    # The query decoded with the writer schemas it knew (order.created's); the job learned the batch's
    # new ones from its schema ids and decoded those records again, read back from Kafka, on either
    # path: no record was refused for a schema it had not asked for.
    assert "decode_again" in steps
    assert [str(d) for d in verify(plan)] == []
    cache = plan.cache()
    assert cache.read("o-1") == {
        "order_id": "o-1",
        "customer_id": "c-9",
        "status": "placed",
        "total_cents": "300",
        "line:A": "2x150",
    }
    assert cache.read("o-2") == {
        "order_id": "o-2",
        "customer_id": "c-1",
        "status": "cancelled",
        "reason": "changed mind",
    }
    assert job.dead_letters == 4
    dlq = {
        int(dict(m.headers())["dlq-source-offset"]): dict(m.headers())["dlq-error"].decode()
        for m in read_all(endpoints, plan.dlq_topic)
    }
    assert sorted(dlq) == [3, 4, 5, 6]
    assert "Confluent wire format" in dlq[3] and "987654321" in dlq[4] and "order.exploded" in dlq[5]
    assert "does not decode" in dlq[6]  # a line without its fields: dead-lettered, the batch goes on

    # Duplicates (a producer retry, a replayed stream) arrive later: nothing changes.
    for key, value, headers in good[1:3] + good[5:]:
        producer.produce(topic, key=key, value=value, headers=headers)
    producer.flush()
    run_once(spark, plan)
    assert cache.read("o-1")["status"] == "placed"  # type: ignore[index]
    facts = query(
        plan.warehouse().history_path, "SELECT count(*) AS n, count(DISTINCT entity || position) AS d FROM t"
    )[0]
    assert facts == {"n": 7, "d": 7}
    assert [str(d) for d in verify(plan)] == []


@PATHS
def test_version_gap_dead_letter_keeps_the_original_bytes(
    spark: Any, topics: Any, producer: Any, run_config: Any, endpoints: Any, uid: str, small_batch_rows: str
) -> None:
    """The cache refuses v3 after v1 (v2 missing); the dead letter carries v3's exact key and value."""
    events = OrderEvents(endpoints.schema_registry_url, uid)
    topic = topics("mat-orders-gap")
    first = events.record("g-1", 1, "order.created", order_id="g-1", customer_id="c-1")
    skipped = events.record("g-1", 3, "order.placed", order_id="g-1", total_cents=5)
    plan = JobPlan.of(ORDERS, run_config(topic=topic, small_batch_rows=small_batch_rows))
    for key, value, headers in (first, skipped):
        producer.produce(topic, key=key, value=value, headers=headers)
        producer.flush()
        job = run_once(spark, plan)  # v3 comes in the second batch: the first of known size
    assert job.dead_letters == 1
    assert plan.cache().read("g-1") == {"order_id": "g-1", "customer_id": "c-1", "status": "draft"}
    [letter] = read_all(endpoints, plan.dlq_topic)
    headers = dict(letter.headers())
    assert (letter.key(), letter.value()) == (skipped[0], skipped[1])
    assert headers["dlq-source-offset"] == b"1" and b"version gap" in headers["dlq-error"]


def test_a_running_driver_restarts_its_query_to_decode_a_new_writer_schema(
    spark: Any, topics: Any, producer: Any, run_config: Any, endpoints: Any, uid: str
) -> None:
    """A record of a writer schema the query did not decode with is read back and decoded in its batch;
    the runner then restarts the query, whose later batches decode such records in one pass."""
    events = OrderEvents(endpoints.schema_registry_url, uid)
    topic = topics("mat-orders-restart")
    plan = JobPlan.of(ORDERS, run_config(topic=topic, trigger="300ms"))
    job = Job(spark, plan)

    def send(*records: tuple[bytes, bytes, list[tuple[str, bytes]]]) -> set[int]:
        for key, value, headers in records:
            producer.produce(topic, key=key, value=value, headers=headers)
        producer.flush()
        return {int.from_bytes(value[1:5], "big") for _, value, _ in records}

    code: list[int] = []
    driver = threading.Thread(target=lambda: code.append(driver_loop.run([job], parse_start("earliest"))))
    driver.start()
    try:
        created = send(events.record("r-1", 1, "order.created", order_id="r-1", customer_id="c-1"))
        wait_for("the order in the cache", lambda: plan.cache().read("r-1") is not None)
        wait_for("the query restarted knowing order.created", lambda: created <= job.streamed)
        added = send(
            events.record(
                "r-1", 2, "order.line_added", order_id="r-1", sku="A", quantity=2, unit_price_cents=5
            )
        )
        wait_for("the line in the cache", lambda: "line:A" in (plan.cache().read("r-1") or {}))
        wait_for("the query restarted knowing order.line_added", lambda: added <= job.streamed)
        send(
            events.record(
                "r-1", 3, "order.line_added", order_id="r-1", sku="B", quantity=1, unit_price_cents=7
            )
        )
        wait_for("the second line in the cache", lambda: "line:B" in (plan.cache().read("r-1") or {}))
    finally:
        lifecycle.stop_file(plan.job_dir).touch()
        driver.join(180)
    assert not driver.is_alive() and code == [0] and job.dead_letters == 0
    applied = [e["steps"] for e in timeline.read(plan.job_dir) if e.get("event") == "batch" and e.get("rows")]
    # The first two records each came from a schema the query did not know: read back, decoded again.
    # The third, of a schema known when the query restarted, was decoded once.
    assert ["decode_again" in steps for steps in applied] == [True, True, False]
    assert [str(d) for d in verify(plan)] == []
