from __future__ import annotations

from materializers.aggregate_job import merge_condition


def test_the_merge_is_bounded_by_the_batch_earliest_window() -> None:
    assert merge_condition(["window_start", "window_end", "sku"], 60_000) == (
        "t.window_start >= timestamp_millis(60000) AND t.`window_start` <=> s.`window_start` AND "
        "t.`window_end` <=> s.`window_end` AND t.`sku` <=> s.`sku`"
    )
