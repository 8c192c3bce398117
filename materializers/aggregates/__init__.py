"""Aggregate views: counts, sums, min/max and distinct counts per group and time window, over event
streams or CDC tables, kept exactly by a streaming query of their own.

Public API:

    >>> from materializers.aggregates import AggregateView, Aggregation, EventSource, materializer
    >>> SKU_PER_MINUTE = materializer(AggregateView(name="sku_per_minute", source=EventSource(...), ...))

- `AggregateView` declares one view (its source, group, window, aggregations, late-data policy);
  `materializer(view)` makes it a `Materializer` that `materializers.run` and the CLI run like any.
- Sources: `EventSource` (event-store records, by event type), `CdcSource` (a Debezium table, whose
  updates and deletes retract what the row contributed). `Derived` adds computed columns;
  `Aggregation` is one output column. `ENVELOPE_TIME` / `KAFKA_TIME` name the event-time columns
  that are not payload fields.

The other modules of this package (job, plan, batches, replay, dead letters, verify) are internal.
"""

from __future__ import annotations

from materializers.aggregates.declaration import (
    ENVELOPE_TIME,
    KAFKA_TIME,
    AggregateView,
    Aggregation,
    CdcSource,
    Derived,
    EventSource,
    materializer,
)

__all__ = [
    "ENVELOPE_TIME",
    "KAFKA_TIME",
    "AggregateView",
    "Aggregation",
    "CdcSource",
    "Derived",
    "EventSource",
    "materializer",
]
