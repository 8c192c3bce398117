"""The demo's event-sourced workload: concurrent clients place, amend and cancel orders through the
event store, including commands that must be refused (schema violations, broken business rules, stale
expected versions) and retries that must be deduplicated. Every client counts what happened to it."""

from __future__ import annotations

import random
import subprocess
import sys
import threading
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from eventstore import DomainError, EventStore, SchemaViolation, StoreConfig, WrongExpectedVersion
from shop import order as o
from shop.order import ORDER, OrderState


@dataclass(slots=True)
class Tally:
    counts: Counter[str] = field(default_factory=Counter)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, what: str, n: int = 1) -> None:
        with self.lock:
            self.counts[what] += n


def store(config: StoreConfig) -> EventStore[OrderState]:
    """The demo's order store: the Order aggregate on `config`'s topics and registry."""
    return EventStore(config, ORDER)


def start_processor(config: StoreConfig, log_file: Path, instance: str = "demo-1") -> subprocess.Popen[bytes]:
    """The command processor runs as its own process, as it would in production."""
    env_flags = [
        "--name", config.name, "--bootstrap-servers", config.bootstrap_servers,
        "--schema-registry-url", config.schema_registry_url, "--partitions", str(config.partitions),
        "--aggregate", "shop.order:ORDER",
    ]  # fmt: skip
    log_file.parent.mkdir(parents=True, exist_ok=True)
    with log_file.open("ab") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "eventstore.cli", "processor", *env_flags, "--instance-id", instance],
            stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip


class OrderClient:
    """One client thread's life: create orders, add lines, place or cancel; plus the refused cases."""

    def __init__(self, config: StoreConfig, worker: int, tally: Tally, seed: int) -> None:
        # A store per client thread: each has its own registry connection and serde caches.
        self.client = store(config).client(reply_partition=worker % config.partitions)
        self.worker, self.tally, self.rng = worker, tally, random.Random(seed)

    def close(self) -> None:
        self.client.close()

    def _run(self, command: object, expected: int | None, command_id: str | None = None) -> int | None:
        """Execute; return the stream's new version, or None when the store refused the command."""
        try:
            outcome = self.client.execute(command, expected_version=expected, command_id=command_id)
        except SchemaViolation:
            self.tally.add("refused: invalid")
        except WrongExpectedVersion:
            self.tally.add("refused: version conflict")
        except DomainError:
            self.tally.add("refused: business rule")
        else:
            self.tally.add("accepted")
            return outcome.last_version
        return None

    def one_order(self, n: int) -> str:
        order_id = f"w{self.worker}-{n}"
        version = self._run(o.CreateOrder(order_id=order_id, customer_id=str(self.rng.randint(1, 500))), 0)
        if version is None:
            return order_id
        for line in range(self.rng.randint(1, 4)):
            sku = f"SKU-{self.rng.randint(1, 300):06d}"
            command = o.AddLine(order_id=order_id, sku=f"{sku}-{line}", quantity=self.rng.randint(1, 5),
                                unit_price_cents=self.rng.randint(250, 25000))  # fmt: skip
            version = self._run(command, version) or version
        if n % 5 == 0:  # a stale expected version: another writer got there first
            self._run(o.AddLine(order_id=order_id, sku="late", quantity=1, unit_price_cents=100), 1)
        if n % 7 == 0:  # a quantity that is not even a number: refused before it is sent
            bad = o.AddLine(order_id=order_id, sku="bad", quantity="three", unit_price_cents=100)  # type: ignore[arg-type]
            self._run(bad, version)
        if n % 5 == 1:  # a quantity the business rules forbid
            self._run(o.AddLine(order_id=order_id, sku="huge", quantity=5000, unit_price_cents=100), version)
        final = (
            o.CancelOrder(order_id=order_id, reason="changed mind")
            if n % 4 == 0
            else o.PlaceOrder(order_id=order_id)
        )
        command_id, before = f"{order_id}-final", version
        version = self._run(final, before, command_id) or version
        if n % 3 == 0:  # the network ate the reply: retry with the same command id
            retried = self.client.execute(final, expected_version=before, command_id=command_id)
            self.tally.add("deduplicated retries")
            assert retried.last_version == version, "a retry must return the first outcome"
        if n % 6 == 0:  # amending an order that is no longer a draft
            self._run(o.AddLine(order_id=order_id, sku="after", quantity=1, unit_price_cents=100), None)
        return order_id


def run_clients(
    config: StoreConfig, clients: int, orders_each: int, tally: Tally, seed: int = 1
) -> list[str]:
    """Concurrent clients (one thread and one EventStoreClient each); returns every order id."""
    made: list[str] = []
    lock = threading.Lock()

    def work(worker: int) -> None:
        client = OrderClient(config, worker, tally, seed * 1000 + worker)
        try:
            ids = [client.one_order(n) for n in range(orders_each)]
        finally:
            client.close()
        with lock:
            made.extend(ids)

    threads = [threading.Thread(target=work, args=(w,)) for w in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return made
