from __future__ import annotations

from pathlib import Path

import pytest

from materializers.aggregates import batches as aggregate_batches
from materializers.aggregates.batches import BatchRecord, OffsetRange
from materializers.errors import CheckpointMismatch


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
