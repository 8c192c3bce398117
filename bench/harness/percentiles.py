"""Percentiles of measured durations: the one summary every scenario reports its latencies in.

Pure: a linear-interpolated percentile over an ascending sequence (numpy's default), and a summary of
count, p50/p90/p95/p99/p99.9, max and mean, rounded to hundredths of a millisecond.
"""

from __future__ import annotations

from collections.abc import Sequence


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """Linear-interpolated percentile (q in 0..100) of an ascending sequence."""
    if not sorted_values:
        return float("nan")
    pos = (len(sorted_values) - 1) * q / 100.0
    lo = int(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def summarize_ms(values: Sequence[float]) -> dict[str, float]:
    s = sorted(values)
    if not s:
        return {"count": 0}
    out = {f"p{q:g}": round(percentile(s, q), 2) for q in (50, 90, 95, 99, 99.9)}
    return {"count": len(s), **out, "max": round(s[-1], 2), "mean": round(sum(s) / len(s), 2)}
