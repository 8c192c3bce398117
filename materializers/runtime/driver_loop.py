"""Several materializers in one Spark application: one streaming query each, one driver for all.

Two drivers are two JVMs: on a small machine they fight for the cores the queries need (the demo's
two drivers missed its commit-to-view target by far). Here each materializer keeps its own query, checkpoint,
status file, stop file and dead letters; they share the session, its JVM and its executors.

Isolation: a query that fails is reported `failed` in its own status and the others keep running; a
stop request (`materializers stop NAME`, the job's stop file) stops only that query, after its batch;
SIGTERM/SIGINT stops every query, each after its current batch. The driver exits when no query runs,
with 1 if any failed. A query whose job learnt writer schemas it does not decode with (a column added
in the source) is stopped after its batch and started again from its checkpoint (job.py, step 1).

`check_distinct` refuses, before anything starts, plans that would write into each other: a name
twice, or two materializers sharing a checkpoint or a Redis prefix.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Protocol

from kafkakit.positions import StartPosition
from kafkakit.secrets import masked
from materializers.errors import ConflictingJobs
from materializers.runtime import lifecycle, status, timeline

if TYPE_CHECKING:
    from pyspark.sql.streaming.query import StreamingQuery

    from materializers.plan import JobPlan
    from materializers.runtime.timeline import StepClock

log = logging.getLogger(__name__)
# How long a graceful stop waits for a running batch to finish (views + checkpoint commit).
BATCH_GRACE_S = 120.0


def check_distinct(plans: Sequence[JobPlan]) -> None:
    """Refuse plans that would share state: nothing has started when this raises (pure)."""
    problems = [
        f"{name!r} is named {n} times" for name, n in Counter(p.spec.name for p in plans).items() if n > 1
    ]
    for what, key in (
        ("checkpoint", lambda p: str(p.checkpoint)),
        ("Redis prefix", lambda p: p.redis_prefix),
    ):
        by_value: dict[str, list[str]] = {}
        for plan in plans:
            by_value.setdefault(key(plan), []).append(plan.spec.name)
        problems += [
            f"{' and '.join(names)} would share the {what} {value}"
            for value, names in by_value.items()
            if len(set(names)) > 1
        ]
    if problems:
        raise ConflictingJobs(
            "these materializers cannot run together: " + "; ".join(problems) + ". Name each once and give "
            "each its own checkpoint (--checkpoint NAME=DIR) and Redis prefix"
        )


class DrivenQuery(Protocol):
    """What the loop drives: one materializer's streaming query (a view job, `runtime.job.Job`, or an
    aggregate's, `aggregates.job.AggregateJob`). The loop knows no kind of job by name."""

    plan: JobPlan
    app_id: str
    dead_letters: int
    clock: StepClock

    def start(self, start: StartPosition, *, available_now: bool = False) -> StreamingQuery: ...

    def stale(self) -> bool:
        """Whether the query should be restarted between batches (to decode what its job learnt)."""
        ...

    def restart(self, *, available_now: bool = False) -> StreamingQuery: ...

    def counted(self, current: status.JobStatus, query: StreamingQuery | None) -> status.JobStatus:
        """`current` with the job's own totals (an aggregate's late, refused and corrected records)."""
        ...


@dataclass(slots=True)
class _Running:
    job: DrivenQuery
    status: status.JobStatus
    query: StreamingQuery | None = None
    done: bool = False
    recorded: int = -1  # the last batch id written to the job's timeline
    seen: object = None  # the timestamp of the last progress polled
    available_now: bool = False


def run(jobs: Sequence[DrivenQuery], start: StartPosition, *, available_now: bool = False) -> int:
    """Start every job's query and drive them until each has stopped; 0 clean, 1 if any failed."""
    stopping: list[int] = []
    if threading.current_thread() is threading.main_thread():  # signals reach the main thread only
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda signum, _frame: stopping.append(signum))
    running = [_begin(job, start, available_now) for job in jobs]
    while not stopping and any(not r.done for r in running):
        time.sleep(0.5)
        for r in running:
            if not r.done:
                _poll(r)
    for r in running:
        if not r.done:
            _finish(r, graceful=True)
    return 1 if any(r.status.state == "failed" for r in running) else 0


