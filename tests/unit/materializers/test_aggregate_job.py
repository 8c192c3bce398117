from __future__ import annotations

import dataclasses

from materializers.aggregate import AggregateView, Aggregation, EventSource
from materializers.aggregate_job import closed_before_ms, merge_condition

VIEW = AggregateView(
    name="v",
    source=EventSource(topic="t", event_types=("e",), fields={"sku": "string"}),
    event_time="@envelope",
    group_by=("sku",),
    window="1 minute",
    allowed_lateness="1 minute",
    aggregations=(Aggregation(op="count"),),
)


def test_the_merge_is_bounded_by_the_batch_earliest_window() -> None:
    assert merge_condition(["window_start", "window_end", "sku"], 60_000) == (
        "t.window_start >= timestamp_millis(60000) AND t.`window_start` <=> s.`window_start` AND "
        "t.`window_end` <=> s.`window_end` AND t.`sku` <=> s.`sku`"
    )


def test_windows_closed_before_a_batch() -> None:
    correcting = dataclasses.replace(VIEW, late_policy="correct", correction_horizon="10 minutes")
    # Newest event time seen = 20 min (the late-input watermark + the horizon); closed 1 minute behind.
    assert closed_before_ms(correcting, 10 * 60_000) == 19 * 60_000
    assert closed_before_ms(VIEW, 5 * 60_000) == 5 * 60_000  # drop: the horizon is the lateness
    assert closed_before_ms(correcting, 0) is None  # nothing seen before the first batch
