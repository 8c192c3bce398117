"""Starting, finding and stopping detached processes by pid file (pid + start time, so a reused pid
is never mistaken for ours)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from pathlib import Path


def _start_time(pid: int) -> str | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # Field 22 (starttime) comes after the command name, which may itself contain spaces.
    return stat.rsplit(")", 1)[1].split()[19]


def spawn(
    cmd: list[str],
    log_file: Path,
    pid_file: Path,
    user: str | None = None,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
) -> int:
    log_file.parent.mkdir(parents=True, exist_ok=True)
    pid_file.parent.mkdir(parents=True, exist_ok=True)
    with log_file.open("ab") as out:
        proc = subprocess.Popen(
            cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
            user=user, group=user, cwd=cwd, env=env,
        )  # fmt: skip
    pid_file.write_text(f"{proc.pid} {_start_time(proc.pid)}\n")
    return proc.pid


def alive_pid(pid_file: Path) -> int | None:
    """The pid recorded in `pid_file` if that very process still runs."""
    try:
        pid_text, started = pid_file.read_text().split()
    except (OSError, ValueError):
        return None
    pid = int(pid_text)
    return pid if _start_time(pid) == started and not _is_zombie(pid) else None


def _is_zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def _reap(pid: int) -> None:
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)


def stop(pid: int, sig: int, grace_s: float = 20.0) -> None:
    """Ask politely, then kill the whole process group."""
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        _reap(pid)
        if _start_time(pid) is None or _is_zombie(pid):
            break
        time.sleep(0.1)
    kill_group(pid)


def kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)
    _reap(pid)


def pids_mentioning(text: str) -> list[int]:
    """Processes whose command line mentions `text` (our state dir): the sweep after a stop."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if text in cmdline:
            found.append(int(entry.name))
    return found


def group_members(pgid: int) -> list[int]:
    """Live (not zombie) processes of process group `pgid`: empty once a killed group is really gone."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            state, _ppid, group = (entry / "stat").read_text().rsplit(")", 1)[1].split()[:3]
        except (OSError, ValueError):
            continue
        if int(group) == pgid and state != "Z":
            found.append(int(entry.name))
    return found


def rss_bytes(pid: int) -> int:
    """Resident memory of a process and all its descendants (Postgres forks a backend per client)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    total, todo = 0, [pid]
    while todo:
        current = todo.pop()
        total += _own_rss(current)
        todo.extend(children.get(current, []))
    return total


def _own_rss(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0
