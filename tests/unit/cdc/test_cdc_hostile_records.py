"""Hostile records: whatever bytes a topic holds, decoding either succeeds or raises
ChangeEventDecodeError naming the record's position, never another exception (a crash of the caller).
Mutations of the real connector's records (tests/unit/cdc/fixtures), seeded so a failure repeats."""

from __future__ import annotations

import base64
import json
import random
from collections.abc import Iterator
from typing import Any

import pytest
from test_cdc_avro_records import AVRO, JSON, _lookup

from cdc.change_event import decode_record
from cdc.errors import ChangeEventDecodeError

JUNK: tuple[Any, ...] = (
    10**30, -(10**30), 2**63, 1e308, "x", "", [], {}, None, True, [1, [2]], {"a": {"b": 1}}, "9" * 400,
    "2020-13-45T99:99:99Z", "NaN", 0.5, -1,
)  # fmt: skip
ROUNDS = 1500


def _leaves(node: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    if isinstance(node, dict):
        for k, v in node.items():
            yield from _leaves(v, (*path, k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _leaves(v, (*path, i))
    else:
        yield path


def _set(node: Any, path: tuple[Any, ...], value: Any) -> None:
    for step in path[:-1]:
        node = node[step]
    node[path[-1]] = value


def _decodes_or_names_its_position(offset: int, key: bytes | None, value: bytes, avro: bool) -> None:
    try:
        decode_record(
            topic="t", partition=3, offset=offset, key=key, value=value, schemas=_lookup if avro else None
        )
    except ChangeEventDecodeError as refused:
        assert f"t[3]@{offset}" in str(refused), str(refused)


@pytest.mark.parametrize("seed", [1, 2])
def test_json_envelopes_with_junk_leaves(seed: int) -> None:
    records = [r for group in JSON.values() for r in group if r.get("value")]
    rng = random.Random(seed)
    for offset in range(ROUNDS):
        raw = rng.choice(records)
        value = json.loads(raw["value"])
        leaves = list(_leaves(value))
        for _ in range(rng.randint(1, 3)):
            _set(value, rng.choice(leaves), rng.choice(JUNK))
        key = raw["key"].encode() if raw.get("key") else None
        _decodes_or_names_its_position(offset, key, json.dumps(value).encode(), avro=False)


@pytest.mark.parametrize("seed", [1, 2])
def test_avro_bodies_flipped_cut_and_padded(seed: int) -> None:
    records = [r for group in ("torture", "toast") for r in AVRO[group] if r.get("value")]
    rng = random.Random(seed)
    for offset in range(ROUNDS):
        raw = rng.choice(records)
        body = bytearray(base64.b64decode(raw["value"]))
        kind = rng.random()
        if kind < 0.5:
            for _ in range(rng.randint(1, 4)):
                body[rng.randrange(5, len(body))] = rng.randrange(256)
        elif kind < 0.8:
            body = body[: rng.randrange(5, len(body))]
        else:
            at = rng.randrange(5, len(body))
            body[at:at] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 9)))
        key = base64.b64decode(raw["key"]) if raw.get("key") else None
        _decodes_or_names_its_position(offset, key, bytes(body), avro=True)


def test_an_envelope_time_past_year_9999_is_named() -> None:
    raw = next(r for r in JSON["torture"] if r.get("value"))
    value = json.loads(raw["value"])
    value["payload"]["ts_us"] = 10**30
    with pytest.raises(
        ChangeEventDecodeError, match=r"envelope ts_us 1000000000000000000000000000000 is out of the range"
    ):
        decode_record(topic="t", partition=0, offset=7, key=None, value=json.dumps(value).encode())
