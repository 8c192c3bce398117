"""Property: latest snapshot + tail equals full replay, for random command histories."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from eventstore import EventStore, MemoryRegistry, StoreConfig
from eventstore.decision import StreamState, handle, load, snapshot_due
from eventstore.envelope import CommandEnvelope, EventEnvelope, Snapshot
from shop import order as o

SERDE = EventStore(StoreConfig(name="prop"), o.ORDER, registry=MemoryRegistry()).serde
SKUS = st.sampled_from(["a", "b", "c", "d"])
COMMANDS = st.one_of(
    st.builds(o.CreateOrder, order_id=st.just("1"), customer_id=st.text(max_size=5)),
    st.builds(
        o.AddLine,
        order_id=st.just("1"),
        sku=SKUS,
        quantity=st.integers(-1, 5),
        unit_price_cents=st.integers(-1, 10**6),
    ),
    st.builds(o.RemoveLine, order_id=st.just("1"), sku=SKUS),
    st.builds(o.PlaceOrder, order_id=st.just("1")),
    st.builds(o.CancelOrder, order_id=st.just("1"), reason=st.text(max_size=5)),
)


def history(commands: list[object]) -> tuple[list[EventEnvelope], list[StreamState[o.OrderState]]]:
    current = StreamState(0, o.INITIAL)
    events: list[EventEnvelope] = []
    states = [current]
    for i, command in enumerate(commands):
        envelope = CommandEnvelope(
            command_id=f"c{i}",
            stream_id="order-1",
            command_type="x",
            command=command,
            expected_version=None,
            correlation_id="",
            causation_id="",
            reply_partition=0,
            timestamp_ms=i,
        )
        decision = handle(o.ORDER, current, envelope, now_ms=i)
        events.extend(decision.events)
        for event in decision.events:
            states.append(StreamState(event.version, o.ORDER.evolve(states[-1].state, event.event)))
        current = decision.after
    return events, states


@settings(max_examples=150, deadline=None)
@given(commands=st.lists(COMMANDS, max_size=40), cut=st.integers(0, 60))
def test_snapshot_plus_tail_equals_full_replay(commands: list[object], cut: int) -> None:
    events, states = history(commands)
    full = load(o.ORDER, None, events)
    assert full == states[-1]
    k = min(cut, len(events))
    # The snapshot goes through Avro exactly as it would through the snapshot topic.
    _, value, headers = SERDE.snapshot_value(Snapshot(stream_id="order-1", version=k, state=states[k].state))
    snapshot = SERDE.read_snapshot(value, headers)
    # The tail may overlap the snapshot (a rebuild reads from an earlier offset): overlap is skipped.
    assert load(o.ORDER, snapshot, events[max(0, k - 3) :]) == full


@given(before=st.integers(0, 100), step=st.integers(0, 10), every=st.integers(0, 7))
def test_snapshot_due_iff_a_multiple_is_crossed(before: int, step: int, every: int) -> None:
    after = before + step
    expected = every > 0 and any(v % every == 0 for v in range(before + 1, after + 1))
    assert snapshot_due(before, after, every) == expected


def test_conflict_and_rejection_append_nothing() -> None:
    current = StreamState(3, o.INITIAL)
    base = CommandEnvelope(
        command_id="c",
        stream_id="order-1",
        command_type="order.place",
        command=o.PlaceOrder(order_id="1"),
        expected_version=2,
        correlation_id="",
        causation_id="",
        reply_partition=0,
        timestamp_ms=0,
    )
    conflict = handle(o.ORDER, current, base, now_ms=0)
    assert conflict.outcome.status == "conflict" and not conflict.events and conflict.after == current
    rejected = handle(
        o.ORDER,
        StreamState(0, o.INITIAL),
        base.__class__(**{**_fields(base), "expected_version": 0}),
        now_ms=0,
    )
    assert rejected.outcome.status == "rejected" and rejected.outcome.error_code == "order.not_found"


def _fields(obj: CommandEnvelope) -> dict[str, object]:
    return {name: getattr(obj, name) for name in obj.__dataclass_fields__}
