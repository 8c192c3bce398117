"""Set-up and clean-up the runnable examples share (not an example itself).

Every example works on names of its own (`unique`), so runs never see each other's records, and
deletes what it created on the way out (`drop`, `drop_keys`), whether it succeeded or not.
"""

from __future__ import annotations

import os
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import redis
from confluent_kafka.admin import AdminClient

from eventstore import CommandProcessor, EventStore, StoreConfig
from shop.order import ORDER, AddLine, CancelOrder, CreateOrder, PlaceOrder


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


@contextmanager
def running(processor: CommandProcessor[Any]) -> Iterator[CommandProcessor[Any]]:
    """`processor.run()` in a thread; on exit it finishes or aborts its open transaction and returns."""
    worker = threading.Thread(target=processor.run, daemon=True)
    worker.start()
    try:
        yield processor
    finally:
        processor.stop_requested.set()
        worker.join(30)


def drop(prefix: str) -> None:
    """Delete the Kafka topics and the registry subjects named `<prefix>.*` (a store's are; a
    connector's too, with its heartbeat topic `__debezium-heartbeat.<prefix>`)."""
    heartbeat = f"__debezium-heartbeat.{prefix}"
    admin = AdminClient({"bootstrap.servers": os.environ["KAFKA_BOOTSTRAP_SERVERS"]})
    listed = admin.list_topics(timeout=10).topics
    topics = [t for t in listed if t.startswith(f"{prefix}.") or t == heartbeat]
    for future in (admin.delete_topics(topics) if topics else {}).values():
        future.exception(30)
    registry = os.environ["SCHEMA_REGISTRY_URL"].rstrip("/")
    with httpx.Client(timeout=10) as http:
        for subject in http.get(f"{registry}/subjects").json():
            if subject.startswith((f"{prefix}.", f"{heartbeat}-")):
                http.delete(f"{registry}/subjects/{subject}")  # soft, then for good
                http.delete(f"{registry}/subjects/{subject}", params={"permanent": "true"})


def drop_keys(prefix: str) -> None:
    """Delete the Redis keys under `<prefix>` (a materializer's cache)."""
    with redis.Redis.from_url(os.environ["REDIS_URL"]) as client:
        for key in client.scan_iter(match=f"{prefix}*", count=500):
            client.delete(key)


@contextmanager
def order_events(orders: int) -> Iterator[StoreConfig]:
    """A fresh order store whose events topic holds `orders` orders (order-1..n: one line each, the
    even ones placed, the others cancelled), for the materializer examples; dropped on exit."""
    config = StoreConfig.from_env().with_overrides(name=unique("docs-orders"), partitions=1)
    try:
        with EventStore(config, ORDER) as store:
            store.init()
            with running(store.processor(instance_id="docs")), store.client() as client:
                for n in range(1, orders + 1):
                    client.execute(CreateOrder(order_id=str(n), customer_id=f"c-{n % 3}"))
                    client.execute(AddLine(order_id=str(n), sku="A-1", quantity=n, unit_price_cents=250))
                    cancel = CancelOrder(order_id=str(n), reason="x")
                    client.execute(PlaceOrder(order_id=str(n)) if n % 2 == 0 else cancel)
        yield config
    finally:
        drop(config.name)
