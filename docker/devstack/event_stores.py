"""Event stores for tests: a fresh store per call (its own topics and registry subjects), initialised,
with command processors run as `eventstore processor` subprocesses the test owns.

Processors run as processes, not threads, so a test can `kill -9` one (`ProcessGroups.crash`) and see
what a crashed production processor leaves: open transactions aborted, a takeover by the next one. The
aggregate is named `module:attr` because the processor process imports it on its own. At the end every
processor still running is killed with its group and the store's topics are deleted.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from devstack.crash import ProcessGroups
from devstack.session import StackHandle
from eventstore import EventStore, EventStoreClient, StoreConfig


@dataclass
class TestStore:
    """One store made for a test: its config, the facade, and the processors started for it."""

    __test__ = False  # not a pytest test class, despite the name

    config: StoreConfig
    events: EventStore[Any]
    aggregate: str  # module:attr, as the processor processes import it
    processors: list[subprocess.Popen[bytes]] = field(default_factory=list)

    @contextmanager
    def client(self) -> Iterator[EventStoreClient[Any]]:
        """A client sending commands to this store's processors and awaiting their outcomes."""
        with self.events.client() as client:
            yield client


class EventStoreFactory:
    """`factory("mypkg.orders:ORDER")` -> an initialised `TestStore` with one processor running."""

    def __init__(self, handle: StackHandle, groups: ProcessGroups, logs: Path) -> None:
        self._handle, self._groups, self._logs = handle, groups, logs
        self.made: list[TestStore] = []

    def __call__(
        self,
        aggregate: str,
        *,
        partitions: int = 3,
        snapshot_every: int = 50,
        transaction_timeout_ms: int = 10_000,
        processors: int = 1,
    ) -> TestStore:
        """A store named `test-<random>` for `aggregate` (module:attr); `processors` started (0: none).

        A short transaction timeout lets a processor that takes over from a crashed one proceed soon."""
        from eventstore.cli import load_aggregate  # refuses a bad module:attr, naming the fix

        found = load_aggregate(aggregate)
        config = StoreConfig(
            name=f"test-{uuid.uuid4().hex[:10]}",
            bootstrap_servers=self._handle.endpoints.kafka_bootstrap_servers,
            schema_registry_url=self._handle.endpoints.schema_registry_url,
            partitions=partitions,
            snapshot_every=snapshot_every,
            transaction_timeout_ms=transaction_timeout_ms,
        )
        made = TestStore(config=config, events=EventStore(config, found), aggregate=aggregate)
        self.made.append(made)
        made.events.init()
        for n in range(processors):
            self.start_processor(made, f"p{n}")
        return made

    def start_processor(self, store: TestStore, instance_id: str = "p0") -> subprocess.Popen[bytes]:
        """Another `eventstore processor` for `store`, in a process group of its own (crashable)."""
        argv = [sys.executable, "-m", "eventstore.cli", "processor", "--aggregate", store.aggregate,
                "--instance-id", instance_id]  # fmt: skip
        self._logs.mkdir(parents=True, exist_ok=True)
        process = self._groups.start(
            argv,
            env={**os.environ, **store.config.as_env()},
            output=self._logs / f"{store.config.name}-{instance_id}.log",
        )
        store.processors.append(process)
        return process

    def close(self) -> None:
        """Kill the processors still running, delete every store's topics (all named `<store>.*`)."""
        from kafkakit.clients import admin_client

        self._groups.close()
        prefixes = tuple(f"{s.config.name}." for s in self.made)
        for store in self.made:
            store.events.close()
        self.made.clear()
        if not prefixes:
            return
        with admin_client({"bootstrap.servers": self._handle.endpoints.kafka_bootstrap_servers}) as admin:
            topics = [t for t in admin.list_topics(timeout=30).topics if t.startswith(prefixes)]
            for future in (admin.delete_topics(topics, operation_timeout=30) if topics else {}).values():
                future.exception(30)  # waits; a topic already gone is not this teardown's failure
