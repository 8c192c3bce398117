"""Late, duplicate and out-of-order CDC records never move a view backwards or resurrect a delete."""

from __future__ import annotations

from typing import Any

import pytest
from conftest import run_once
from records import debezium

from materializers.decode import positions
from materializers.runtime.job import JobPlan
from materializers.views.warehouse.delta import query
from shop.products import PRODUCTS

pytestmark = pytest.mark.integration


def row(name: str) -> dict[str, Any]:
    return {"name": name, "description": f"{name} desc", "price": "1.00", "stock": 1}


@pytest.mark.parametrize("small_batch_rows", ["10000", "0"], ids=["driver", "executors"])
def test_older_positions_never_win(
    spark: Any, topics: Any, producer: Any, run_config: Any, small_batch_rows: str
) -> None:
    topic = topics("mat-ooo")
    first = [
        debezium(1, 300, "u", row("v300")),
        debezium(2, 100, "c", row("two")),
        debezium(2, 500, "d", None),
    ]
    for key, value in first:
        producer.produce(topic, key=key, value=value)
    producer.flush()
    # The second batch is the first of known size: applied from the driver when small, else by executors.
    plan = JobPlan.of(PRODUCTS, run_config(topic=topic, small_batch_rows=small_batch_rows))
    run_once(spark, plan)

    # Next batch: an older update of 1, a duplicate of 1@300, a late (pre-delete) update of 2, and a
    # duplicate delete; then 3 arrives out of order (older after newer) within one batch.
    late = [
        debezium(1, 200, "u", row("v200")),
        debezium(1, 300, "u", row("v300")),
        debezium(2, 450, "u", row("zombie")),
        debezium(2, 500, "d", None),
        debezium(3, 700, "u", row("v700")),
        debezium(3, 600, "c", row("v600")),
    ]
    for key, value in late:
        producer.produce(topic, key=key, value=value)
    producer.flush()
    run_once(spark, plan)

    cache = plan.cache()
    assert cache.read("1") == {"name": "v300", "description": "v300 desc", "price": "1.00", "stock": "1"}
    assert cache.read("2") is None and cache.position("2") == positions.cdc(500, snapshot=False)
    assert cache.read("3") is not None and cache.read("3")["name"] == "v700"  # type: ignore[index]
    current = {
        r["entity"]: r
        for r in query(plan.warehouse().current_path, "SELECT entity, position, deleted, name FROM t")
    }
    assert current["1"]["name"] == "v300" and current["1"]["position"] == positions.cdc(300, snapshot=False)
    assert current["2"]["deleted"] is True and current["2"]["position"] == positions.cdc(500, snapshot=False)
    assert current["3"]["name"] == "v700"
    history = query(plan.warehouse().history_path, "SELECT entity, position FROM t ORDER BY entity, position")
    pairs = [(r["entity"], positions.decode(str(r["position"]))) for r in history]
    assert pairs == [("1", 200), ("1", 300), ("2", 100), ("2", 450), ("2", 500), ("3", 600), ("3", 700)]
    index = plan.search()
    assert index is not None and set(index.live_documents()) == {"1", "3"}


def test_a_local_backfill_runs_in_batches_the_driver_applies_whole(
    spark: Any, topics: Any, producer: Any, run_config: Any
) -> None:
    from materializers.runtime import checkpoint

    topic = topics("mat-cap")
    records = [debezium(i, 100 + i, "r", row(f"p{i}")) for i in range(1, 8)]
    for key, value in records:
        producer.produce(topic, key=key, value=value)
    producer.flush()
    # No --max-offsets-per-trigger: on the local master a batch holds at most --small-batch-rows records.
    plan = JobPlan.of(PRODUCTS, run_config(topic=topic, small_batch_rows="3"))
    job = run_once(spark, plan)

    sizes = [checkpoint.planned_records(plan.checkpoint, b) for b in range(3)]
    assert sizes == [3, 3, 1] and checkpoint.committed(plan.checkpoint).batch_id == 2
    assert all("decode_to_driver" in job.clock.take(b) for b in range(3))  # the first batch too
    current = query(plan.warehouse().current_path, "SELECT entity, name FROM t ORDER BY entity")
    assert [(r["entity"], r["name"]) for r in current] == [(str(i), f"p{i}") for i in range(1, 8)]
    assert plan.cache().read("7") == {"name": "p7", "description": "p7 desc", "price": "1.00", "stock": "1"}
