"""Property: a takeover that reads snapshots + the tail from the low-water mark rebuilds exactly the
state a full replay gives, across random batches, aborts, takeovers and compaction (takeover.py)."""

from __future__ import annotations

from dataclasses import dataclass, field
from importlib.resources import files
from typing import ClassVar

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from eventstore.aggregate import Aggregate
from eventstore.decision import StreamState
from eventstore.envelope import EventEnvelope, Snapshot
from eventstore.errors import CorruptStream
from eventstore.takeover import TailRecord, fold_tail, laggards, low_water, plan_snapshots, start_offset


@dataclass(frozen=True, slots=True, kw_only=True)
class Tick:
    event_type: ClassVar[str] = "tick"
    n: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Ticks:
    state_type: ClassVar[str] = "ticks"
    seen: tuple[int, ...] = ()


COUNTER: Aggregate[Ticks] = Aggregate(
    name="counter",
    initial_state=Ticks(),
    decide=lambda command, state: (),
    evolve=lambda state, event: Ticks(seen=(*state.seen, event.n)),
    stream_id=str,
    state_type=Ticks,
    command_types=(),
    event_types=(Tick,),
    schema_dir=files("eventstore"),
)


def envelope(stream: str, version: int, n: int) -> EventEnvelope:
    return EventEnvelope(
        stream_id=stream,
        version=version,
        event_type="tick",
        schema_version=1,
        event=Tick(n=n),
        command_id="",
        correlation_id="",
        causation_id="",
        timestamp_ms=0,
    )


@dataclass
class Partition:
    """The logs of one partition: events (offset = index, None = aborted) and snapshots."""

    events: list[EventEnvelope | None] = field(default_factory=list)
    snapshots: list[Snapshot] = field(default_factory=list)

    def tail(self, start: int) -> list[TailRecord]:
        return [
            TailRecord(offset=i, stream_id=e.stream_id, version=e.version, decode=lambda e=e: e)
            for i, e in enumerate(self.events)
            if e is not None and i >= start
        ]

    def compacted(self) -> dict[str, Snapshot]:
        return {s.stream_id: s for s in self.snapshots}


@dataclass
class Owner:
    """A model of the processor's bookkeeping for one partition (processor.py does the same steps)."""

    every: int
    window: int
    streams: dict[str, StreamState[Ticks]] = field(default_factory=dict)
    needed: dict[str, int] = field(default_factory=dict)
    floor: int = 0
    known: int = 0

    @classmethod
    def take_over(cls, log: Partition, every: int, window: int) -> tuple[Owner, int]:
        kept = log.compacted()
        first = start_offset((s.low_water for s in kept.values()), 0)
        tail = log.tail(first)
        rebuilt = fold_tail(COUNTER, kept, tail)
        floor = len(log.events)
        owner = cls(every, window, rebuilt.streams, rebuilt.needed, floor, low_water(rebuilt.needed, floor))
        return owner, len(tail)

    def batch(self, log: Partition, appends: list[tuple[str, int]], abort: bool) -> None:
        staged: dict[str, StreamState[Ticks]] = {}
        new: dict[str, int] = {}
        due: list[str] = []
        events: list[EventEnvelope] = []
        for stream, count in appends:
            current = staged.get(stream) or self.streams.get(stream) or StreamState(0, Ticks())
            state = current.state
            for i in range(1, count + 1):
                events.append(envelope(stream, current.version + i, len(log.events) + len(events)))
                state = COUNTER.evolve(state, events[-1].event)
            if stream not in self.needed:
                new.setdefault(stream, self.floor)
            after = StreamState(current.version + count, state)
            if self.every and after.version // self.every > current.version // self.every:
                due.append(stream)
            staged[stream] = after
        plan = plan_snapshots(
            {**self.needed, **new},
            due,
            floor=self.floor,
            known_low_water=self.known,
            window=self.window,
            limit=3,
        )
        log.events.extend(None if abort else e for e in events)
        if abort:
            self.floor = len(log.events)  # delivered offsets still raise the floor
            return
        if plan is not None:
            for stream in plan.streams:
                current = staged.get(stream) or self.streams[stream]
                log.snapshots.append(
                    Snapshot(
                        stream_id=stream,
                        version=current.version,
                        state=current.state,
                        events_offset=plan.events_offset,
                        low_water=plan.low_water,
                    )
                )
            self.known = plan.low_water
        self.streams.update(staged)
        self.needed.update(new)
        for stream in plan.streams if plan else ():
            del self.needed[stream]
        self.floor = len(log.events)


