"""The demo's latency report: steady latency apart from the outage, recovery from the kill (pure)."""

from __future__ import annotations

from demo.report import Sample, Summary, recovery_line, steady_line
from demo.run import _note_recovery


def test_steady_latency_leaves_out_what_waited_on_the_outage_and_recovery_is_its_own_line() -> None:
    summary = Summary(killed_at_s=15.0)
    seen = [(10.0, 2000.0), (14.0, 3000.0), (15.3, 2000.0), (45.0, 31000.0), (45.0, 20000.0), (48.0, 2500.0)]
    for at, latency in seen:
        summary.samples.append(Sample(at_s=at, lag_records=0, latency_ms=latency))
        _note_recovery(summary, at, latency)
    # 15.3 s was committed at 13.3 s, before the kill: the dying driver may have written it.
    assert summary.recovered_at_s == 45.0 and summary.recovery_s == 30.0
    summary.finish_latency()
    # Steady: seen before the kill (10 s, 14 s) or committed after the recovery (48 s, committed at 45.5 s).
    assert summary.latency_ms == {"cache": {"p50": 2500.0, "p99": 3000.0}}
    assert not summary.steady_met and not summary.recovery_met  # 3 s > 2 s, 30 s > 15 s


def test_each_view_has_its_own_percentiles_and_every_view_must_meet_the_target() -> None:
    summary = Summary()
    for view, latency in (("cache", 900.0), ("cache", 1100.0), ("search", 1500.0), ("warehouse", 2600.0)):
        summary.samples.append(Sample(at_s=5.0, lag_records=0, latency_ms=latency, view=view))
    summary.finish_latency()
    assert summary.latency_ms["cache"] == {"p50": 1000.0, "p99": 1100.0}
    assert summary.latency_ms["warehouse"] == {"p50": 2600.0, "p99": 2600.0}
    assert not summary.steady_met  # the warehouse missed it


def test_where_the_time_went_reads_as_phases_and_steps() -> None:
    phases = {"process_s": 0.1, "session_s": 4.6, "query_s": 6.5, "batch_s": 16.2, "first_batch_rows": 1100,
              "first_batch.decode_s": 4.3, "first_batch.cache_s": 2.3, "first_batch.walCommit_s": 0.05}  # fmt: skip
    assert recovery_line(phases) == (
        "driver process 0.1 · Spark session 4.6 · query started 6.5 · first batch committed 16.2 "
        "(first batch: 1100 records, decode 4.3 s, cache 2.3 s, walCommit 0.1 s)"
    )
    medians = {"total": 1840.0, "interval": 2100.0, "batches": 31.0, "decode": 420.0, "cache": 610.0}
    assert steady_line(medians) == "1840 ms, one every 2100 ms over 31 batches: decode 420, cache 610"
