"""What a processor must read when it takes over a partition: snapshots + a short tail, never offset 0.

Pure: no I/O. The processor (processor.py) keeps the bookkeeping below and calls these functions.

Definitions, per partition P of the events topic:
- `floor`: a lower bound on the offset of the next event the owner writes to P (the log end seen at
  rebuild, then the end confirmed by delivery reports after each commit). Every event written in a batch
  lands at an offset >= the floor taken when the batch began.
- `needed[s]`, only for a stream s with events NOT covered by its latest snapshot: a lower bound on the
  offset of the first such event. A stream without an entry that gets events in a batch gets that
  batch's floor; a snapshot of s at its current version removes the entry (nothing of s is left to
  read; an idle, snapshotted stream pins nothing, however old it is).
- `low_water(P) = min(needed)` (the floor when empty): a takeover that reads events from low_water(P),
  starting each stream from its latest snapshot, sees every event it needs (events at or below a
  snapshot's version are skipped by their version header). low_water never decreases: entries enter at
  the floor, which is >= every earlier entry, and leave only through snapshots.

How the takeover learns low_water(P): every snapshot record carries two headers, `events-offset`
(= needed[s] after it) and `low-water` (= low_water(P) computed over the batch's outcome). low_water
only changes when a snapshot raises the minimum, and that very snapshot carries the new value; so the
maximum `low-water` header in the (compacted) snapshot partition is the current value. The record with
the highest offset is never compacted away (it is the latest of its key), so the value survives.
Records without these headers (older snapshots) count as 0: a full read, still correct.

A stream that stops short of its next `snapshot_every` multiple (an order created and left alone) would
pin low_water and with it the takeover's start. So when the floor runs more than `window` records
ahead of low_water, the owner snapshots the pinning streams (`laggards`, oldest first, at most `limit`
per batch) at their current version: a takeover then reads about `window` event records per partition
plus the compacted snapshot partition (at most one live record per stream). Each stream is refreshed
at most once per burst of activity, so the extra snapshots are bounded by the number of streams that
changed, not by the number of events. As a safety net, a stream whose first record in the tail is not
version 1 and that has no snapshot makes the rebuild raise CorruptStream (decision.apply) instead of
silently starting from a wrong state.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Generic, TypeVar

from eventstore.aggregate import Aggregate
from eventstore.decision import StreamState, apply
from eventstore.envelope import EventEnvelope, Snapshot

S = TypeVar("S")


@dataclass(frozen=True, slots=True, kw_only=True)
class TailRecord:
    """One committed record of the events partition, decoded only when needed."""

    offset: int
    stream_id: str
    version: int
    decode: Callable[[], EventEnvelope]


@dataclass(frozen=True, slots=True)
class Rebuilt(Generic[S]):
    streams: dict[str, StreamState[S]]
    needed: dict[str, int]
    decoded: int


@dataclass(frozen=True, slots=True)
class SnapshotPlan:
    """Snapshots one batch writes in one partition (maybe none), and the positions their records carry.

    `low_water` is the partition's mark once the batch commits (also when no snapshot is written).
    """

    streams: tuple[str, ...]
    events_offset: int
    low_water: int


def start_offset(low_waters: Iterable[int], log_start: int) -> int:
    """Where a takeover starts reading the events partition: the newest low-water mark seen."""
    return max(log_start, max(low_waters, default=log_start))


def fold_tail(
    aggregate: Aggregate[S], snapshots: Mapping[str, Snapshot], tail: Iterable[TailRecord]
) -> Rebuilt[S]:
    """Each stream's state from its latest snapshot plus the tail; `needed` as defined above."""
    streams: dict[str, StreamState[S]] = {s: StreamState(x.version, x.state) for s, x in snapshots.items()}
    needed: dict[str, int] = {}
    initial = StreamState(0, aggregate.initial_state)
    decoded = 0
    for record in tail:
        current = streams.get(record.stream_id, initial)
        if record.version <= current.version:
            continue  # covered by the snapshot: skip without decoding
        needed.setdefault(record.stream_id, record.offset)  # its first event not in a snapshot
        streams[record.stream_id] = apply(aggregate, current, record.decode())
        decoded += 1
    return Rebuilt(streams, needed, decoded)


def low_water(needed: Mapping[str, int], floor: int) -> int:
    return min(needed.values(), default=floor)


def laggards(needed: Mapping[str, int], floor: int, *, window: int, limit: int) -> tuple[str, ...]:
    """Streams pinning low_water more than `window` records behind the floor, oldest first.

    Picks every stream more than window/2 behind (up to `limit`), so one refresh buys a stretch of
    window/2 records before the next one is needed.
    """
    if window <= 0 or floor - low_water(needed, floor) <= window:
        return ()
    cutoff = floor - window // 2
    behind = ((offset, stream) for stream, offset in needed.items() if offset < cutoff)
    return tuple(stream for _, stream in heapq.nsmallest(limit, behind))


def plan_snapshots(
    needed: Mapping[str, int],
    due: Iterable[str],
    *,
    floor: int,
    known_low_water: int,
    window: int,
    limit: int,
) -> SnapshotPlan | None:
    """Which streams to snapshot at the end of a batch, and the low-water mark after it.

    `needed` is the partition's map including streams created in this batch; `due` are the streams that
    crossed a `snapshot_every` multiple. Laggards are only searched when the last known low-water mark
    is more than `window` behind (cheap test first; the scan is O(streams with un-snapshotted events)).
    The snapshotted streams leave `needed`.
    """
    scan = window > 0 and floor - known_low_water > window
    chosen = dict.fromkeys(due)
    if not chosen and not scan:
        return None  # the low-water mark cannot have moved: no O(streams) work this batch
    if scan:
        chosen.update(dict.fromkeys(laggards(needed, floor, window=window, limit=limit)))
    rest = (offset for stream, offset in needed.items() if stream not in chosen)
    return SnapshotPlan(tuple(chosen), floor, min(min(rest, default=floor), floor))
