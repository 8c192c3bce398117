"""Load and CPU probes: what the machine and the stack's processes spend while a scenario runs.

Read-only: everything comes from Linux's /proc and the load average; no probe changes what it measures
beyond its own CPU (the sampler thread of `Phase` reads /proc every half second). Assumptions: a Linux
host, and for per-service CPU the local stack's pid files (`.stack/pids/<service>.pid`); for a stack
elsewhere (containers, external) the services' CPU is absent, never guessed.
- `Phase`: wall time, CPU per process and per Connect thread group, and load around one measured phase;
- `cpu_probe_ms` and `first_touch_us_per_page`: how fast this host runs now (it drifts between hours),
  recorded beside the measurements, not corrected for;
- `load()` and `cpu_seconds()`: the load average, and CPU seconds of named groups of processes.
"""

from __future__ import annotations

import mmap
import os
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psycopg
from psycopg import sql

from kafkakit.settings import Endpoints


def load() -> tuple[float, float, float]:
    """The 1, 5 and 15 minute load averages, rounded to hundredths."""
    one, five, fifteen = (round(x, 2) for x in os.getloadavg())
    return one, five, fifteen


def process_cpu_s(pid: int | None) -> float:
    """CPU seconds (user + system) used so far by one process; NaN without a pid."""
    return cpu_s(stat_fields(f"/proc/{pid}/stat")) if pid else float("nan")


def cpu_seconds(pids: Mapping[str, list[int]]) -> dict[str, float]:
    """User + system CPU seconds used so far by each named group of processes (one gone counts 0)."""
    used: dict[str, float] = {}
    for name, group in pids.items():
        used[name] = 0.0
        for pid in group:
            with suppress(OSError):
                used[name] += cpu_s(stat_fields(f"/proc/{pid}/stat"))
    return used


TASK_THREAD = "task_thread(poll+convert+send)"


def group_thread(comm: str) -> str:
    """Connect JVM thread name (first 15 characters) -> what it spends CPU on.

    Our connectors are named bench-..., so their task thread is `task-thread-ben`; other engineers'
    task threads are kept apart. Producer and Debezium thread names are too long to tell apart.
    """
    if comm.startswith("task-thread-"):
        return TASK_THREAD if comm.startswith("task-thread-ben") else "other_connectors_tasks"
    for prefix, group in (
        ("kafka-producer", "producer_io"),
        ("debezium", "debezium_threads"),
        # Debezium 3.6 reads snapshot chunks on an unnamed executor (seen in a thread dump).
        ("pool-", "snapshot_pool"),
        ("GC Thread", "gc"),
        ("G1 ", "gc"),
        ("C1 Compiler", "jit"),
        ("C2 Compiler", "jit"),
    ):
        if comm.startswith(prefix):
            return group
    return "other"


def capacity_estimate(cpu_us_per_row: Mapping[str, float], cores: int) -> dict[str, float | None]:
    """Rows/s this pipeline could reach on `cores` idle cores, from its measured CPU cost per row.

    Two ceilings: Connect runs the connector's single task thread (poll, JSON conversion, send)
    serially, and all pipeline processes together cannot use more than `cores`. Kafka and Postgres
    CPU includes other users' traffic, so the second ceiling is pessimistic.
    """
    task = cpu_us_per_row.get("connect." + TASK_THREAD, 0.0)
    pipeline = sum(
        v for k, v in cpu_us_per_row.items() if k.startswith("connect.") or k in ("kafka", "postgres")
    ) - cpu_us_per_row.get("connect.other_connectors_tasks", 0.0)
    single = 1e6 / task if task > 0 else None
    all_cores = cores * 1e6 / pipeline if pipeline > 0 else None
    known = [x for x in (single, all_cores) if x is not None]
    return {
        "task_thread_ceiling_rows_per_s": round(single) if single else None,
        "all_cores_ceiling_rows_per_s": round(all_cores) if all_cores else None,
        "estimate_rows_per_s": round(min(known)) if known else None,
    }


_CLK = os.sysconf("SC_CLK_TCK")
MACHINE_BUSY = "machine_busy_all_processes"
HOST_STEAL = "host_steal"
_MACHINE = (MACHINE_BUSY, HOST_STEAL)


def stat_fields(path: str) -> list[str]:
    with open(path, encoding="ascii", errors="replace") as f:
        return f.read().rsplit(")", 1)[1].split()


def cpu_s(fields_after_comm: list[str], children: bool = False) -> float:
    ticks = int(fields_after_comm[11]) + int(fields_after_comm[12])
    if children:
        ticks += int(fields_after_comm[13]) + int(fields_after_comm[14])
    return ticks / _CLK


