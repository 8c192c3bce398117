"""A View of your own: a `DriverView` holding each order's status in a dict, kept by a materializer
that reuses the shop's order-event decoder; `available_now` reads the topic, then returns. Run
against the local stack:

    set -a; source .stack/env; set +a; .venv/bin/python docs/examples/view.py
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from dataclasses import replace

from _stack import order_events

from materializers import (
    Difference,
    DriverView,
    JobPlan,
    Reject,
    RunConfig,
    TableBatch,
    Truth,
    compare,
    run,
    verify,
)
from shop.orders import ORDERS

STATUS = {"order.created": "draft", "order.placed": "placed", "order.cancelled": "cancelled"}


class OrderStatus(DriverView):
    """order id -> (position, status): a change applies only above the position held, so a batch
    re-run after a crash changes nothing."""

    name = "order_status"

    def __init__(self) -> None:
        self.held: dict[str, tuple[str, str]] = {}

    def columns(self) -> tuple[str, ...]:
        return ("entity", "position", "event_type")

    def apply_table(self, batch: TableBatch) -> Sequence[Reject]:
        for change in batch.table.to_pylist():  # one stream's changes in version order
            position, status = self.held.get(change["entity"], ("", "none"))
            if change["position"] > position:
                self.held[change["entity"]] = (change["position"], STATUS.get(change["event_type"], status))
        return ()  # nothing refused

    def verify(self, truth: Truth) -> list[Difference]:
        expected = {entity: {"status": row["status"]} for entity, row in truth.rows.items()}
        return compare(self.name, expected, {e: {"status": s} for e, (_, s) in self.held.items()})


view = OrderStatus()
statuses = replace(ORDERS, name="order_status", builtin_views=(), views=(view,))
with order_events(orders=5) as store, tempfile.TemporaryDirectory() as home:
    config = RunConfig.from_env().with_overrides(home=home, topic=store.events_topic, master="local[1]")
    print("run returned", run(statuses, config=config, start="earliest", available_now=True))
    print("statuses:", {entity: status for entity, (_, status) in sorted(view.held.items())})
    print("differences from the fold of the topic:", len(verify(JobPlan.of(statuses, config))))
