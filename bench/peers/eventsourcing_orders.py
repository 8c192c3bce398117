"""The event store's peer: the same Order-with-lines aggregate in the `eventsourcing` library (9.x), on Postgres.

`OrderApp` loads (repository, cached), decides and saves one event per command in one Postgres
transaction; `es_worker` runs `orders` orders of one create + `LINES_PER_ORDER` lines in a process
of its own and puts its timings on `out`. `es_env` is the library's configuration for the stack's
Postgres, generous to the peer (each process owns its orders, so a cached aggregate is never stale).
eventsourcing stores each event's topic as this module's import path
(`bench.peers.eventsourcing_orders:Order.Created`): the events live in a per-run schema, dropped after.
"""

from __future__ import annotations

import time
from typing import Any
from urllib.parse import urlparse
from uuid import UUID

from eventsourcing.application import Application
from eventsourcing.domain import Aggregate, event

LINES_PER_ORDER = 4  # one create + 4 lines = 5 events per order


class Order(Aggregate):  # type: ignore[misc]
    @event("Created")
    def __init__(self, order_id: str, customer_id: str) -> None:
        self.order_id = order_id
        self.customer_id = customer_id
        self.status = "draft"
        self.lines: list[dict[str, Any]] = []

    @event("LineAdded")
    def add_line(self, sku: str, quantity: int, unit_price_cents: int) -> None:
        if self.status != "draft" or any(line["sku"] == sku for line in self.lines):
            raise ValueError(f"cannot add {sku}")
        self.lines.append({"sku": sku, "quantity": quantity, "unit_price_cents": unit_price_cents})


class OrderApp(Application):  # type: ignore[misc]
    def create_order(self, order_id: str) -> UUID:
        order = Order(order_id=order_id, customer_id="c")
        self.save(order)
        return order.id  # type: ignore[no-any-return]

    def add_line(self, order_id: UUID, sku: str, quantity: int, unit_price_cents: int) -> None:
        # Load (repository, cached), decide, save: one event and one transaction per command.
        order = self.repository.get(order_id)
        order.add_line(sku, quantity, unit_price_cents)
        self.save(order)


def es_env(pg_dsn: str, schema: str) -> dict[str, str]:
    url = urlparse(pg_dsn)
    return {
        "PERSISTENCE_MODULE": "eventsourcing.postgres",
        "POSTGRES_DBNAME": url.path.lstrip("/") or "postgres",
        "POSTGRES_HOST": url.hostname or "127.0.0.1",
        "POSTGRES_PORT": str(url.port or 5432),
        "POSTGRES_USER": url.username or "postgres",
        "POSTGRES_PASSWORD": url.password or "",
        "POSTGRES_SCHEMA": schema,
        "POSTGRES_POOL_SIZE": "2",
        # Generous to the peer: each process owns its orders, so a cached aggregate is never stale and
        # a command costs one INSERT transaction, like ours costs one Kafka transaction.
        "AGGREGATE_CACHE_MAXSIZE": "10000",
        "AGGREGATE_CACHE_FASTFORWARD": "n",
    }


def es_worker(env: dict[str, str], prefix: str, orders: int, barrier: Any, out: Any) -> None:
    app = OrderApp(env=env)
    barrier.wait(120)
    started = time.time()
    events = 0
    for n in range(orders):
        order = app.create_order(f"{prefix}-{n}")
        events += 1
        for i in range(LINES_PER_ORDER):
            app.add_line(order, f"sku{i}", 1 + i, 100 * i)
            events += 1
    out.put({"start": started, "end": time.time(), "events": events, "lat": [], "phases": []})
