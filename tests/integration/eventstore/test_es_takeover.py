"""A processor taking over partitions rebuilds from snapshots + a short tail, not from offset 0."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest

from eventstore import CommandProcessor, EventStore, EventStoreClient, Pending, StoreConfig
from eventstore.decision import StreamState, apply
from eventstore.envelope import Position
from eventstore.kafkaio import read_to_end, reader
from eventstore.serde import Serde
from eventstore.topics import partition_for
from shop import order as o

pytestmark = pytest.mark.integration

WINDOW = 60
IDLE = 60  # orders created with two lines and left alone: never reach snapshot_every by themselves
BUSY_PER_PARTITION = 2
CYCLES = 100  # add + remove per cycle on each busy order


def full_replay(store: StoreConfig, serde: Serde) -> tuple[dict[str, StreamState[Any]], dict[int, int]]:
    """Every stream's state folded from offset 0 of every partition, and each partition's size."""
    states: dict[str, StreamState[Any]] = {}
    sizes = {}
    consumer = reader(store.bootstrap_servers, client_config=store.kafka_client)
    try:
        for p in range(store.partitions):
            sizes[p] = 0
            for m in read_to_end(consumer, store.events_topic, p):
                sizes[p] += 1
                position = Position(topic=store.events_topic, partition=p, offset=m.offset() or 0)
                event = serde.read_event(position, m.value(), m.headers())
                current = states.get(event.stream_id, StreamState(0, o.INITIAL))
                states[event.stream_id] = apply(o.ORDER, current, event)
    finally:
        consumer.close()
    return states, sizes


@pytest.fixture
def in_process(store: StoreConfig) -> Iterator[Any]:
    """Run CommandProcessors in threads of this process, so a test can read their counters."""
    running: list[tuple[CommandProcessor[Any], threading.Thread]] = []

    def start(config: StoreConfig, instance_id: str) -> CommandProcessor[Any]:
        processor = EventStore(config, o.ORDER).processor(instance_id)
        thread = threading.Thread(target=processor.run, daemon=True)
        thread.start()
        running.append((processor, thread))
        return processor

    yield start
    for processor, thread in running:
        processor.stop_requested.set()
        thread.join(30)


def test_takeover_reads_snapshots_and_a_short_tail(
    store: StoreConfig, start_processor: Any, client: EventStoreClient[Any], in_process: Any
) -> None:
    first = start_processor("owner", batch_size=50, EVENTSTORE_REBUILD_WINDOW=str(WINDOW))
    pending: list[Pending] = []
    busy: list[str] = []  # two busy orders in every partition
    for n in range(1000):
        p = partition_for(f"order-busy{n}", store.partitions)
        if sum(partition_for(f"order-{b}", store.partitions) == p for b in busy) < BUSY_PER_PARTITION:
            busy.append(f"busy{n}")
    for i in range(IDLE):
        pending.append(client.send(o.CreateOrder(order_id=f"idle{i}", customer_id="c")))
        for sku in ("a", "b"):
            line = o.AddLine(order_id=f"idle{i}", sku=sku, quantity=1, unit_price_cents=3)
            pending.append(client.send(line))
    for b in busy:
        pending.append(client.send(o.CreateOrder(order_id=b, customer_id="c")))
    for c in range(CYCLES):
        for b in busy:
            line = o.AddLine(order_id=b, sku=f"s{c}", quantity=1, unit_price_cents=c)
            pending.append(client.send(line))
            pending.append(client.send(o.RemoveLine(order_id=b, sku=f"s{c}")))
    outcomes = client.wait(pending, timeout=240)
    assert {x.status for x in outcomes.values()} == {"ok"}
    first.kill()  # kill -9: the new owner learns nothing from it but what is in Kafka
    first.wait(10)

    expected, sizes = full_replay(store, EventStore(store, o.ORDER).serde)
    assert sum(sizes.values()) == IDLE * 3 + len(busy) * (1 + 2 * CYCLES)

    # Same instance id: static membership hands the partitions over at once.
    taker = in_process(replace(store, rebuild_window=WINDOW), "owner")
    deadline = time.monotonic() + 60
    while len(taker.rebuilds) < store.partitions:
        assert time.monotonic() < deadline, f"only {len(taker.rebuilds)} partitions rebuilt"
        time.sleep(0.05)
    reports = {r.partition: r for r in taker.rebuilds}
    for p, report in reports.items():
        print(f"partition {p}: {sizes[p]} events, takeover read {report}")
        assert report.events_to >= sizes[p]  # offsets also count transaction markers
        assert report.events_read <= WINDOW + 50  # the window plus at most one batch of overlap
        assert report.events_read * 4 < sizes[p], "the takeover read most of the partition"
        assert report.events_from > 0
    assert taker.cached_states() == expected  # snapshots + tail == full replay, for every stream

    # The new owner goes on from the rebuilt versions.
    after = client.execute(
        o.AddLine(order_id="idle0", sku="c", quantity=1, unit_price_cents=1),
        expected_version=expected["order-idle0"].version,
        timeout=60,
    )
    assert after.last_version == 4
    line = o.AddLine(order_id=busy[0], sku="last", quantity=1, unit_price_cents=1)
    moved = client.execute(line, expected_version=1 + 2 * CYCLES, timeout=60)
    assert moved.last_version == 2 + 2 * CYCLES
    loaded = client.load("order-idle0")  # snapshot (with its events offset) + tail, via the reader
    assert loaded.version == 4 and [x.sku for x in loaded.state.lines] == ["a", "b", "c"]
