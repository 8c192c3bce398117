"""Builders for records of the shapes the materializers read: Debezium JSON and event-store Avro."""

from __future__ import annotations

import json
from importlib.resources import files
from typing import Any

from cdc.values import DEFAULT_UNAVAILABLE_PLACEHOLDER
from devstack.event_records import EventRecords


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


class OrderEvents(EventRecords):
    """The shop's order event schemas registered under unique subjects (`<prefix>-<event type>`, by
    default `mat-<uid>`; the event store's are `<topic>-<record name>`), events encoded in wire format."""

    def __init__(self, registry_url: str, uid: str, *, subject_prefix: str | None = None) -> None:
        types = ("order.created", "order.line_added", "order.line_removed", "order.placed", "order.cancelled")
        super().__init__(
            registry_url, subject_prefix or f"mat-{uid}", {t: order_schema_text(t) for t in types}
        )


def produce(producer: Any, topic: str, records: list[tuple[bytes, bytes]]) -> None:
    """Produce (key, value) pairs in order and wait until the broker has them all."""
    for key, value in records:
        producer.produce(topic, key=key, value=value)
    producer.flush()
