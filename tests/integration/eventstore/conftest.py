"""Factory fixtures for event store integration tests: a fresh store (unique topics and subjects) per
test, command processors as subprocesses we own (so tests may kill -9 them), and clients."""

from __future__ import annotations

import signal
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from es_helpers import cli_env

from devstack.kafka_security import KafkaAccess
from eventstore import EventStore, EventStoreClient, StoreConfig
from shop.order import ORDER

TXN_TIMEOUT_MS = 10_000


@pytest.fixture(scope="session")
def store_config(stack: Any, kafka: KafkaAccess) -> Callable[..., StoreConfig]:
    """`store_config(prefix, **settings)`: the config of a store named `<prefix>-<uuid>` on the stack's
    registry, its Kafka clients at the stack's SASL_SSL listener where it has one (tests/conftest.py),
    else over PLAINTEXT. Nothing is created."""

    def make(prefix: str, **settings: Any) -> StoreConfig:
        return StoreConfig(
            name=f"{prefix}-{uuid.uuid4().hex[:8]}",
            bootstrap_servers=kafka.bootstrap_servers,
            kafka_client=kafka.client_config,
            schema_registry_url=stack.schema_registry_url,
            **settings,
        )

    return make


@pytest.fixture
def store(store_config: Callable[..., StoreConfig]) -> StoreConfig:
    """A fresh store (topics and subjects), its Kafka clients as `store_config` gives them."""
    config = store_config(
        "es-it", partitions=3, snapshot_every=5, transaction_timeout_ms=TXN_TIMEOUT_MS, reply_timeout_s=60
    )
    EventStore(config, ORDER).init()
    return config


@pytest.fixture
def start_processor(store: StoreConfig, tmp_path: Any) -> Iterator[Callable[..., subprocess.Popen[bytes]]]:
    """Start `eventstore processor` subprocesses; every one still running is stopped at teardown."""
    started: list[subprocess.Popen[bytes]] = []

    def start(instance_id: str = "p0", batch_size: int = 50, **env: str) -> subprocess.Popen[bytes]:
        log = open(tmp_path / f"processor-{instance_id}-{len(started)}.log", "wb")  # noqa: SIM115
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "eventstore.cli",
                "processor",
                "-v",
                "--instance-id",
                instance_id,
                "--batch-size",
                str(batch_size),
            ],
            env={**cli_env(store), **env},
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        started.append(proc)
        return proc

    yield start
    for proc in started:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)


@pytest.fixture
def client(store: StoreConfig) -> Iterator[EventStoreClient[Any]]:
    with EventStore(store, ORDER).client() as c:
        yield c
