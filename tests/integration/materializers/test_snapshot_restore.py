"""snapshot -> more changes -> restore -> continue gives exactly the views of an uninterrupted run."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from conftest import run_once
from records import debezium, produce
from view_state import view_state

from materializers.ops import snapshots
from materializers.runtime.job import JobPlan
from shop.products import PRODUCTS

pytestmark = pytest.mark.integration


def product(i: int, rev: int) -> dict[str, Any]:
    return {"name": f"p{i} r{rev}", "description": f"thing {i}", "price": f"{i}.{rev:02d}", "stock": rev}


def test_restore_then_continue_equals_uninterrupted_run(
    spark: Any, topics: Any, producer: Any, run_config: Any, tmp_path: Path, uid: str
) -> None:
    topic = topics("mat-snap")
    first = [debezium(i, 1000 + i, "c", product(i, 0)) for i in range(1, 201)]
    produce(producer, topic, first)
    plan = JobPlan.of(PRODUCTS, run_config(topic=topic))
    reference = JobPlan.of(
        PRODUCTS, run_config(topic=topic, home=str(tmp_path / "reference"), redis_prefix=f"mat-ref-{uid}")
    )
    try:
        run_once(spark, plan)
        manifest = snapshots.take(plan)
        at_snapshot = view_state(plan)
        assert manifest.offsets == {topic: {"0": 200}} and manifest.committed_batch == 0
        assert manifest.redis_keys == 200 and len(at_snapshot["search"]) == 200

        # More changes after the snapshot: updates, deletes, new rows; the job applies them.
        later = [debezium(i, 2000 + i, "u", product(i, 1)) for i in range(1, 60)]
        later += [debezium(i, 3000 + i, "d", None) for i in range(60, 80)]
        later += [debezium(i, 4000 + i, "c", product(i, 0)) for i in range(201, 241)]
        produce(producer, topic, later)
        run_once(spark, plan)
        assert view_state(plan) != at_snapshot

        began = time.monotonic()
        where, found = snapshots.check_restorable(plan, manifest.id)
        snapshots.restore(plan, where, found)
        restored_s = time.monotonic() - began
        assert view_state(plan) == at_snapshot  # every view is back, tombstones and positions included

        began = time.monotonic()
        run_once(spark, plan)  # "latest" is ignored: the restored checkpoint is pinned to the snapshot
        catch_up_s = time.monotonic() - began

        began = time.monotonic()
        run_once(spark, reference)
        rebuild_s = time.monotonic() - began
        assert view_state(plan) == view_state(reference)
        print(
            f"\nrestore {restored_s:.1f}s + catch-up {catch_up_s:.1f}s vs rebuild from 0 {rebuild_s:.1f}s "
            f"({len(first) + len(later)} records)"
        )
    finally:
        plan.cache().clear()
        reference.cache().clear()
