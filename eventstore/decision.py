"""The functional core of the command processor: one command + one stream's state -> one decision.

Pure: no I/O. The processor loads `StreamState`, calls `handle`, and writes the decision's events,
outcome and (when due) snapshot in one Kafka transaction. Rules:
1. `expected_version` None means "any"; otherwise it must equal the stream's current version, else the
   outcome is `conflict` and nothing is appended.
2. A `DomainError` from `decide` becomes a `rejected` outcome carrying the error's stable code.
3. Appended events get versions current+1..current+n, all with the command's metadata.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from eventstore.aggregate import Aggregate, schema_version, type_name
from eventstore.envelope import CommandEnvelope, EventEnvelope, Outcome, Snapshot
from eventstore.errors import CorruptStream, DomainError

S = TypeVar("S")
log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class StreamState(Generic[S]):
    version: int
    state: S


@dataclass(frozen=True, slots=True)
class Decision(Generic[S]):
    events: tuple[EventEnvelope, ...]
    outcome: Outcome
    after: StreamState[S]


def handle(
    aggregate: Aggregate[S], current: StreamState[S], command: CommandEnvelope, now_ms: int
) -> Decision[S]:
    def refuse(status: Any, code: str, message: str) -> Decision[S]:
        outcome = Outcome(
            command_id=command.command_id,
            stream_id=command.stream_id,
            status=status,
            first_version=0,
            last_version=current.version,
            expected_version=command.expected_version,
            error_code=code,
            message=message,
            timestamp_ms=now_ms,
        )
        return Decision((), outcome, current)

    if command.expected_version is not None and command.expected_version != current.version:
        return refuse(
            "conflict",
            "wrong_expected_version",
            f"stream {command.stream_id} is at version {current.version}, the command expected "
            f"{command.expected_version}; re-read the stream and decide again",
        )
    try:
        new_events = tuple(aggregate.decide(command.command, current.state))
    except DomainError as exc:
        return refuse("rejected", exc.code, str(exc))
    except Exception as exc:  # a decider bug must not wedge the partition (poison pill)
        log.exception("decide crashed on command %s", command.command_id)
        return refuse("rejected", "decider_crashed", f"decide raised {type(exc).__name__}: {exc}")
    state = aggregate.fold(current.state, new_events)
    envelopes = tuple(
        EventEnvelope(
            stream_id=command.stream_id,
            version=current.version + i,
            event_type=type_name(type(event)),
            schema_version=schema_version(type(event)),
            event=event,
            command_id=command.command_id,
            correlation_id=command.correlation_id or command.command_id,
            causation_id=command.causation_id or command.command_id,
            timestamp_ms=now_ms,
        )
        for i, event in enumerate(new_events, start=1)
    )
    after = StreamState(current.version + len(envelopes), state)
    outcome = Outcome(
        command_id=command.command_id,
        stream_id=command.stream_id,
        status="ok",
        first_version=current.version + 1 if envelopes else 0,
        last_version=after.version,
        expected_version=command.expected_version,
        timestamp_ms=now_ms,
    )
    return Decision(envelopes, outcome, after)


def snapshot_due(before: int, after: int, every: int) -> bool:
    """True when the stream crossed a multiple of `every` (0 disables snapshots)."""
    return every > 0 and after // every > before // every


def load(
    aggregate: Aggregate[S], snapshot: Snapshot | None, events: Iterable[EventEnvelope]
) -> StreamState[S]:
    """State from the latest snapshot plus the events after it; versions must be contiguous."""
    current = (
        StreamState(snapshot.version, snapshot.state) if snapshot else StreamState(0, aggregate.initial_state)
    )
    for envelope in events:
        current = apply(aggregate, current, envelope)
    return current


def apply(aggregate: Aggregate[S], current: StreamState[S], envelope: EventEnvelope) -> StreamState[S]:
    """Evolve by one stored event; events at or below the current version are already included."""
    if envelope.version <= current.version:
        return current
    if envelope.version != current.version + 1:
        raise CorruptStream(
            f"stream {envelope.stream_id} jumps from version {current.version} to {envelope.version} "
            f"at {envelope.position}; the events topic lost or reordered records — investigate before writing"
        )
    return StreamState(envelope.version, aggregate.evolve(current.state, envelope.event))