def _begin(job: DrivenQuery, start: StartPosition, available_now: bool) -> _Running:
    plan = job.plan
    current = status.JobStatus(
        name=plan.spec.name,
        state="starting",
        pid=os.getpid(),
        topic=plan.topic,
        checkpoint=str(plan.checkpoint),
    )
    status.write(plan.job_dir, current)
    lifecycle.stop_file(plan.job_dir).unlink(missing_ok=True)
    r = _Running(job=job, status=current, available_now=available_now)
    try:
        r.query = job.start(start, available_now=available_now)
    except Exception as exc:  # one job that cannot start must not keep the others from running
        log.exception("materializer %s did not start", plan.spec.name)
        _settle(r, error=exc)
        return r
    r.status = replace(current, state="running", app_id=job.app_id)
    timeline.append(plan.job_dir, [timeline.event("query", time.time())])
    return r


def _poll(r: _Running) -> None:
    assert r.query is not None
    if not r.query.isActive:
        _finish(r, graceful=False)
    elif lifecycle.stop_file(r.job.plan.job_dir).exists():
        _finish(r, graceful=True)
    else:
        r.status = _publish(r, r.query.lastProgress)
        if r.job.stale():
            _restart(r, r.job)


def _restart(r: _Running, job: DrivenQuery) -> None:
    """A query whose job learnt writer schemas it does not decode with (a column added in the source,
    say), or met JSON records where it reads Avro only: stopped after its batch and started again
    from its checkpoint, decoding all of them. Until then each batch read and decoded those records
    twice (job.py, step 1)."""
    assert r.query is not None
    log.info("materializer %s: restarting its query to decode what it learnt", job.plan.spec.name)
    _stop_between_batches(r.query)
    r.status = _publish(r, r.query.lastProgress)  # the batch that ran meanwhile
    error: BaseException | None = r.query.exception()
    if error is None:
        try:
            r.query = job.restart(available_now=r.available_now)
            return
        except Exception as exc:
            log.exception("materializer %s did not restart", job.plan.spec.name)
            error = exc
    _settle(r, error=error)


def _stop_between_batches(query: StreamingQuery) -> None:
    deadline = time.monotonic() + BATCH_GRACE_S
    while query.status.get("isTriggerActive") and time.monotonic() < deadline:
        time.sleep(0.2)
    query.stop()


def _finish(r: _Running, *, graceful: bool) -> None:
    """Stop the query (after its running batch when graceful) and publish its final state."""
    assert r.query is not None
    if graceful and r.query.isActive:
        _stop_between_batches(r.query)
    error = r.query.exception()
    r.status = _publish(r, r.query.lastProgress)
    _settle(r, error=error)


def _settle(r: _Running, *, error: BaseException | Any | None) -> None:
    final = replace(
        r.status,
        state="failed" if error else "stopped",
        # status.json is read by anyone who can list jobs: no password of an endpoint goes in it
        last_error=masked(str(error))[:2000] if error else r.status.last_error,
        updated_at=time.time(),
    )
    status.write(r.job.plan.job_dir, final)
    lifecycle.stop_file(r.job.plan.job_dir).unlink(missing_ok=True)
    r.status, r.done = final, True
    if error:
        log.error(
            "materializer %s failed: %s",
            r.job.plan.spec.name,
            masked(str(error)).splitlines()[0] if str(error) else "",
        )


def _publish(r: _Running, progress: dict[str, Any] | None) -> status.JobStatus:
    if progress:
        _record_batches(r, progress)
    updated = status.from_progress(r.status, progress) if progress else r.status
    updated = r.job.counted(updated, r.query)
    updated = replace(updated, dead_letters=r.job.dead_letters, updated_at=time.time())
    status.write(r.job.plan.job_dir, updated)
    return updated


def _record_batches(r: _Running, last: dict[str, Any]) -> None:
    """Write the batches run since the last poll to the job's timeline. The poll usually sees each
    batch as the last progress; only when it missed some does it ask Spark for the recent ones."""
    if last.get("timestamp") == r.seen:  # no progress since the last poll
        return
    r.seen = last.get("timestamp")
    last_id = int(last.get("batchId", -1))
    if last_id <= r.recorded:
        return
    assert r.query is not None
    progresses = [last] if last_id == r.recorded + 1 else r.query.recentProgress
    ran = [
        p
        for p in progresses
        if int(p.get("batchId", -1)) > r.recorded and "addBatch" in p.get("durationMs", {})  # not idle
    ]
    timeline.append(
        r.job.plan.job_dir,
        [timeline.batch_event(p, r.job.clock.take(int(p["batchId"]))) for p in ran],
    )
    if ran:
        r.recorded = max(int(p["batchId"]) for p in ran)
