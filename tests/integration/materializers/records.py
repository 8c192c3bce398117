"""Builders for records of the shapes the materializers read: Debezium JSON and event-store Avro."""

from __future__ import annotations

import json
from importlib.resources import files
from typing import Any

import httpx
from fastavro import parse_schema

from cdc.values import DEFAULT_UNAVAILABLE_PLACEHOLDER
from materializers import event_shape


def debezium(
    entity: int,
    lsn: int,
    op: str,
    row: dict[str, Any] | None,
    *,
    unavailable: tuple[str, ...] = (),
    placeholder: str = DEFAULT_UNAVAILABLE_PLACEHOLDER,
    schemas: bool = True,
) -> tuple[bytes, bytes]:
    """(key, value) as Debezium's JsonConverter writes them: with schemas (abridged), or without
    (`schemas=False`: the payloads alone).

    `unavailable` columns get `placeholder` in `after`, as for an unchanged TOASTed column.
    """
    after = {"id": entity, **(row or {}), **dict.fromkeys(unavailable, placeholder)}
    payload = {
        "before": None,
        "after": None if op == "d" else after,
        "source": {"lsn": lsn, "ts_ms": 1_764_000_000_000 + lsn, "connector": "postgresql"},
        "op": op,
        "ts_ms": 1_764_000_000_000 + lsn,
    }
    if not schemas:
        return json.dumps({"id": entity}).encode(), json.dumps(payload).encode()
    key = {"schema": {"type": "struct"}, "payload": {"id": entity}}
    return json.dumps(key).encode(), json.dumps({"schema": {"type": "struct"}, "payload": payload}).encode()


def order_schema_text(event_type: str) -> str:
    return (files("shop") / "schemas" / f"{event_type}.avsc").read_text()


def register_schema(registry_url: str, subject: str, text: str) -> int:
    """The registry id of `text` registered under `subject` (Confluent-compatible API)."""
    reply = httpx.post(
        f"{registry_url}/subjects/{subject}/versions",
        json={"schema": text},
        headers={"Content-Type": "application/vnd.schemaregistry.v1+json"},
        timeout=30,
    )
    reply.raise_for_status()
    return int(reply.json()["id"])


class OrderEvents:
    """Registers the order event schemas under unique subjects (`<prefix>-<event type>`, by default
    `mat-<uid>`; the event store's are `<topic>-<record name>`) and encodes events in wire format."""

    def __init__(self, registry_url: str, uid: str, *, subject_prefix: str | None = None) -> None:
        self.ids: dict[str, int] = {}
        self.parsed: dict[str, Any] = {}
        for event_type in (
            "order.created",
            "order.line_added",
            "order.line_removed",
            "order.placed",
            "order.cancelled",
        ):
            text = order_schema_text(event_type)
            subject = f"{subject_prefix or f'mat-{uid}'}-{event_type}"
            self.ids[event_type] = register_schema(registry_url, subject, text)
            self.parsed[event_type] = parse_schema(json.loads(text))

    def record(
        self, stream: str, version: int, event_type: str, **data: Any
    ) -> tuple[bytes, bytes, list[tuple[str, bytes]]]:
        return event_shape.encode_record(
            stream_id=stream,
            version=version,
            event_type=event_type,
            schema_id=self.ids[event_type],
            schema=self.parsed[event_type],
            data=data,
        )


def produce(producer: Any, topic: str, records: list[tuple[bytes, bytes]]) -> None:
    """Produce (key, value) pairs in order and wait until the broker has them all."""
    for key, value in records:
        producer.produce(topic, key=key, value=value)
    producer.flush()
