"""A driver's timeline: when it started, when its session and queries were up, and what each batch
spent where — so "where did the time go" has an answer after a slow restart or a slow batch.

One JSON line per event in `timeline.jsonl` beside the job's status:
- `process`: the driver process started (the OS's start time: Python's own imports count);
- `session`: the SparkSession is built (JVM, jars);
- `query`: this job's query started (checks, Kafka metadata, checkpoint claimed);
- `batch`: a committed micro-batch: Spark's own durations (`durationMs`: latestOffset, queryPlanning,
  addBatch, walCommit, commitOffsets, ...) and the views' steps inside addBatch (plan, decode or
  decode_to_driver, cache, collect, search, warehouse, ...), all in ms; `at` is when the batch ended.
The file is capped (the older half dropped past `MAX_BYTES`): a long-running driver keeps its recent
history, never an unbounded log.
"""

from __future__ import annotations

import itertools
import json
import os
import statistics
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

TIMELINE_FILE = "timeline.jsonl"
MAX_BYTES = 1 << 20
CLOCK_SLACK_S = 0.05
SPARK_STEPS = ("latestOffset", "queryPlanning", "getBatch", "addBatch", "walCommit", "commitOffsets")


def process_started_at() -> float:
    """Wall-clock start of this process from /proc (Linux, 10 ms ticks); now where the OS does not
    say. Measured back from the uptime, not from the boot time, which /proc gives in whole seconds."""
    try:
        ticks = int(Path("/proc/self/stat").read_text().rpartition(")")[2].split()[19])
        uptime = float(Path("/proc/uptime").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return time.time()
    return time.time() - (uptime - ticks / os.sysconf("SC_CLK_TCK"))


def event(kind: str, at: float, **fields: Any) -> dict[str, Any]:
    return {"event": kind, "at": round(at, 3), **fields}


def batch_event(progress: Mapping[str, Any], steps: Mapping[str, float]) -> dict[str, Any]:
    """A committed batch from Spark's progress and the views' step timings (pure)."""
    durations = progress.get("durationMs", {})
    started = datetime.fromisoformat(str(progress["timestamp"]).replace("Z", "+00:00")).timestamp()
    total = int(durations.get("triggerExecution", 0))
    return event(
        "batch",
        started + total / 1000,
        batch_id=int(progress["batchId"]),
        rows=int(progress.get("numInputRows", 0)),
        total_ms=total,
        spark={k: int(durations[k]) for k in SPARK_STEPS if k in durations},
        steps={k: round(v) for k, v in steps.items()},
    )


def append(job_dir: Path, entries: Iterable[Mapping[str, Any]]) -> None:
    path = job_dir / TIMELINE_FILE
    lines = "".join(json.dumps(e, sort_keys=True) + "\n" for e in entries)
    if not lines:
        return
    job_dir.mkdir(parents=True, exist_ok=True)
    with path.open("a") as out:
        out.write(lines)
    if path.stat().st_size > MAX_BYTES:
        kept = path.read_text().splitlines(keepends=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text("".join(kept[len(kept) // 2 :]))
        tmp.replace(path)


def read(job_dir: Path) -> list[dict[str, Any]]:
    path = job_dir / TIMELINE_FILE
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def startup(entries: Sequence[Mapping[str, Any]], after: float) -> dict[str, float]:
    """The first driver start after `after`: seconds from `after` to its process start, its session,
    its query and its first committed batch (pure; a phase not reached is absent)."""
    marks: dict[str, float] = {}
    for e in entries:
        kind = e["event"]
        # A process's start comes from /proc in 10 ms ticks: one started right after `after` may
        # read a few ms before it.
        since = after - CLOCK_SLACK_S if kind == "process" else after
        if e["at"] >= since and kind not in marks and (kind == "process" or "process" in marks):
            marks[kind] = max(e["at"], after)
    first = next((e for e in entries if e["event"] == "batch" and e["at"] == marks.get("batch")), None)
    out = {f"{kind}_s": at - after for kind, at in marks.items()}
    if first is not None:
        out["first_batch_rows"] = first["rows"]
        out |= {f"first_batch.{k}_s": v / 1000 for k, v in {**first["spark"], **first["steps"]}.items()}
    return out


def batch_medians(entries: Iterable[Mapping[str, Any]], since: float, until: float) -> dict[str, float]:
    """Median ms per step over the batches that ended in [since, until) (pure): `total`, Spark's
    steps and the views' steps, plus `batches` and `interval` (median time between batch ends)."""
    batches = _batches_in(entries, since, until)
    if not batches:
        return {}
    columns: dict[str, list[float]] = {"total": [b["total_ms"] for b in batches]}
    for b in batches:
        for key, value in {**b["spark"], **b["steps"]}.items():
            columns.setdefault(key, []).append(value)
    ends = sorted(b["at"] for b in batches)
    gaps = [(b - a) * 1000 for a, b in itertools.pairwise(ends)]
    medians = {k: float(statistics.median(v)) for k, v in columns.items()}
    medians["batches"] = float(len(batches))
    if gaps:
        medians["interval"] = float(statistics.median(gaps))
    return medians


def slowest_batches(
    entries: Iterable[Mapping[str, Any]], since: float, until: float, n: int = 3
) -> list[dict[str, Any]]:
    """The `n` slowest batches that ended in [since, until), slowest first (pure): each one's id,
    rows, `total` and steps in ms. A per-record p99 is set by a window's slowest batches, not by
    its median one."""
    batches = sorted(_batches_in(entries, since, until), key=lambda b: (-b["total_ms"], b["batch_id"]))
    return [
        {"batch_id": b["batch_id"], "rows": b["rows"], "total": b["total_ms"], **b["spark"], **b["steps"]}
        for b in batches[:n]
    ]


def _batches_in(entries: Iterable[Mapping[str, Any]], since: float, until: float) -> list[Mapping[str, Any]]:
    return [e for e in entries if e["event"] == "batch" and since <= e["at"] < until]


class StepClock:
    """Wall time (ms) per named step of the batches in flight; a batch's steps are taken once it is
    recorded. Steps may run on other threads (the cache's), and a re-run batch adds to its steps."""

    def __init__(self) -> None:
        self._by_batch: dict[int, dict[str, float]] = {}

    @contextmanager
    def timed(self, batch_id: int, step: str) -> Iterator[None]:
        began = time.perf_counter()
        try:
            yield
        finally:
            steps = self._by_batch.setdefault(batch_id, {})
            steps[step] = steps.get(step, 0.0) + (time.perf_counter() - began) * 1000

    def take(self, batch_id: int) -> dict[str, float]:
        """The batch's steps; older batches never recorded are dropped with it (bounded)."""
        for older in [b for b in self._by_batch if b < batch_id]:
            del self._by_batch[older]
        return self._by_batch.pop(batch_id, {})
