"""Event-store records made outside an event store, for tests, benches and the demo: the same key, value
(Confluent framing + Avro body) and headers as `eventstore` writes, with an envelope `timestamp` of the
caller's choosing, so event times can arrive out of order and late on purpose.

The schemas are registered under `<subject prefix>-<event type>`; with the topic as the prefix these
are subjects of the topic, as the aggregate views require (an event store's own subjects are
`<topic>-<record full name>`, which the views read alike).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import httpx

from materializers.decode import event_shape

ENVELOPE_TIME_HEADER = "timestamp"  # eventstore/serde.py H_TIMESTAMP: epoch milliseconds
Record = tuple[bytes, bytes, list[tuple[str, str | bytes | None]]]


def register_schema(registry_url: str, subject: str, text: str) -> int:
    """The registry id of `text` registered under `subject` (Confluent-compatible API)."""
    reply = httpx.post(
        f"{registry_url.rstrip('/')}/subjects/{subject}/versions",
        json={"schema": text},
        headers={"Content-Type": "application/vnd.schemaregistry.v1+json"},
        timeout=30,
    )
    reply.raise_for_status()
    return int(reply.json()["id"])


class EventRecords:
    """Encodes events of the given types (event type -> Avro schema text) as the event store does."""

    def __init__(self, registry_url: str, subject_prefix: str, schemas: Mapping[str, str]) -> None:
        from fastavro import parse_schema

        self.ids = {
            t: register_schema(registry_url, f"{subject_prefix}-{t}", text) for t, text in schemas.items()
        }
        self.parsed = {t: parse_schema(json.loads(text)) for t, text in schemas.items()}

    def record(
        self, stream: str, version: int, event_type: str, *, at_ms: int | None = None, **data: Any
    ) -> Record:
        """(key, value, headers) of one event; `at_ms` the envelope time (none: no `timestamp` header)."""
        key, value, encoded = event_shape.encode_record(
            stream_id=stream,
            version=version,
            event_type=event_type,
            schema_id=self.ids[event_type],
            schema=self.parsed[event_type],
            data=data,
        )
        headers: list[tuple[str, str | bytes | None]] = list(encoded)
        if at_ms is not None:
            headers.append((ENVELOPE_TIME_HEADER, str(at_ms).encode()))
        return key, value, headers
