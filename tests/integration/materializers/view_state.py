"""Everything a materializer's views hold, as plain data, so two runs can be compared with `==`."""

from __future__ import annotations

from typing import Any

from materializers.runtime.job import JobPlan
from materializers.views.warehouse.delta import query


def redis_state(plan: JobPlan) -> dict[str, dict[str, str]]:
    """Every hash under the plan's prefix, including `_pos` and `_deleted` (tombstones count too)."""
    client = plan.cache().client()
    prefix = plan.redis_prefix + ":"
    found: dict[str, dict[str, str]] = {}
    for key in client.scan_iter(match=prefix + "*", count=1000):
        raw: dict[bytes, bytes] = client.hgetall(key)  # type: ignore[assignment]
        found[key.decode()[len(prefix) :]] = {k.decode(): v.decode() for k, v in raw.items()}
    return found


def view_state(plan: JobPlan) -> dict[str, Any]:
    """Cache, search index, Delta current and history (history without its ingestion-only columns)."""
    warehouse = plan.warehouse()
    state: dict[str, Any] = {"cache": redis_state(plan)}
    index = plan.search()
    if index is not None:
        state["search"] = index.live_documents()
    if plan.spec.current_table:
        state["current"] = query(warehouse.current_path, "SELECT * FROM t ORDER BY entity")
    state["history"] = query(warehouse.history_path, "SELECT * FROM t ORDER BY entity, position")
    return state
