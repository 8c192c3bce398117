"""Example aggregate view: order lines per product (SKU) per minute of event time, from the order events.

Order events carry no occurred-at field of their own (shop/schemas/*.avsc): the event time is the
envelope's `timestamp` header, which the event store writes for every event (the time the command
that produced it was decided, epoch ms) — `ENVELOPE_TIME`, not the time the job reads the record.

What it counts is demand as lines are added to orders (`order.line_added`): a removed line or a
cancelled order is not taken back (an event view counts events; a `CdcSource` over a table takes
changed rows back), so `line_cents` is the value of lines added per minute, not placed revenue. Events more than 2 minutes
behind the newest event time seen are dropped and counted (`materializers status`, column LATE).
"""

from __future__ import annotations

from materializers.aggregates import (
    ENVELOPE_TIME,
    AggregateView,
    Aggregation,
    Derived,
    EventSource,
    materializer,
)

SKU_PER_MINUTE_VIEW = AggregateView(
    name="sku_per_minute",
    source=EventSource(
        topic="eventstore.order.events",
        event_types=("order.line_added",),
        fields={"order_id": "string", "sku": "string", "quantity": "int", "unit_price_cents": "long"},
    ),
    event_time=ENVELOPE_TIME,
    group_by=("sku",),
    window="1 minute",
    allowed_lateness="2 minutes",
    derived=(Derived(name="line_cents", sql="quantity * unit_price_cents", type="long"),),
    aggregations=(
        Aggregation(op="count", name="lines"),
        Aggregation(op="sum", column="quantity", name="units"),
        Aggregation(op="sum", column="line_cents", name="line_cents"),
        Aggregation(op="approx_count_distinct", column="order_id", name="orders"),
    ),
)
SKU_PER_MINUTE = materializer(SKU_PER_MINUTE_VIEW)
