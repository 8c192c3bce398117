from __future__ import annotations

import dataclasses
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake

from materializers.aggregates.declaration import AggregateView, Aggregation, EventSource
from materializers.aggregates.job import closed_before_ms, driver_merge_condition, merge_condition
from materializers.views.warehouse.delta_rs import quoted

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


def minute_rows(minute: int, lines: list[int]) -> pa.Table:
    """One window's rows, group `sku` s0.. with s0 null (a null group key is a group of its own)."""
    stamp = pa.timestamp("us", tz="UTC")
    start, end = (datetime(2026, 1, 1, 0, m, tzinfo=UTC) for m in (minute, minute + 1))
    return pa.table({
        "window_start": pa.array([start] * len(lines), stamp),
        "window_end": pa.array([end] * len(lines), stamp),
        "sku": pa.array([f"s{i}" if i else None for i in range(len(lines))], pa.string()),
        "lines": pa.array(lines, pa.int64()),
    })  # fmt: skip


def test_the_driver_merge_matches_null_groups_and_reads_only_the_batch_windows(tmp_path: Path) -> None:
    """delta-rs's MERGE with `driver_merge_condition`: a null group key matches its own row (not a
    second row inserted), and the bound skips the files of older windows by their statistics."""
    for minute in range(10):  # one file per window
        write_deltalake(str(tmp_path), minute_rows(minute, [1] * 5), mode="append")
    batch = pa.concat_tables([minute_rows(9, [7, 7]), minute_rows(10, [3])])  # s0 (null), s1; a new window
    values = {quoted(c): f"s.{quoted(c)}" for c in batch.column_names}
    earliest = int(datetime(2026, 1, 1, 0, 9, tzinfo=UTC).timestamp() * 1000)
    keys = ["window_start", "window_end", "sku"]
    metrics = (
        DeltaTable(str(tmp_path))
        .merge(
            batch,
            driver_merge_condition(keys, earliest_window_ms=earliest),
            source_alias="s",
            target_alias="t",
        )
        .when_matched_update(values)
        .when_not_matched_insert(values)
        .execute()
    )
    assert (metrics["num_target_rows_updated"], metrics["num_target_rows_inserted"]) == (2, 1)
    assert (metrics["num_target_files_scanned"], metrics["num_target_files_skipped_during_scan"]) == (1, 9)
    table = DeltaTable(str(tmp_path)).to_pyarrow_table()
    assert table.num_rows == 51 and sum(table["lines"].to_pylist()) == 48 + 14 + 3


def test_windows_closed_before_a_batch() -> None:
    correcting = dataclasses.replace(VIEW, late_policy="correct", correction_horizon="10 minutes")
    # Newest event time seen = 20 min (the late-input watermark + the horizon); closed 1 minute behind.
    assert closed_before_ms(correcting, 10 * 60_000) == 19 * 60_000
    assert closed_before_ms(VIEW, 5 * 60_000) == 5 * 60_000  # drop: the horizon is the lateness
    assert closed_before_ms(correcting, 0) is None  # nothing seen before the first batch
