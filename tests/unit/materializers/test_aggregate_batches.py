from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from materializers import aggregate_batches
from materializers.aggregate_batches import BatchRecord, OffsetRange
from materializers.aggregate_dead_letters import RefusedRecords
from materializers.aggregate_job import merge_condition
from materializers.aggregate_replay import offset_options
from materializers.errors import CheckpointMismatch
from materializers.views.redis_cache import RedisCache
from materializers.views.redis_windows import CurrentWindows


def _offsets(checkpoint: Path, batch: int, watermark: int, timestamp: int, ends: str) -> None:
    (checkpoint / "offsets").mkdir(parents=True, exist_ok=True)
    meta = f'{{"batchWatermarkMs":{watermark},"batchTimestampMs":{timestamp},"conf":{{}}}}'
    (checkpoint / "offsets" / str(batch)).write_text(f"v1\n{meta}\n{ends}\n")


def test_a_batch_is_judged_by_the_previous_batch_watermark_and_its_own_clock(tmp_path: Path) -> None:
    _offsets(tmp_path, 0, 0, 1000, '{"t":{"0":2}}')
    _offsets(tmp_path, 1, 5000, 2000, '{"t":{"0":7}}')
    _offsets(tmp_path, 2, 9000, 3000, '{"t":{"0":9}}')
    assert aggregate_batches.record_of(tmp_path, 0) == BatchRecord(0, {"t": {"0": 2}}, 0, 1000)
    assert aggregate_batches.record_of(tmp_path, 2) == BatchRecord(2, {"t": {"0": 9}}, 5000, 3000)


def test_the_log_keeps_the_last_line_of_a_rerun_batch_and_skips_a_torn_one(tmp_path: Path) -> None:
    aggregate_batches.append(tmp_path, BatchRecord(0, {"t": {"0": 2}}, 0, 1))
    aggregate_batches.append(tmp_path, BatchRecord(1, {"t": {"0": 5}}, 0, 2))
    aggregate_batches.append(tmp_path, BatchRecord(1, {"t": {"0": 5}}, 0, 3))  # the batch run again
    with (tmp_path / aggregate_batches.LOG_FILE).open("a") as out:
        out.write('{"batch": 2, "en')  # a crash mid-line
    assert aggregate_batches.read(tmp_path) == [
        BatchRecord(0, {"t": {"0": 2}}, 0, 1),
        BatchRecord(1, {"t": {"0": 5}}, 0, 3),
    ]


def test_ranges_follow_each_partition_from_the_initial_offsets() -> None:
    log = [
        BatchRecord(0, {"t": {"0": 4, "1": 0}}, 0, 10),
        BatchRecord(1, {"t": {"0": 4, "1": 3}}, 0, 20),  # partition 0 read nothing
        BatchRecord(2, {"t": {"0": 6, "1": 3, "2": 1}}, 7, 30),  # a partition added
    ]
    assert aggregate_batches.ranges("t", {"t": {"0": 1, "1": 0}}, log) == [
        OffsetRange(0, 1, 4, 0, 0, 10),
        OffsetRange(1, 0, 3, 1, 0, 20),
        OffsetRange(0, 4, 6, 2, 7, 30),
        OffsetRange(2, 0, 1, 2, 7, 30),
    ]


def test_a_log_missing_a_batch_is_refused() -> None:
    log = [BatchRecord(1, {"t": {"0": 4}}, 0, 10)]
    with pytest.raises(CheckpointMismatch, match="no line for batch 0"):
        aggregate_batches.ranges("t", {}, log)


def test_initial_offsets_from_the_kafka_source_file(tmp_path: Path) -> None:
    (tmp_path / "sources" / "0").mkdir(parents=True)
    (tmp_path / "sources" / "0" / "0").write_bytes(b'\x00v1\n{"t":{"0":3}}')
    assert aggregate_batches.initial_offsets(tmp_path) == {"t": {"0": 3}}
    with pytest.raises(CheckpointMismatch, match="initial offsets"):
        aggregate_batches.initial_offsets(tmp_path / "none")


def test_offset_options_cover_the_ranges_and_leave_other_partitions_at_the_end() -> None:
    ranges = [OffsetRange(0, 4, 6, 2, 0, 1), OffsetRange(0, 6, 9, 3, 0, 1), OffsetRange(2, 0, 1, 3, 0, 1)]
    assert offset_options([0, 1, 2], ranges) == ({"0": 4, "1": -1, "2": 0}, {"0": 9, "1": -1, "2": 1})


def test_refused_batches_owed_after_a_restart_and_after_a_missed_progress(tmp_path: Path) -> None:
    plan = SimpleNamespace(checkpoint=tmp_path)
    owed = RefusedRecords(None, plan, None)  # type: ignore[arg-type]
    assert owed.through == -1
    owed.resume(last_committed=2)  # the counts of batches 0-2 died with the last driver
    owed.saw(3, refused=0)
    owed.saw(5, refused=2)  # 4's progress was missed
    owed.saw(6, refused=0)
    assert sorted(owed.pending) == [0, 1, 2, 4, 5]
    owed.pending.clear()  # as if sent
    assert owed.send() == 0 and owed.through == 6
    assert RefusedRecords(None, plan, None).through == 6  # type: ignore[arg-type]


def test_current_window_keys_keep_group_values_apart() -> None:
    windows = CurrentWindows(RedisCache("redis://127.0.0.1:1/0", "demo:skus"), ("sku", "till"), ("lines",))
    assert windows.key(["a:b", 7]) == 'demo:skus:current:["a:b",7]'
    assert windows.key(["a", "b:7"]) != windows.key(["a:b", 7])


def test_the_merge_is_bounded_by_the_batch_earliest_window() -> None:
    assert merge_condition(["window_start", "window_end", "sku"], 60_000) == (
        "t.window_start >= timestamp_millis(60000) AND t.`window_start` <=> s.`window_start` AND "
        "t.`window_end` <=> s.`window_end` AND t.`sku` <=> s.`sku`"
    )
