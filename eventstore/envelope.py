"""The records that cross the Kafka boundary, as typed values (encoding lives only in serde.py).

- `EventEnvelope`: one event of one stream at one version, with its causal metadata.
- `CommandEnvelope`: a command addressed to a stream, with the caller's expected version and the reply
  partition the caller listens on.
- `Outcome`: the first (and only) result of a command id; replies and the dedup memory both carry it.
- `Snapshot`: a stream's state after `version` events, with the events-topic positions a takeover
  needs (see takeover.py): `events_offset` (this stream's later events are at or after it) and
  `low_water` (every stream of the partition needs only events at or after it). 0 means unknown.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

Status = Literal["ok", "conflict", "rejected", "invalid"]
ANY_VERSION = -1  # wire form of "no expectation" (expected_version=None)


@dataclass(frozen=True, slots=True, kw_only=True)
class Position:
    topic: str
    partition: int
    offset: int

    def __str__(self) -> str:
        return f"{self.topic}[{self.partition}]@{self.offset}"


@dataclass(frozen=True, slots=True, kw_only=True)
class EventEnvelope:
    stream_id: str
    version: int
    event_type: str
    schema_version: int
    event: Any
    command_id: str
    correlation_id: str
    causation_id: str
    timestamp_ms: int
    schema_id: int = 0
    position: Position | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class CommandEnvelope:
    command_id: str
    stream_id: str
    command_type: str
    command: Any
    expected_version: int | None
    correlation_id: str
    causation_id: str
    reply_partition: int
    timestamp_ms: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Outcome:
    command_id: str
    stream_id: str
    status: Status
    first_version: int
    last_version: int
    expected_version: int | None = None
    error_code: str = ""
    message: str = ""
    timestamp_ms: int = 0

    @property
    def appended(self) -> int:
        return self.last_version - self.first_version + 1 if self.first_version else 0


@dataclass(frozen=True, slots=True, kw_only=True)
class Snapshot:
    stream_id: str
    version: int
    state: Any
    events_offset: int = 0
    low_water: int = 0
