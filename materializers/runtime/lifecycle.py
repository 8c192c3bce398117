"""Which jobs are running under a home directory, and stopping them gracefully.

A job is running when its `status.json` says starting/running AND its driver pid is alive (a
driver killed with -9 leaves "running" behind; it is reported as "dead"). Stopping = touch the
job's `stop` file, then SIGTERM: the driver lets the current micro-batch finish (views and the
checkpoint commit), then stops the query (see Job.run).
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

from materializers.config import RunConfig
from materializers.errors import JobRunning
from materializers.runtime import status

STOP_FILE = "stop"


def jobs(config: RunConfig) -> list[status.JobStatus]:
    if not config.home.is_dir():
        return []
    found = [status.read(d) for d in sorted(config.home.iterdir()) if d.is_dir()]
    return [s for s in found if s is not None]


def state(job: status.JobStatus) -> str:
    """The published state, or "dead" when a starting/running driver's pid is gone."""
    if job.state in ("running", "starting") and not status.alive(job.pid):
        return "dead"
    return job.state


def running(config: RunConfig, name: str | None = None) -> list[status.JobStatus]:
    return [j for j in jobs(config) if name in (None, j.name) and state(j) in ("running", "starting")]


def refuse_if_running(config: RunConfig, name: str, action: str) -> None:
    """Raise JobRunning when the job `name` has a live driver (its views are being written)."""
    live = running(config, name)
    if live:
        raise JobRunning(
            f"materializer {name!r} is running (pid {live[0].pid}) and writing its views; "
            f"stop it first with `materializers stop {name}`, then {action}"
        )


def request_stop(config: RunConfig, targets: list[status.JobStatus]) -> None:
    for job in targets:
        (config.job_dir(job.name) / STOP_FILE).touch()
        os.kill(job.pid, signal.SIGTERM)


def wait_stopped(targets: list[status.JobStatus], timeout: float) -> list[str]:
    """Names of the targets still alive after `timeout` seconds (polled)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and any(status.alive(j.pid) for j in targets):
        time.sleep(0.2)
    return [j.name for j in targets if status.alive(j.pid)]


def stop_file(job_dir: Path) -> Path:
    return job_dir / STOP_FILE
