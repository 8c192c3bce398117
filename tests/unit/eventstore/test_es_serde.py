from __future__ import annotations

import struct

import pytest

from eventstore import EventStore, MemoryRegistry, StoreConfig
from eventstore.envelope import CommandEnvelope, EventEnvelope, Outcome, Position, Snapshot
from eventstore.errors import SchemaViolation, UndecodableRecord
from eventstore.serde import Serde, frame, header_map, unframe
from shop import order as o

POS = Position(topic="t.events", partition=3, offset=17)


def offline_serde() -> Serde:
    return EventStore(StoreConfig(name="t"), o.ORDER, registry=MemoryRegistry()).serde


@pytest.fixture
def serde() -> Serde:
    return offline_serde()


def event(version: int = 1) -> EventEnvelope:
    return EventEnvelope(
        stream_id="order-42",
        version=version,
        event_type="order.line_added",
        schema_version=1,
        event=o.LineAdded(order_id="42", sku="é-sku", quantity=3, unit_price_cents=2**40),
        command_id="cmd-1",
        correlation_id="corr",
        causation_id="cause",
        timestamp_ms=1_700_000_000_000,
    )


def test_event_round_trip_and_headers(serde: Serde) -> None:
    key, value, headers = serde.event_value(event(7))
    assert key == b"order-42"
    h = header_map(headers)
    assert h["event-type"] == "order.line_added" and h["stream-version"] == "7" and h["command-id"] == "cmd-1"
    assert h["stream-id"] == "order-42" and h["correlation-id"] == "corr" and h["causation-id"] == "cause"
    back = serde.read_event(POS, value, headers)
    assert back.event == event().event and back.version == 7 and back.position == POS
    assert back.schema_id == serde.schema_id("order.line_added")


def test_wire_format_bytes(serde: Serde) -> None:
    _, value, _ = serde.event_value(event())
    schema_id = serde.schema_id("order.line_added")
    assert value[:5] == b"\x00" + struct.pack(">I", schema_id)
    # Avro body: strings are zigzag-varint length + UTF-8; ints/longs zigzag varints.
    body = value[5:]
    assert body.startswith(b"\x04" + b"42" + b"\x0c" + "é-sku".encode() + b"\x06")
    assert unframe(frame(258, b"xy")) == (258, b"xy")
    assert frame(258, b"") == b"\x00\x00\x00\x01\x02"


def test_command_outcome_snapshot_round_trip(serde: Serde) -> None:
    command = CommandEnvelope(
        command_id="c",
        stream_id="order-1",
        command_type="order.place",
        command=o.PlaceOrder(order_id="1"),
        expected_version=None,
        correlation_id="",
        causation_id="",
        reply_partition=2,
        timestamp_ms=5,
    )
    _, value, headers = serde.command_value(command)
    assert serde.read_command(value, headers) == command
    outcome = Outcome(
        command_id="c",
        stream_id="s",
        status="conflict",
        first_version=0,
        last_version=4,
        expected_version=2,
        error_code="x",
        message="m",
    )
    assert serde.read_outcome(serde.outcome_value(outcome)) == outcome
    state = o.OrderState(
        order_id="1", status="draft", lines=(o.Line(sku="a", quantity=1, unit_price_cents=5),)
    )
    _, value, headers = serde.snapshot_value(Snapshot(stream_id="order-1", version=9, state=state))
    assert serde.read_snapshot(value, headers) == Snapshot(stream_id="order-1", version=9, state=state)


def test_schema_violation_names_field_and_reason(serde: Serde) -> None:
    with pytest.raises(SchemaViolation) as info:
        serde.encode(
            "order.add_line", {"order_id": "1", "sku": "a", "quantity": "two", "unit_price_cents": 1}
        )
    assert info.value.field == "quantity" and "expected int" in info.value.reason
    with pytest.raises(SchemaViolation) as info:
        serde.encode(
            "order.add_line", {"order_id": "1", "sku": "a", "quantity": 2**40, "unit_price_cents": 1}
        )
    assert info.value.field == "quantity"


def test_unknown_event_type_names_position(serde: Serde) -> None:
    _, value, headers = serde.event_value(event())
    bad = [(k, b"order.exploded" if k == "event-type" else v) for k, v in headers]
    with pytest.raises(UndecodableRecord, match=r"t.events\[3\]@17") as info:
        serde.read_event(POS, value, bad)
    assert (info.value.topic, info.value.partition, info.value.offset) == ("t.events", 3, 17)
    with pytest.raises(UndecodableRecord, match="schema id 999"):
        serde.read_event(POS, frame(999, value[5:]), headers)


def test_any_value_decodes_avro_json_and_bytes(serde: Serde) -> None:
    _, value, _ = serde.event_value(event())
    assert serde.any_value(value)["sku"] == "é-sku"
    assert serde.any_value(b'{"payload": {"id": 1}}') == {"payload": {"id": 1}}
    assert serde.any_value(b"\xff\xfe") == {"$bytes": "fffe"}
    assert serde.any_value(None) is None


def test_trusted_encoding_still_refuses_bad_values_naming_the_field() -> None:
    serde = offline_serde()
    with pytest.raises(SchemaViolation) as info:
        serde.encode("order.created", {"order_id": 1, "customer_id": "c"}, trusted=True)
    assert info.value.field == "order_id"
    value = serde.encode("order.created", {"order_id": "1", "customer_id": "c"}, trusted=True)
    assert serde.decode(value, "order.created")[1] == {"order_id": "1", "customer_id": "c"}
