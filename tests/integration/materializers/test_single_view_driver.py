"""A driver that keeps one view alone (the cache, or the search index) decodes and applies each batch in
one pass (job.process_batch): undecodable records and refused changes still reach the dead-letter
topic with their bytes, a replay changes nothing, and no other view is written. A driver without the
cache persists the decoded batch without the field maps only the cache reads (the warehouse here)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from conftest import read_all, run_once
from records import OrderEvents, debezium

from kafkakit.settings import Endpoints
from materializers.decode import positions
from materializers.runtime.job import JobPlan
from materializers.views.warehouse.delta import query
from shop.orders import ORDERS
from shop.products import PRODUCTS

pytestmark = pytest.mark.integration


def row(name: str) -> dict[str, Any]:
    return {"name": name, "description": f"{name} desc", "price": "1.00", "stock": 1}


def letters(endpoints: Endpoints, topic: str) -> dict[int, tuple[bytes | None, bytes | None, str]]:
    """Dead letters by source offset: (key, value, error)."""
    found = {}
    for m in read_all(endpoints, topic):
        headers = {k: v.decode() for k, v in m.headers()}
        found[int(headers["dlq-source-offset"])] = (m.key(), m.value(), headers["dlq-error"])
    return found


def cdc_records() -> list[tuple[bytes | None, bytes | None]]:
    return [
        debezium(1, 300, "u", row("v300")),
        (b'{"payload":{"id":9}}', b"\x00not json"),  # offset 1: poison
        debezium(1, 200, "u", row("v200")),  # late: never wins
        debezium(2, 100, "c", row("two")),
        debezium(2, 500, "d", None),
        debezium(3, 700, "x", row("bad op")),  # offset 5: unsupported op
        debezium(3, 600, "c", row("three")),
    ]


def run_alone(spark: Any, producer: Any, run_config: Any, topic: str, view: str) -> tuple[JobPlan, Any]:
    """Produce `cdc_records()` to `topic` and run the products materializer keeping `view` alone."""
    for key, value in cdc_records():
        producer.produce(topic, key=key, value=value)
    producer.flush()
    plan = JobPlan.of(PRODUCTS, run_config(topic=topic, views=view))
    return plan, run_once(spark, plan)


def assert_cdc_dead_letters(endpoints: Any, plan: JobPlan, job: Any) -> None:
    """The poison record (offset 1) and the unsupported op (offset 5) of `cdc_records()`, bytes kept."""
    records = cdc_records()
    assert job.dead_letters == 2
    dlq = letters(endpoints, plan.dlq_topic)
    assert sorted(dlq) == [1, 5]
    assert dlq[1][:2] == records[1] and "Debezium" in dlq[1][2]
    assert dlq[5][:2] == records[5] and "unsupported Debezium op x" in dlq[5][2]


def test_cdc_cache_alone(spark: Any, topics: Any, producer: Any, run_config: Any, endpoints: Any) -> None:
    topic = topics("mat-cache-only")
    plan, job = run_alone(spark, producer, run_config, topic, "cache")

    cache = plan.cache()
    assert cache.entities() == {
        "1": {"name": "v300", "description": "v300 desc", "price": "1.00", "stock": "1"},
        "3": {"name": "three", "description": "three desc", "price": "1.00", "stock": "1"},
    }
    assert cache.position("2") == positions.cdc(500, snapshot=False)
    assert_cdc_dead_letters(endpoints, plan, job)
    assert not Path(plan.warehouse().current_path).exists() and not (plan.view_dir / "search").exists()

    replay = JobPlan.of(
        PRODUCTS,
        run_config(topic=topic, views="cache", checkpoint=str(plan.job_dir / "replay-ckpt")),
    )
    before = {e: cache.position(e) for e in ("1", "2", "3")}
    run_once(spark, replay, f'{{"{topic}": {{"0": 0}}}}')
    assert {e: cache.position(e) for e in ("1", "2", "3")} == before
    assert cache.read("1") == {"name": "v300", "description": "v300 desc", "price": "1.00", "stock": "1"}


def test_cdc_search_alone(spark: Any, topics: Any, producer: Any, run_config: Any, endpoints: Any) -> None:
    topic = topics("mat-search-only")
    plan, job = run_alone(spark, producer, run_config, topic, "search")

    index = plan.search()
    assert index is not None
    expected = {
        "1": {"name": "v300", "description": "v300 desc"},
        "3": {"name": "three", "description": "three desc"},
    }
    assert index.live_documents() == expected
    assert index.search("v200") == [] and index.search("two") == []
    assert_cdc_dead_letters(endpoints, plan, job)
    assert not Path(plan.warehouse().current_path).exists() and plan.cache().entities() == {}

    replay = JobPlan.of(
        PRODUCTS,
        run_config(topic=topic, views="search", checkpoint=str(plan.job_dir / "replay-ckpt")),
    )
    run_once(spark, replay, f'{{"{topic}": {{"0": 0}}}}')
    assert index.live_documents() == expected


def test_cdc_warehouse_alone(spark: Any, topics: Any, producer: Any, run_config: Any, endpoints: Any) -> None:
    topic = topics("mat-warehouse-only")
    plan, job = run_alone(spark, producer, run_config, topic, "warehouse")

    warehouse = plan.warehouse()
    current_sql = "SELECT entity, position, deleted, name, description FROM t ORDER BY entity"
    current = query(warehouse.current_path, current_sql)
    assert current == [
        {
            "entity": "1",
            "position": positions.cdc(300, snapshot=False),
            "deleted": False,
            "name": "v300",
            "description": "v300 desc",
        },
        {
            "entity": "2",
            "position": positions.cdc(500, snapshot=False),
            "deleted": True,
            "name": None,
            "description": None,
        },
        {
            "entity": "3",
            "position": positions.cdc(600, snapshot=False),
            "deleted": False,
            "name": "three",
            "description": "three desc",
        },
    ]
    history_sql = "SELECT entity, src_offset FROM t ORDER BY src_offset"
    history = query(warehouse.history_path, history_sql)
    assert history == [
        {"entity": e, "src_offset": o} for e, o in (("1", 0), ("1", 2), ("2", 3), ("2", 4), ("3", 6))
    ]
    assert_cdc_dead_letters(endpoints, plan, job)
    assert plan.cache().entities() == {} and not (plan.view_dir / "search").exists()

    replay = JobPlan.of(
        PRODUCTS,
        run_config(topic=topic, views="warehouse", checkpoint=str(plan.job_dir / "replay-ckpt")),
    )
    run_once(spark, replay, f'{{"{topic}": {{"0": 0}}}}')
    assert query(warehouse.current_path, current_sql) == current
    assert query(warehouse.history_path, history_sql) == history


def test_event_fold_cache_alone(
    spark: Any, topics: Any, producer: Any, run_config: Any, endpoints: Any, uid: str
) -> None:
    events = OrderEvents(endpoints.schema_registry_url, uid)
    topic = topics("mat-orders-cache-only")
    created = events.record("c-1", 1, "order.created", order_id="c-1", customer_id="k")
    unknown = (b"c-2", created[1], [("event-type", b"order.exploded"), ("stream-version", b"1")])
    gap = events.record("c-1", 3, "order.placed", order_id="c-1", total_cents=5)
    for key, value, headers in (created, unknown, gap):
        producer.produce(topic, key=key, value=value, headers=headers)
    producer.flush()

    plan = JobPlan.of(ORDERS, run_config(topic=topic, views="cache"))
    job = run_once(spark, plan)
    assert plan.cache().entities() == {"c-1": {"order_id": "c-1", "customer_id": "k", "status": "draft"}}
    assert job.dead_letters == 2
    dlq = letters(endpoints, plan.dlq_topic)
    assert sorted(dlq) == [1, 2]
    assert dlq[1][:2] == unknown[:2] and "order.exploded" in dlq[1][2]
    assert dlq[2][:2] == gap[:2] and "version gap" in dlq[2][2]
