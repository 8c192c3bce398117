"""The driver's writer-schema cache is bounded: schemas by LRU, misses by age and count, and the new
ids asked per batch by number (garbage bytes carry random ids, each a registry round trip)."""

from __future__ import annotations

import httpx
import pytest

from materializers.decode import avro_events
from materializers.decode.avro_events import MAX_LOOKUPS_PER_BATCH, MISS_TTL_S, WriterSchemas


class Registry:
    """The registry's answers (ids below 100 exist), counting the requests."""

    def __init__(self) -> None:
        self.asked: list[int] = []

    def __call__(self, url: str, schema_id: int) -> httpx.Response:
        self.asked.append(schema_id)
        if schema_id >= 100:
            return httpx.Response(404, json={"message": "not found"})
        return httpx.Response(
            200, json={"schema": f'{{"type": "record", "name": "R{schema_id}", "fields": []}}'}
        )


def test_a_batch_full_of_random_ids_costs_a_bounded_number_of_lookups() -> None:
    registry, now = Registry(), [0.0]
    schemas = WriterSchemas("http://r", fetch=registry, clock=lambda: now[0])
    assert schemas.learn([1, *range(100, 1_100)]) is True  # id 1 is sorted first: found
    assert len(registry.asked) == MAX_LOOKUPS_PER_BATCH
    assert schemas.learn(range(100, 100 + MAX_LOOKUPS_PER_BATCH - 1)) is False
    assert len(registry.asked) == MAX_LOOKUPS_PER_BATCH  # misses are remembered: not asked again
    now[0] += MISS_TTL_S
    schemas.learn([100])
    assert registry.asked[-1] == 100  # ... until they are old: asked again


def test_schemas_are_kept_least_recently_used_first_out(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(avro_events, "MAX_SCHEMAS", 3)
    registry = Registry()
    schemas = WriterSchemas("http://r", fetch=registry)
    for sid in (1, 2, 3):
        schemas.get(sid)
    schemas.get(1)  # used again: now the newest
    schemas.get(4)
    assert sorted(schemas.known()) == [1, 3, 4]
    assert schemas.trusting_cache().known() == schemas.known()  # one cache for both modes
