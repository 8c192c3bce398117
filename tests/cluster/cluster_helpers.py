"""What the fault-matrix tests share: the cluster's addresses and who leads or runs what."""

from __future__ import annotations

import json
import random
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import psycopg

from devstack.config import StackConfig, numbered
from devstack.session import StackHandle
from kafkakit.clients import admin_client

RUNS = (1, 2, 3)  # every scenario is run at least three times, each asserting on data


@dataclass(frozen=True, slots=True)
class Cluster:
    handle: StackHandle
    config: StackConfig
    env: dict[str, str]  # the cluster's .stack-cluster/env: brokers, SPARK_MASTER_URL, PYSPARK_PYTHON

    @property
    def bootstrap(self) -> str:
        return self.handle.endpoints.kafka_bootstrap_servers

    def leader_of(self, topic: str, partition: int = 0) -> int:
        """The broker id leading `topic`'s `partition` now."""
        with admin_client({"bootstrap.servers": self.bootstrap}) as admin:
            return int(admin.list_topics(topic, timeout=30).topics[topic].partitions[partition].leader)

    def wait_for_leader(self, topic: str, partition: int, not_on: int, timeout_s: float = 60.0) -> int:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            leader = self.leader_of(topic, partition)
            if leader not in (-1, not_on):
                return leader
            time.sleep(0.2)
        raise AssertionError(f"{topic}[{partition}] got no leader other than broker {not_on} in {timeout_s}s")

    @staticmethod
    def broker_service(broker_id: int) -> str:
        return numbered("kafka", broker_id)

    def connect_url(self, worker: int) -> str:
        return f"http://127.0.0.1:{self.ports[numbered('connect', worker).replace('-', '_')]}"

    def connect_worker_named(self, worker_id: str) -> str:
        """The service (connect, connect-2) of a Connect worker id as its REST API reports it (host:port)."""
        port = int(worker_id.rsplit(":", 1)[1])
        workers = range(1, self.config.topology.connect_workers + 1)
        return next(numbered("connect", i) for i in workers if self.connect_url(i).endswith(f":{port}"))

    @property
    def ports(self) -> dict[str, int]:
        return dict(json.loads(self.config.ports_file.read_text()))


@dataclass(frozen=True, slots=True)
class RowChanges:
    """What `changing` writes to a table whose key is an int `id`: inserted rows, the SET of an update,
    the mix (below `inserts`: insert, below `updates`: update, else delete) and the pace."""

    new_row: Callable[[int], tuple[object, ...]]
    update_set: str
    inserts: float = 0.3
    updates: float = 0.9
    pause_s: float = 0.02
    seed: int = 11


@contextmanager
def changing(dsn: str, table: str, changes: RowChanges) -> Iterator[list[int]]:
    """Inserts, updates and deletes, each its own transaction, while the block runs (yields the count
    so far); a writer that fails fails the test, and one that wrote nothing too."""
    stop, done, failed = threading.Event(), [0], []

    def write() -> None:
        rng = random.Random(changes.seed)
        with psycopg.connect(dsn, autocommit=True) as pg:
            (next_id,) = pg.execute(f"SELECT coalesce(max(id), 0) + 1 FROM {table}").fetchone() or (1,)
            while not stop.is_set():
                kind, some = rng.random(), rng.randrange(1, next_id)
                if kind < changes.inserts:
                    row = changes.new_row(next_id)
                    pg.execute(f"INSERT INTO {table} VALUES ({', '.join(['%s'] * len(row))})", row)
                    next_id += 1
                elif kind < changes.updates:
                    pg.execute(f"UPDATE {table} SET {changes.update_set} WHERE id = %s", (some,))
                else:
                    pg.execute(f"DELETE FROM {table} WHERE id = %s", (some,))
                done[0] += 1
                time.sleep(changes.pause_s)

    def guarded() -> None:
        try:
            write()
        except BaseException as exc:
            failed.append(exc)

    writer = threading.Thread(target=guarded, daemon=True)
    writer.start()
    try:
        yield done
    finally:
        stop.set()
        writer.join(30)
    assert not failed, failed
    assert done[0] > 0


def wait_until(condition: Callable[[], bool], what: str, timeout_s: float = 240.0) -> float:
    """Poll `condition` until true (the seconds it took) or fail naming `what`."""
    started = time.monotonic()
    while not condition():
        assert time.monotonic() - started < timeout_s, f"timed out after {timeout_s}s waiting for {what}"
        time.sleep(0.1)
    return time.monotonic() - started