@dataclass(frozen=True, slots=True, kw_only=True)
class StackPids:
    connect: int | None
    kafka: int | None
    postgres: int | None

    @classmethod
    def discover(cls, stack_dir: Path) -> StackPids:
        return cls(
            connect=pid_of(stack_dir, "connect", "toolkit.service=connect"),
            kafka=pid_of(stack_dir, "kafka", "toolkit.service=kafka"),
            postgres=pid_of(stack_dir, "postgres", "postgres"),
        )


def pid_of(stack_dir: Path, service: str, marker: str) -> int | None:
    with suppress(OSError, ValueError, IndexError):
        pid = int((stack_dir / "pids" / f"{service}.pid").read_text().split()[0])
        if marker in Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode():
            return pid
    return None


def cpu_sample(pids: StackPids) -> dict[str, float]:
    """Cumulative CPU seconds per process and per Connect thread (`connect.<group>@<tid>`)."""
    out: dict[str, float] = {}
    if pids.connect:
        with suppress(OSError):
            for tid in os.listdir(f"/proc/{pids.connect}/task"):
                with suppress(OSError):
                    comm = Path(f"/proc/{pids.connect}/task/{tid}/comm").read_text().strip()
                    # Per thread: threads of a deleted connector vanish between two samples, and
                    # summing per group first would turn their lost CPU into negative deltas.
                    key = f"connect.{group_thread(comm)}@{tid}"
                    out[key] = out.get(key, 0.0) + cpu_s(stat_fields(f"/proc/{pids.connect}/task/{tid}/stat"))
    if pids.kafka:
        with suppress(OSError):
            out["kafka"] = cpu_s(stat_fields(f"/proc/{pids.kafka}/stat"))
    if pids.postgres:
        # Backends and walsenders are children; exited ones are in the postmaster's cutime.
        total = 0.0
        with suppress(OSError):
            total = cpu_s(stat_fields(f"/proc/{pids.postgres}/stat"), children=True)
            for entry in os.listdir("/proc"):
                if entry.isdigit():
                    with suppress(OSError, IndexError):
                        st = stat_fields(f"/proc/{entry}/stat")
                        if int(st[1]) == pids.postgres:
                            total += cpu_s(st)
        out["postgres"] = total
    t = os.times()
    out["bench_python"] = t.user + t.system
    with suppress(OSError, IndexError, ValueError), open("/proc/stat", encoding="ascii") as f:
        cpu = [int(x) for x in f.readline().split()[1:]]
        # user nice system idle iowait irq softirq steal: everything but idle and iowait is busy.
        out[MACHINE_BUSY] = (sum(cpu[:8]) - cpu[3] - cpu[4]) / _CLK
        out[HOST_STEAL] = cpu[7] / _CLK
    return out


def thread_id(key: str) -> str:
    """`connect.<group>@<tid>` -> `connect@<tid>`; a process's key is its own."""
    return f"connect@{key.rsplit('@', 1)[1]}" if "@" in key else key


@dataclass
class Phase:
    """Wall time, CPU per process and load average around one measured phase."""

    pids: StackPids
    wall_s: float = 0.0
    cpu: dict[str, float] = field(default_factory=dict)
    load_before: tuple[float, ...] = ()
    load_after: tuple[float, ...] = ()

    @contextmanager
    def measure(self) -> Iterator[Phase]:
        self.load_before = tuple(round(x, 2) for x in os.getloadavg())
        before, t0 = cpu_sample(self.pids), time.monotonic()
        # Threads that end within the phase (Debezium's snapshot readers) are gone from the last
        # sample: every half second the latest of each thread is kept.
        latest: dict[str, tuple[str, float]] = {}
        done = threading.Event()

        def take() -> None:
            for key, seconds in cpu_sample(self.pids).items():
                latest[thread_id(key)] = (key.split("@", 1)[0], seconds)

        def keep() -> None:
            while not done.wait(0.5):
                take()

        sampler = threading.Thread(target=keep, name="phase-cpu", daemon=True)
        sampler.start()
        try:
            yield self
        finally:
            self.wall_s = time.monotonic() - t0
            done.set()
            sampler.join()
            take()
            # A thread keeps its id but may change its name, hence its group (Connect's pooled
            # threads are renamed per task): its CPU before the phase is found by id, and the
            # phase's share goes to the group it was last seen in.
            earlier = {thread_id(key): seconds for key, seconds in before.items()}
            grouped: dict[str, float] = {}
            for ident, (group, seconds) in latest.items():
                grouped[group] = grouped.get(group, 0.0) + seconds - earlier.get(ident, 0.0)
            self.cpu = {k: round(v, 2) for k, v in sorted(grouped.items())}
            self.load_after = tuple(round(x, 2) for x in os.getloadavg())

    def as_json(self, rows: int) -> dict[str, Any]:
        wall = max(self.wall_s, 1e-9)
        ours = sum(v for k, v in self.cpu.items() if k not in _MACHINE)
        busy = self.cpu.get(MACHINE_BUSY, float("nan"))
        per_row = {k: round(1e6 * v / max(rows, 1), 1) for k, v in self.cpu.items() if k not in _MACHINE}
        return {
            "wall_s": round(self.wall_s, 2),
            "cpu_s": self.cpu,
            "cpu_pct_of_one_core": {k: round(100 * v / wall, 1) for k, v in self.cpu.items()},
            "cpu_us_per_row": per_row,
            "capacity_if_idle": capacity_estimate(per_row, os.cpu_count() or 1),
            "machine_busy_cores": round(busy / wall, 2),
            "pipeline_and_bench_cores": round(ours / wall, 2),
            # What everyone else used meanwhile (Spark, tests). Approximate: per-thread CPU comes from
            # the scheduler clock, which keeps running while the host steals the vCPU, /proc/stat
            # from ticks, which do not; so the difference is clipped at 0.
            "other_processes_cores_approx": max(0.0, round((busy - ours) / wall, 2)),
            "host_steal_cores": round(self.cpu.get(HOST_STEAL, 0.0) / wall, 2),
            "idle_cores": max(0.0, round((os.cpu_count() or 1) - busy / wall, 2)),
            "loadavg_before": self.load_before,
            "loadavg_after": self.load_after,
        }


