"""One streaming query run to its end, timed: the benchmarks' availableNow runs share it.

`run_available_now` starts a job (`materializers.runtime.job.Job`, `AggregateJob`, ...) from the earliest
offsets with availableNow, waits for the query to end and returns its wall time (start included)
and Spark's progress per batch; `run_to_end` does the same for any query a callable starts (the
peer's job). A query that failed or is still running after the timeout raises.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from kafkakit.positions import StartPosition, parse_start

if TYPE_CHECKING:
    from pyspark.sql.streaming.query import StreamingQuery


class StreamingJob(Protocol):
    def start(self, start: StartPosition, *, available_now: bool = False) -> StreamingQuery: ...


def input_rows(progress: Mapping[str, Any]) -> int:
    return int(progress["numInputRows"])


@dataclass(frozen=True)
class Run:
    seconds: float  # the query's wall time: start, every batch, the end
    progress: list[dict[str, Any]]  # Spark's progress per batch (the query's recentProgress)

    def batches_reading(
        self, records: int, what: str, read: Callable[[Mapping[str, Any]], int] = input_rows
    ) -> list[dict[str, Any]]:
        """The batches that read anything, checked to have read `records` between them (`read`
        counts a batch's records; `numInputRows` by default)."""
        batches = [p for p in self.progress if p["numInputRows"]]
        processed = sum(read(p) for p in batches)
        if processed != records:
            raise RuntimeError(f"{what} read {processed} records, expected {records}")
        return batches


def run_to_end(start: Callable[[], StreamingQuery], what: str, timeout_s: int | None = 3600) -> Run:
    """Start a query (`start` returns it started), wait for it to end (`timeout_s`, None: no limit)."""
    began = time.monotonic()
    query = start()
    query.awaitTermination(timeout_s)
    seconds = time.monotonic() - began
    if query.exception() is not None or query.isActive:
        raise RuntimeError(f"{what} did not finish: {query.exception()}")
    return Run(seconds, list(query.recentProgress))


def run_available_now(job: Callable[[], StreamingJob], what: str, timeout_s: int | None = 3600) -> Run:
    """Build the job (`job()`, timed with the run) and run it from the earliest offsets with
    availableNow: what the topic holds now, then the query stops."""
    return run_to_end(lambda: job().start(parse_start("earliest"), available_now=True), what, timeout_s)
