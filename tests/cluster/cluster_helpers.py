"""What the fault-matrix tests share: the cluster's addresses and who leads or runs what."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass

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
        return next(numbered("connect", i) for i in (1, 2) if self.connect_url(i).endswith(f":{port}"))

    @property
    def ports(self) -> dict[str, int]:
        return dict(json.loads(self.config.ports_file.read_text()))