STREAMS = st.sampled_from([f"s{i}" for i in range(8)])
BATCH = st.tuples(st.lists(st.tuples(STREAMS, st.integers(1, 3)), min_size=1, max_size=5), st.booleans())


@settings(max_examples=200, deadline=None)
@given(
    batches=st.lists(st.tuples(BATCH, st.integers(0, 9)), max_size=40),
    every=st.integers(0, 6),
    window=st.integers(0, 12),
)
def test_takeover_from_low_water_equals_full_replay(
    batches: list[tuple[tuple[list[tuple[str, int]], bool], int]], every: int, window: int
) -> None:
    log = Partition()
    owner = Owner(every, window)
    for (appends, abort), takeover in batches:
        owner.batch(log, appends, abort and takeover % 3 == 0)
        if takeover == 0:  # a new owner continues from its rebuilt state
            owner, _ = Owner.take_over(log, every, window)
    full = fold_tail(COUNTER, {}, log.tail(0)).streams
    rebuilt, read = Owner.take_over(log, every, window)
    assert rebuilt.streams == full
    assert read <= sum(e is not None for e in log.events)


def test_idle_streams_are_refreshed_so_takeover_reads_about_window_records() -> None:
    log = Partition()
    owner = Owner(every=5, window=20)
    for i in range(30):  # short streams, never reaching a snapshot by themselves
        owner.batch(log, [(f"idle{i}", 2)], abort=False)
    for _ in range(300):
        owner.batch(log, [("busy", 1)], abort=False)
    rebuilt, read = Owner.take_over(log, 5, 20)
    assert rebuilt.streams == fold_tail(COUNTER, {}, log.tail(0)).streams
    assert read <= 20 + 5 and len(log.events) == 360
    assert len(log.snapshots) <= 300 // 5 + 30  # each idle stream refreshed once, not once per window


def test_laggards_pick_the_oldest_only_when_the_window_is_exceeded() -> None:
    needed = {"a": 0, "b": 50, "c": 90, "d": 99}
    assert laggards(needed, 100, window=200, limit=10) == ()
    assert laggards(needed, 100, window=40, limit=10) == ("a", "b")
    assert laggards(needed, 100, window=40, limit=1) == ("a",)
    assert laggards(needed, 100, window=0, limit=10) == ()


def test_plan_includes_due_streams_and_the_low_water_after_them() -> None:
    plan = plan_snapshots({"a": 3, "b": 7}, ["a"], floor=10, known_low_water=3, window=0, limit=5)
    assert plan is not None and plan.streams == ("a",) and plan.low_water == 7 and plan.events_offset == 10
    assert plan_snapshots({"a": 3}, [], floor=10, known_low_water=3, window=50, limit=5) is None


def test_start_offset_ignores_missing_marks() -> None:
    assert start_offset([], 0) == 0
    assert start_offset([0, 0], 4) == 4  # snapshots written before the headers existed
    assert start_offset([3, 9, 7], 0) == 9


def test_a_wrong_start_is_detected_not_silently_wrong() -> None:
    log = Partition(events=[envelope("s", 1, 0), envelope("s", 2, 1)])
    with pytest.raises(CorruptStream, match="jumps from version 0 to 2"):
        fold_tail(COUNTER, {}, log.tail(1))
