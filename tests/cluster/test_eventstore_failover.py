"""Event store on three brokers: kill -9 the broker leading an events partition while 8 clients append,
pipelined. Every acknowledged command's events are in the log exactly once, each stream's versions run
1..n without a gap, and the processor keeps going after the election."""

from __future__ import annotations

import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import pytest
from cluster_helpers import RUNS, Cluster, wait_until

from devstack.crash import StackFaults
from devstack.event_stores import EventStoreFactory, TestStore
from eventstore import EventStoreClient, OutcomeUnknown
from eventstore.cli import EXIT_TRANSACTION_HUNG
from eventstore.config import DEFAULT_TRANSACTION_TIMEOUT_MS
from kafkakit.clients import admin_client
from shop import order as o

pytestmark = [pytest.mark.cluster, pytest.mark.integration]
CLIENTS = 8
COMMANDS = 60  # per client, after its CreateOrder
WINDOW = 10  # commands in flight per client
WINDOW_DEADLINE_S = 240.0  # a window still unanswered by then: the processor is gone, not failing over


@dataclass
class Acks:
    """What the clients were told: command id -> (first, last) version, and when each was acknowledged."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    versions: dict[str, tuple[int, int]] = field(default_factory=dict)
    acked_at: dict[str, float] = field(default_factory=dict)
    sent_at: dict[str, float] = field(default_factory=dict)
    retries: int = 0
    errors: list[BaseException] = field(default_factory=list)

    def count(self) -> int:
        with self.lock:
            return len(self.acked_at)


def _client(store: TestStore, worker: int, acks: Acks) -> None:
    order_id = f"w{worker}"
    try:
        with store.events.client(reply_partition=worker % store.config.partitions) as client:
            # Lines added and removed in turn: the order never reaches its line limit.
            commands = [o.CreateOrder(order_id=order_id, customer_id=f"c{worker}")] + [
                o.RemoveLine(order_id=order_id, sku=f"s{i // 2}")
                if i % 2
                else o.AddLine(order_id=order_id, sku=f"s{i // 2}", quantity=1, unit_price_cents=100 + i)
                for i in range(COMMANDS)
            ]
            for start in range(0, len(commands), WINDOW):
                window = {
                    f"{order_id}-{start + n}": c for n, c in enumerate(commands[start : start + WINDOW])
                }
                _send_until_acknowledged(client, window, acks)
    except BaseException as exc:  # surfaced by the test, never swallowed
        acks.errors.append(exc)


def _send_until_acknowledged(client: EventStoreClient[Any], window: dict[str, Any], acks: Acks) -> None:
    """Send the window pipelined; whatever has no outcome yet is re-sent with the same command id
    (the documented retry: the processor answers a known id with its first outcome)."""
    left = dict(window)
    give_up = time.monotonic() + WINDOW_DEADLINE_S
    while left:
        assert time.monotonic() < give_up, f"no outcome for {sorted(left)[:3]} in {WINDOW_DEADLINE_S}s"
        now = time.monotonic()
        with acks.lock:
            for cid in left:
                acks.sent_at.setdefault(cid, now)
        pending = [client.send(c, command_id=cid) for cid, c in left.items()]
        try:
            outcomes = client.wait(pending, timeout=30)
        except OutcomeUnknown:
            with acks.lock:
                acks.retries += 1
            continue
        with acks.lock:
            for cid, outcome in outcomes.items():
                assert outcome.status == "ok", f"{cid}: {outcome}"
                acks.versions[cid] = (outcome.first_version, outcome.last_version)
                acks.acked_at[cid] = time.monotonic()
        left = {}


@pytest.mark.parametrize("run", RUNS)
def test_killing_the_leader_of_an_events_partition_loses_and_doubles_nothing(
    run: int,
    cluster: Cluster,
    faults: StackFaults,
    event_store_factory: EventStoreFactory,
    fault_record: dict[str, object],
) -> None:
    # The store's default transaction timeout, not the factory's short test one (see its comment).
    store = event_store_factory(
        "shop.order:ORDER", partitions=3, transaction_timeout_ms=DEFAULT_TRANSACTION_TIMEOUT_MS
    )
    events_topic = store.config.events_topic
    with admin_client({"bootstrap.servers": cluster.bootstrap}) as admin:
        described = admin.list_topics(events_topic, timeout=30).topics[events_topic]
    assert {len(p.replicas) for p in described.partitions.values()} == {3}  # RF 3 by the brokers' default

    acks = Acks()
    supervisor = Supervisor(event_store_factory, store)
    supervisor.start()
    clients = [threading.Thread(target=_client, args=(store, w, acks), daemon=True) for w in range(CLIENTS)]
    for t in clients:
        t.start()
    total = CLIENTS * (COMMANDS + 1)
    wait_until(
        lambda: acks.count() >= total // 3 or bool(acks.errors), "a third of the appends acknowledged", 300
    )
    victim = cluster.leader_of(events_topic, 0)
    killed_at = time.monotonic()
    faults.crash(cluster.broker_service(victim))
    new_leader = cluster.wait_for_leader(events_topic, 0, not_on=victim)
    for t in clients:
        t.join(600)
    supervisor.stop()
    assert not acks.errors, acks.errors
    assert acks.count() == total
    # The processor went on after the election; a restart only ever by the supervisor, after the
    # processor's own watchdog found a transaction stuck in the client library (exit 75).
    assert supervisor.exits in ([], [EXIT_TRANSACTION_HUNG] * len(supervisor.exits)), supervisor.exits
    assert store.processors[-1].poll() is None

    # Every acknowledged command's events, exactly once, each stream's versions 1..n.
    with store.client() as reader:
        streams = {f"order-w{w}": reader.read_stream(f"order-w{w}") for w in range(CLIENTS)}
    for stream_id, events in streams.items():
        assert [e.version for e in events] == list(range(1, len(events) + 1)), stream_id
        assert len(events) == COMMANDS + 1, stream_id
    per_command = Counter(e.command_id for events in streams.values() for e in events)
    assert set(per_command) == set(acks.versions)
    for cid, (first, last) in acks.versions.items():
        assert per_command[cid] == last - first + 1, cid

    sent_after = [cid for cid, t in acks.sent_at.items() if t > killed_at]
    resumed_s = min(acks.acked_at[cid] for cid in sent_after) - killed_at if sent_after else 0.0
    fault_record.update(
        scenario="eventstore: kill -9 the leader of events[0] under 8 pipelined clients",
        run=run,
        killed=cluster.broker_service(victim),
        new_leader=new_leader,
        commands=total,
        events_checked=sum(len(e) for e in streams.values()),
        retries=acks.retries,
        processor_restarts=len(supervisor.exits),
        resume_s=round(resumed_s, 2),
    )


class Supervisor(threading.Thread):
    """What runs a processor in production (systemd, Kubernetes): a processor that exits is started again
    with the same instance id; every exit status is kept for the test to judge."""

    def __init__(self, factory: EventStoreFactory, store: TestStore) -> None:
        super().__init__(daemon=True)
        self.factory, self.store = factory, store
        self.exits: list[int] = []
        self._stopping = threading.Event()

    def run(self) -> None:
        while not self._stopping.wait(0.5):
            status = self.store.processors[-1].poll()
            if status is not None:
                self.exits.append(status)
                self.factory.start_processor(self.store, "p0")

    def stop(self) -> None:
        self._stopping.set()
        self.join(10)
