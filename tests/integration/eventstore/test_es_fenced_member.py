"""A processor's consumer fenced as a static member (librdkafka's fatal error): the first time, as a
coordinator failover does it, the processor rejoins its group and goes on; fenced again soon after,
another live consumer holds its instance id, and it stops with ProcessorFenced, naming the fix."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from eventstore import EventStoreClient, StoreConfig
from eventstore.cli import exit_code
from eventstore.errors import ProcessorFenced
from eventstore.kafkaio import consumer_fatal
from kafkakit.clients import make_consumer
from shop import order as o

pytestmark = pytest.mark.integration


def _intrude(store: StoreConfig, instance_id: str, done: Callable[[], bool] = lambda: False) -> int:
    """Join the processors' group with `instance_id`'s static member id, as a second processor started
    with the same --instance-id would, until the group fences this consumer in turn (the processor
    rejoined), `done()`, or 60 s. Returns how many partitions it held."""
    consumer = make_consumer(
        {
            "bootstrap.servers": store.bootstrap_servers,
            "group.id": store.processor_group,
            "group.instance.id": f"{store.name}.processor.{instance_id}",
            "enable.auto.commit": False,
        },
        client_config=store.kafka_client,
    )
    held = 0
    try:
        consumer.subscribe([store.commands_topic])
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not done():
            msg = consumer.poll(0.5)
            held = max(held, len(consumer.assignment()))
            if msg is not None and consumer_fatal(msg.error()):
                return held
        return held
    finally:
        consumer.close()


def _output(tmp_path: Path) -> str:
    """The processor's output, its lines joined (the CLI wraps long messages)."""
    return " ".join((tmp_path / "processor-p0-0.log").read_text().split())


def _create(client: EventStoreClient[Any], order_id: str) -> int:
    return client.execute(o.CreateOrder(order_id=order_id, customer_id="c"), timeout=60).last_version


def test_a_fenced_processor_rejoins_once_and_stops_when_fenced_again(
    store: StoreConfig,
    start_processor: Callable[..., Any],
    client: EventStoreClient[Any],
    tmp_path: Path,
) -> None:
    processor = start_processor("p0")
    assert _create(client, "before") == 1

    assert _intrude(store, "p0") == store.partitions  # it took every partition, then was fenced back
    assert processor.poll() is None
    assert _create(client, "after-rejoin") == 1  # the rejoined processor answers
    log = _output(tmp_path)
    assert "consumer fenced" in log and "rejoining the group" in log

    # Fenced again within REJOIN_GUARD_S: not a failover but a second owner of the id.
    _intrude(store, "p0", done=lambda: processor.poll() is not None)
    assert processor.wait(60) == exit_code(ProcessorFenced("x"))
    log = _output(tmp_path)
    assert "ProcessorFenced" in log and "give each its own --instance-id" in log
