"""The cache's Lua script on real Redis agrees with the pure rule `positions.decide`."""

from __future__ import annotations

from typing import Any

import pytest

from materializers.decode import positions
from materializers.decode.positions import Decision
from materializers.views.redis_cache import RedisCache

pytestmark = pytest.mark.integration


def change(
    entity: str,
    pos: int,
    op: str,
    sets: dict[str, str] | None = None,
    dels: tuple[str, ...] = (),
    keep: tuple[str, ...] = (),
) -> dict[str, Any]:
    return {
        "entity": entity, "position": positions.encode(pos), "op": op, "set_fields": sets or {}, "del_fields": list(dels),
        "keep_fields": list(keep), "src_topic": "t", "src_partition": 0, "src_offset": pos, "src_key": b"k", "src_value": b"v",
    }  # fmt: skip


def test_lua_matches_decide(endpoints: Any, uid: str) -> None:
    cache = RedisCache(endpoints.redis_url, f"mat-lua-{uid}")
    try:
        steps = [
            change("a", 10, "upsert", {"x": "1", "y": "2"}),
            change("a", 5, "upsert", {"x": "old"}),  # older: skipped
            change("a", 10, "upsert", {"x": "dup"}),  # duplicate: skipped
            change("a", 20, "delete"),
            change("a", 15, "upsert", {"x": "zombie"}),  # late: must not resurrect
            change("s", 1, "patch", {"n": "1", "m": "1"}),
            change("s", 3, "patch", {"n": "3"}),  # gap: refused
            change("s", 2, "patch", {"n": "2"}, ("m",)),
            change("s", 2, "patch", {"n": "again"}),  # duplicate patch: skipped
        ]
        stored: dict[str, str | None] = {}
        for step in steps:
            expected = positions.decide(
                stored.get(step["entity"]), step["position"], sequential=step["op"] == "patch"
            )
            rejects = list(cache.apply_partition([step]))
            assert (len(rejects) == 1) == (expected is Decision.GAP), step
            if expected is Decision.APPLY:
                stored[step["entity"]] = step["position"]
            assert cache.position(step["entity"]) == stored.get(step["entity"])
        assert cache.read("a") is None and cache.position("a") == positions.encode(20)
        assert cache.read("s") == {"n": "2"}
        # Kept fields (unchanged TOAST values) survive an upsert; one the hash does not hold stays absent.
        first = [
            change("k", 1, "upsert", {"x": "1", "big": "B" * 5000, "gone": "g"}),
            change("k", 2, "upsert", {"x": "2"}, keep=("big", "never")),
        ]
        assert list(cache.apply_partition(first)) == []
        assert cache.read("k") == {"x": "2", "big": "B" * 5000}
        later = [
            change("k", 2, "upsert", {"x": "dup"}, keep=("big",)),  # duplicate: skipped
            change("k", 3, "upsert", {"x": "3", "big": "C"}),
            change("k", 4, "upsert", {"x": "4"}, keep=("big",)),
        ]
        assert list(cache.apply_partition(later)) == []
        assert cache.read("k") == {"x": "4", "big": "C"} and cache.position("k") == positions.encode(4)
        many = [change(f"e{i}", 1, "upsert", {"i": str(i)}) for i in range(1200)]  # > one pipeline
        assert list(cache.apply_partition(many)) == []
        assert len(cache.entities()) == 1202
    finally:
        cache.clear()
