"""A driver's timeline: batches from Spark's progress, the restart's phases and the steady medians."""

from __future__ import annotations

from pathlib import Path

import pytest

from materializers.errors import CheckpointMismatch
from materializers.runtime import timeline
from materializers.runtime.timeline import StepClock


def progress(batch_id: int, at: str, total: int, rows: int = 10) -> dict[str, object]:
    durations = {"triggerExecution": total, "addBatch": total - 100, "walCommit": 40, "latestOffset": 10}
    return {"batchId": batch_id, "timestamp": at, "numInputRows": rows, "durationMs": durations}


def test_a_batch_event_ends_when_its_trigger_did_and_keeps_spark_and_view_steps() -> None:
    entry = timeline.batch_event(progress(7, "2026-11-27T08:00:00.000Z", 1500), {"cache": 612.4})
    assert entry["at"] == 1795766401.5  # 08:00:00 UTC + 1.5 s
    assert entry["batch_id"] == 7 and entry["rows"] == 10 and entry["total_ms"] == 1500
    assert entry["spark"] == {"latestOffset": 10, "addBatch": 1400, "walCommit": 40}
    assert entry["steps"] == {"cache": 612}


def test_startup_takes_the_first_restart_after_the_kill() -> None:
    entries = [
        timeline.event("process", 90.0), timeline.event("session", 94.0), timeline.event("query", 95.0),
        timeline.event("batch", 97.0, batch_id=1, rows=5, total_ms=900, spark={}, steps={}),
        timeline.event("process", 101.0), timeline.event("session", 105.5), timeline.event("query", 107.0),
        timeline.event("batch", 116.0, batch_id=2, rows=1100, total_ms=8000, spark={"walCommit": 50},
                       steps={"decode": 4300}),
        timeline.event("batch", 118.0, batch_id=3, rows=40, total_ms=1300, spark={}, steps={}),
    ]  # fmt: skip
    phases = timeline.startup(entries, after=100.0)
    assert phases == {
        "process_s": 1.0, "session_s": 5.5, "query_s": 7.0, "batch_s": 16.0, "first_batch_rows": 1100,
        "first_batch.walCommit_s": 0.05, "first_batch.decode_s": 4.3,
    }  # fmt: skip
    assert timeline.startup(entries, after=120.0) == {}  # no restart after that
    # A start read from /proc a few ms before the kill (its 10 ms ticks) is still this restart's.
    assert timeline.startup(entries, after=101.02)["process_s"] == 0.0


def test_batch_medians_cover_the_window_only() -> None:
    entries = [
        timeline.event("batch", at, batch_id=i, rows=1, total_ms=ms, spark={"walCommit": 30}, steps={"cache": ms // 2})
        for i, (at, ms) in enumerate([(10.0, 1000), (12.0, 1200), (13.0, 3000), (40.0, 9000)])
    ]  # fmt: skip
    medians = timeline.batch_medians(entries, since=0.0, until=20.0)
    assert medians == {"total": 1200.0, "walCommit": 30.0, "cache": 600.0, "batches": 3.0, "interval": 1500.0}
    assert timeline.batch_medians(entries, since=50.0, until=60.0) == {}


def test_the_slowest_batches_of_the_window_come_first_with_their_steps() -> None:
    entries = [
        timeline.event("batch", at, batch_id=i, rows=i, total_ms=ms, spark={"walCommit": 30}, steps={"cache": ms // 2})
        for i, (at, ms) in enumerate([(10.0, 1000), (12.0, 1200), (13.0, 3000), (14.0, 1200), (40.0, 9000)])
    ]  # fmt: skip
    slowest = timeline.slowest_batches(entries, since=0.0, until=20.0, n=3)
    assert slowest == [
        {"batch_id": 2, "rows": 2, "total": 3000, "walCommit": 30, "cache": 1500},
        {"batch_id": 1, "rows": 1, "total": 1200, "walCommit": 30, "cache": 600},
        {"batch_id": 3, "rows": 3, "total": 1200, "walCommit": 30, "cache": 600},
    ]
    assert timeline.slowest_batches(entries, since=50.0, until=60.0) == []


def test_the_file_keeps_its_newer_half_past_its_cap(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(timeline, "MAX_BYTES", 2000)
    for i in range(100):
        timeline.append(tmp_path, [timeline.event("query", float(i))])
    kept = timeline.read(tmp_path)
    assert (tmp_path / timeline.TIMELINE_FILE).stat().st_size <= 2000
    assert kept[-1]["at"] == 99.0 and 10 < len(kept) < 100
    assert [e["at"] for e in kept] == sorted(e["at"] for e in kept)  # a contiguous, newest tail


def test_the_step_clock_adds_re_runs_and_drops_batches_never_taken() -> None:
    clock = StepClock()
    for batch_id in (1, 2, 2):
        with clock.timed(batch_id, "cache"):
            pass
    assert set(clock.take(2)) == {"cache"}
    assert clock.take(1) == {}  # taken with batch 2: older batches are dropped


def test_a_batch_size_is_known_from_its_planned_offsets_before_it_runs(tmp_path: Path) -> None:
    from materializers.runtime import checkpoint

    offsets = tmp_path / "offsets"
    offsets.mkdir()
    for batch_id, parts in (
        (0, '{"t":{"0":10,"1":5}}'),
        (1, '{"t":{"0":25,"1":5}}'),
        (2, '{"t":{"0":25,"1":5,"2":3}}'),
    ):
        (offsets / str(batch_id)).write_text(f'v1\n{{"batchWatermarkMs":0}}\n{parts}\n')
    assert checkpoint.planned_records(tmp_path, 1) == 15
    assert checkpoint.planned_records(tmp_path, 0) is None  # no initial offsets on record
    (tmp_path / "sources" / "0").mkdir(parents=True)
    (tmp_path / "sources" / "0" / "0").write_text(
        '\0v1\n{"t":{"0":4,"1":0}}'
    )  # as the Kafka source writes it
    assert checkpoint.planned_records(tmp_path, 0) == 11
    assert checkpoint.planned_records(tmp_path, 2) is None  # a partition the previous batch lacked
    assert checkpoint.planned_records(tmp_path, 3) is None  # not planned
    (tmp_path / "sources" / "0" / "0").write_text('{"t":{"0":4}}')
    with pytest.raises(CheckpointMismatch, match="sources/0/0"):
        checkpoint.planned_records(tmp_path, 0)
