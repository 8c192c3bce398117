"""Throw-away Kafka topics for tests: uniquely named, created ready to use, deleted afterwards.

Guarantees: a name is `<prefix>-<8 random hex>`, so tests sharing one broker (and re-runs against a
long-lived one) never meet; `__call__` returns only once the broker's metadata lists the topic with
all its partitions (a consumer assigned right after gets no UNKNOWN_TOPIC). `close()` deletes every
topic made here and every topic named `<made>.<suffix>` (what a job derives from its input: a `.dlq`
dead-letter topic, say), without waiting for the deletion to finish.
Assumptions: the broker accepts topic creation and deletion (`delete.topic.enable`, Kafka's default).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping
from types import TracebackType

from kafkakit.clients import make_admin


class TopicFactory:
    """`topics("orders", partitions=3)` -> a new topic's name; `close()` deletes what it made.

    `bootstrap_servers`: the broker, as the caller reaches it. `replication_factor`: default -1, the
    cluster's `default.replication.factor` (1 on the one-broker stack, 3 on a cluster set up so).
    """

    def __init__(
        self, bootstrap_servers: str, *, replication_factor: int = -1, timeout_s: float = 30.0
    ) -> None:
        self._admin = make_admin({"bootstrap.servers": bootstrap_servers})
        self._replication_factor = replication_factor
        self._timeout_s = timeout_s
        self.created: list[str] = []

    def __call__(
        self, prefix: str = "test", *, partitions: int = 1, config: Mapping[str, str] | None = None
    ) -> str:
        """Create `<prefix>-<random>` with `partitions` and topic `config` (e.g. cleanup.policy)."""
        from confluent_kafka.admin import NewTopic  # type: ignore[attr-defined]

        name = f"{prefix}-{uuid.uuid4().hex[:8]}"
        topic = NewTopic(name, partitions, self._replication_factor, config=dict(config or {}))
        self._admin.create_topics([topic])[name].result(timeout=self._timeout_s)
        self.created.append(name)
        self._wait_listed(name, partitions)
        return name

    def _wait_listed(self, name: str, partitions: int) -> None:
        deadline = time.monotonic() + self._timeout_s
        while True:
            meta = self._admin.list_topics(name, timeout=5).topics.get(name)
            if meta is not None and meta.error is None and len(meta.partitions) == partitions:
                return
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"topic {name} was created but its metadata did not list it in {self._timeout_s} s"
                )
            time.sleep(0.1)

    def close(self) -> None:
        """Delete the topics made here and those named after them (`<name>.<suffix>`)."""
        if not self.created:
            return
        existing = self._admin.list_topics(timeout=10).topics
        doomed = sorted(t for t in existing if any(t == m or t.startswith(f"{m}.") for m in self.created))
        if doomed:
            for future in self._admin.delete_topics(doomed).values():
                future.result(timeout=self._timeout_s)
        self.created.clear()
        self._admin.poll(0)  # hands the admin client's buffered log lines to Python logging

    def __enter__(self) -> TopicFactory:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