PAGE = 4096
TOUCH_PROBE_BYTES = 256 << 20


def first_touch_us_per_page(size: int = TOUCH_PROBE_BYTES) -> float:
    """Microseconds to fault in one fresh 4 KiB page of anonymous memory now: `size` bytes allocated
    and written a byte per page. On our machines (a nested VM whose host takes freed guest memory
    back) it ranged from ~2 us to ~9 us within a session: memory the guest has not touched since boot
    or gave back costs the host's fault too. A backfill faults in millions of pages (the driver's JVM
    heap alone ~1.1M in a 2M-change run), so the same code's rows/s follows this; it is recorded
    beside each measurement, not corrected for."""
    with mmap.mmap(-1, size) as memory:  # anonymous: mapped, no page touched yet
        began = time.perf_counter()
        memory[::PAGE] = b"\x01" * (size // PAGE)  # one write per page, in C
        seconds = time.perf_counter() - began
    return round(seconds * 1e6 / (size // PAGE), 2)


def cpu_probe_ms(steps: int = 2_000_000, tries: int = 5) -> float:
    """Milliseconds of a fixed pure-Python loop of `steps` steps, the best of `tries`: how fast a core
    of this host runs its own cache-resident code now (memory's speed it does not see). The host's speed
    drifts between hours (a neighbour of the VM): Connect's CPU per snapshot row, code unchanged, was
    23.0 µs at one hour and 30.5 µs three hours later, and every measure of the run slower with it; it
    is recorded beside the measurements, not corrected for."""
    best = float("inf")
    for _ in range(tries):
        began = time.perf_counter()
        total = 0
        for i in range(steps):
            total += i & 7
        best = min(best, time.perf_counter() - began)
    return round(best * 1000, 1)


def stack_environment(endpoints: Endpoints, pids: StackPids) -> dict[str, Any]:
    """The host's cores, load and speed probes, and the stack's versions and settings that move the
    numbers (Connect, Debezium, Postgres's commit settings, Connect's heap); what cannot be read is left out."""
    env: dict[str, Any] = {
        "cpus": os.cpu_count(),
        "loadavg_start": tuple(round(x, 2) for x in os.getloadavg()),
        "first_touch_us_per_page": first_touch_us_per_page(),
        "cpu_probe_ms": cpu_probe_ms(),
    }
    with suppress(httpx.HTTPError, ValueError):
        env["connect"] = httpx.get(endpoints.kafka_connect_url, timeout=5).json().get("version")
        plugins = httpx.get(endpoints.kafka_connect_url + "/connector-plugins", timeout=5).json()
        env["debezium"] = next((p["version"] for p in plugins if "postgresql" in p["class"]), None)
        env["other_connectors_at_start"] = len(
            httpx.get(endpoints.kafka_connect_url + "/connectors", timeout=5).json()
        )
    with suppress(psycopg.Error), psycopg.connect(endpoints.pg_dsn, connect_timeout=5) as conn:
        env["postgres"] = {
            s: str((conn.execute(sql.SQL("SHOW {}").format(sql.Identifier(s))).fetchone() or ("?",))[0])
            for s in ("server_version", "synchronous_commit", "wal_writer_delay", "fsync")
        }
    if pids.connect:
        with suppress(OSError):
            args = Path(f"/proc/{pids.connect}/cmdline").read_bytes().split(b"\0")
            env["connect_jvm_heap"] = [a.decode() for a in args if a.startswith((b"-Xmx", b"-Xms"))]
    env["cpu_accounting"] = {
        "connect": pids.connect is not None,
        "kafka": pids.kafka is not None,
        "postgres": pids.postgres is not None,
    }
    return env
