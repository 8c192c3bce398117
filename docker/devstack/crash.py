"""Crash and recover, for tests: kill -9 whole process groups and stack services, and wait properly.

A crash test needs three things the standard library does not give in one call: the process under
test started as the leader of its own process group (a Spark driver forks a JVM; `kill -9` of the
Python parent alone would leave the JVM writing), a `kill -9` of that whole group, and a wait until no
process of the group is left (a surviving JVM still holds its files and ports, and a restart would race
it). `ProcessGroups` does all three, and kills whatever is still running when the test ends, failed or
not. `StackFaults` crashes services of the stack (`StackHandle.crash`) and brings back, at the end,
whatever a test left down, so the next test finds the stack whole.
Assumptions: Linux (/proc), processes started by this process.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import IO

from devstack.processes import group_members
from devstack.session import StackHandle


def crash_group(process: subprocess.Popen[bytes], *, timeout_s: float = 30.0) -> int:
    """kill -9 the process group `process` leads, wait until none of it is left; its exit status (-9).

    `process` must have been started with `start_new_session=True` (as `ProcessGroups.start` does):
    otherwise its group is the caller's, and the caller would kill itself.
    """
    pgid = process.pid
    if os.getpgid(0) == pgid:
        raise ValueError(
            f"process {pgid} leads the caller's own process group: start it with start_new_session=True"
        )
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGKILL)
    status = process.wait(timeout_s)
    wait_until(lambda: not group_members(pgid), timeout_s=timeout_s, what=f"process group {pgid} gone")
    return status


def wait_until(
    condition: Callable[[], bool],
    *,
    timeout_s: float,
    what: str,
    process: subprocess.Popen[bytes] | None = None,
    interval_s: float = 0.2,
) -> None:
    """Poll `condition` until it holds. Raises TimeoutError after `timeout_s`, or RuntimeError as soon as
    `process` (the one expected to make it hold: a driver reaching a failpoint) has exited without."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if process is not None and process.poll() is not None:
            if condition():
                return
            raise RuntimeError(f"{what}: not reached, the process exited with status {process.returncode}")
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: not reached within {timeout_s:.0f} s")
        time.sleep(interval_s)


class ProcessGroups:
    """Starts commands, each leading a process group of its own; `crash` kills one group with SIGKILL;
    `close` (the fixture's teardown) kills every group still running."""

    def __init__(self) -> None:
        self.started: list[subprocess.Popen[bytes]] = []

    def start(
        self,
        argv: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
        output: Path | None = None,
    ) -> subprocess.Popen[bytes]:
        """Start `argv` (env: the whole environment, None = this one's); stdout and stderr go to `output`
        (a file, appended) or are dropped."""
        sink: IO[bytes] | int = output.open("ab") if output is not None else subprocess.DEVNULL
        try:
            process = subprocess.Popen(
                list(argv), env=None if env is None else dict(env), cwd=cwd, stdin=subprocess.DEVNULL,
                stdout=sink, stderr=subprocess.STDOUT, start_new_session=True,
            )  # fmt: skip
        finally:
            if not isinstance(sink, int):
                sink.close()  # the child holds its own copy
        self.started.append(process)
        return process

    def crash(self, process: subprocess.Popen[bytes], *, timeout_s: float = 30.0) -> int:
        """kill -9 `process`'s whole group and wait until it is gone; returns the exit status (-9)."""
        return crash_group(process, timeout_s=timeout_s)

    def close(self) -> None:
        for process in self.started:
            if process.poll() is None or group_members(process.pid):
                crash_group(process)
        self.started.clear()


class StackFaults:
    """`crash("connect")` kills a service of the stack with -9; `recover()` starts again whatever is down
    and waits until it answers; `close()` recovers what a test left crashed. Not on an external stack."""

    def __init__(self, handle: StackHandle) -> None:
        if not handle.can_inject_faults:
            raise NotImplementedError(f"fault injection is not available on the {handle.backend} stack")
        self._handle = handle
        self.crashed: list[str] = []

    def crash(self, service: str) -> None:
        """kill -9 one service: postgres, kafka, connect, redis or registry."""
        self.crashed.append(service)
        self._handle.crash(service)

    def recover(self) -> None:
        self._handle.recover()
        self.crashed.clear()

    def close(self) -> None:
        if self.crashed:
            self.recover()
