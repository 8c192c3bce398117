"""Avro records the real connector wrote (Apicurio's AvroConverter, captured by capture_fixtures.py
--format avro) decode to exactly what the JSON path decodes from the same changes; bad bytes and
unknown schema ids are refused with their position."""

from __future__ import annotations

import base64
import json
import math
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from cdc.avro_records import WriterSchema, connect_schema, writer_schema
from cdc.change_event import ChangeEvent, Tombstone, decode_record
from cdc.errors import ChangeEventDecodeError, RegistryUnavailable, SchemaNotFound

FIXTURES = Path(__file__).parent / "fixtures"
AVRO = json.loads((FIXTURES / "debezium_avro_records.json").read_text("utf-8"))
JSON = json.loads((FIXTURES / "debezium_records.json").read_text("utf-8"))
SCHEMAS = {int(i): writer_schema(int(i), text) for i, text in AVRO["schemas"].items()}


def _lookup(schema_id: int) -> WriterSchema:
    if schema_id not in SCHEMAS:
        raise SchemaNotFound(schema_id, "http://registry.test/apis/ccompat/v7")
    return SCHEMAS[schema_id]


def _bytes(text: str | None, avro: bool) -> bytes | None:
    if text is None:
        return None
    return base64.b64decode(text) if avro else text.encode()


def _decode(raw: dict[str, Any], *, avro: bool) -> ChangeEvent | Tombstone:
    return decode_record(
        topic=raw["topic"],
        partition=raw["partition"],
        offset=raw["offset"],
        key=_bytes(raw["key"], avro),
        value=_bytes(raw["value"], avro),
        schemas=_lookup if avro else None,
    )


def _comparable(value: Any) -> Any:
    """NaN never equals itself: compare it by name."""
    if isinstance(value, float) and math.isnan(value):
        return "float-nan"
    if isinstance(value, Decimal) and value.is_nan():
        return "decimal-nan"
    if isinstance(value, tuple):
        return tuple(_comparable(v) for v in value)
    return value


def _what_changed(item: ChangeEvent | Tombstone) -> Any:
    """Everything but where and when (LSNs, offsets and times differ between the two captures)."""
    images = [item.key] if isinstance(item, Tombstone) else [item.key, item.before, item.after]
    rows = [None if row is None else {k: _comparable(v) for k, v in row.items()} for row in images]
    return ("tombstone", rows) if isinstance(item, Tombstone) else (item.op, item.source.snapshot, rows)


@pytest.mark.parametrize("topic", ["torture", "toast"])
def test_avro_and_json_records_of_the_same_changes_decode_to_the_same_values(topic: str) -> None:
    from_avro = [_what_changed(_decode(r, avro=True)) for r in AVRO[topic]]
    from_json = [_what_changed(_decode(r, avro=False)) for r in JSON[topic]]
    assert len(from_avro) == len(from_json) > 1
    for got, want in zip(from_avro, from_json, strict=True):
        assert got == want


def test_the_writer_schema_becomes_the_connect_schema_json_carries_inline() -> None:
    def columns(schema: dict[str, Any]) -> list[tuple[Any, ...]]:
        after = next(f for f in schema["fields"] if f["field"] == "after")
        return [
            (f["field"], f["type"], f.get("name"), _unsuffixed(f.get("parameters"))) for f in after["fields"]
        ]

    avro_value = _bytes(AVRO["torture"][0]["value"], True)
    assert avro_value is not None
    from_registry = SCHEMAS[int.from_bytes(avro_value[1:5], "big")].connect
    inline = json.loads(JSON["torture"][0]["value"])["schema"]
    assert columns(dict(from_registry)) == columns(inline)
    assert str(from_registry["name"]).endswith(".Envelope")


def _unsuffixed(params: dict[str, str] | None) -> dict[str, str] | None:
    """Each capture names its enum type with a random suffix (mood_cap_<hex>)."""
    if params is None:
        return None
    kind = params.get("__debezium.source.column.type", "")
    return {**params, "__debezium.source.column.type": "MOOD"} if kind.startswith("MOOD_") else params


def test_unions_other_than_null_or_one_type_are_refused() -> None:
    schema = {"type": "record", "name": "R", "fields": [{"name": "x", "type": ["int", "string"]}]}
    with pytest.raises(Exception, match=r"only \[null, T\] unions"):
        connect_schema(schema)


def _first_avro(topic: str = "torture") -> tuple[bytes, bytes]:
    raw = AVRO[topic][0]
    key, value = _bytes(raw["key"], True), _bytes(raw["value"], True)
    assert key is not None and value is not None
    return key, value


def _refusal(key: bytes | None, value: bytes | None, schemas: Any = _lookup) -> ChangeEventDecodeError:
    with pytest.raises(ChangeEventDecodeError) as info:
        decode_record(topic="t.public.x", partition=2, offset=41, key=key, value=value, schemas=schemas)
    assert (info.value.topic, info.value.partition, info.value.offset) == ("t.public.x", 2, 41)
    assert "t.public.x[2]@41" in str(info.value) and "Fix:" in str(info.value)
    return info.value


def test_an_unknown_schema_id_is_refused_with_the_record_position_and_the_registry() -> None:
    key, value = _first_avro()
    unknown = value[:1] + (999_999).to_bytes(4, "big") + value[5:]
    refusal = _refusal(key, unknown)
    assert "schema id 999999 is unknown" in str(refusal) and "registry.test" in str(refusal)


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda v: v[:40], "do not decode with writer schema"),
        (lambda v: v + b"\x00\x00", "byte(s) after the Avro body"),
        (lambda v: v[:3], "not Avro in Confluent framing"),
    ],
)
def test_bytes_that_do_not_decode_are_refused(mutate: Any, message: str) -> None:
    key, value = _first_avro()
    assert message in str(_refusal(key, mutate(value)))


def test_an_avro_record_without_a_registry_says_how_to_give_one() -> None:
    key, value = _first_avro()
    assert "--registry-url" in str(_refusal(key, value, schemas=None))


def test_a_registry_that_is_down_is_not_blamed_on_the_record() -> None:
    def down(_: int) -> WriterSchema:
        raise RegistryUnavailable("schema registry at http://registry.test did not answer")

    key, value = _first_avro()
    with pytest.raises(RegistryUnavailable):
        decode_record(topic="t", partition=0, offset=0, key=key, value=value, schemas=down)


def test_a_refused_value_names_its_column_on_avro_too() -> None:
    # The torture table's bit(4) column narrowed to bit(2) in the writer schema: '1000' no longer fits.
    key, value = _first_avro()
    schema_id = int.from_bytes(value[1:5], "big")
    text = AVRO["schemas"][str(schema_id)].replace('"length":"4"', '"length":"2"')
    narrowed = writer_schema(schema_id, text)

    def lookup(i: int) -> WriterSchema:
        return narrowed if i == schema_id else _lookup(i)

    refusal = _refusal(key, value, schemas=lookup)
    assert (refusal.column, refusal.source_type) == ("c_bits", "BIT") and refusal.table is not None
    assert "4 bits do not fit bit(2)" in str(refusal)
