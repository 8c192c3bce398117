"""The demo's latency report: steady latency apart from the outage, recovery from the kill (pure)."""

from __future__ import annotations

from demo.report import Sample, Summary
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
    assert (summary.latency_p50_ms, summary.latency_p99_ms) == (2500.0, 3000.0)
