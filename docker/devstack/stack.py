"""The local stack: bring the services up (OpenSearch only when asked), report their state, bring them down.

`up` is repeatable: services already running and answering are kept, the rest are started. If any
service does not become ready in time, its log tail is raised in `ServiceNotReady` and every process
this call started is stopped again, so a failed start leaves nothing half-running.
"""

from __future__ import annotations

import logging
import os
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from devstack import processes
from devstack.artifacts import Artifacts, cache_root, fetch_all
from devstack.config import StackConfig, choose_ports, port_key
from devstack.errors import ServiceNotReady, StackError
from devstack.pins import Pins
from devstack.services import (
    ALL_SERVICES,
    OPTIONAL_ENDPOINTS,
    Context,
    Service,
    check_prerequisites,
    running_as_root,
    services,
)

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class ServiceState:
    name: str
    pid: int | None
    ready: bool
    rss_bytes: int
    port: int


@dataclass(frozen=True, slots=True)
class UpResult:
    endpoints: dict[str, str]
    ready_seconds: dict[str, float]  # only the services this call started
    total_seconds: float


def _context(config: StackConfig, running: set[str], artifacts: Artifacts | None = None) -> Context:
    ports = choose_ports(config, running)
    return Context(config=config, ports=ports, artifacts=artifacts or Artifacts(cache_root(), Pins.load()))


def running_services(config: StackConfig) -> set[str]:
    return {s.name for s in ALL_SERVICES if processes.alive_pid(config.pid_file(s.name))}


def _claim_topology(config: StackConfig) -> None:
    """A state dir holds one topology: refuse to start another over a running one."""
    recorded = config.topology_file.read_text().strip() if config.topology_file.exists() else None
    if recorded not in (None, config.topology.name) and running_services(config):
        raise StackError(
            f"the stack in {config.state_dir} runs the {recorded} topology, not {config.topology.name}: "
            f"stop it first (`devstack down --topology {recorded}`), or give this one another STACK_DIR"
        )
    config.state_dir.mkdir(parents=True, exist_ok=True)
    config.topology_file.write_text(config.topology.name)


def up(config: StackConfig) -> UpResult:
    check_prerequisites()
    _claim_topology(config)
    artifacts = fetch_all()
    started_at = time.monotonic()
    ctx = _context(config, running_services(config), artifacts)
    ready_times: dict[str, float] = {}
    started: dict[str, float] = {}  # service -> monotonic start time, in start order
    try:
        running = running_services(config)
        pending = [s for s in wanted(config, running) if not (s.name in running and s.probe(ctx))]
        for stale in (s for s in pending if s.name in running):
            _stop_service(ctx, stale)  # alive but not answering: a wedged leftover of a crashed run
        first = [s for s in pending if not s.after]
        with ThreadPoolExecutor(max_workers=len(ALL_SERVICES)) as pool:
            list(pool.map(lambda s: _start(ctx, s, started), first))
            waits = {s.name: pool.submit(_await_ready, ctx, s, started[s.name]) for s in first}
            for s in pending:
                if s.after:
                    for dependency in s.after:
                        if dependency in waits:
                            ready_times[dependency] = waits[dependency].result()
                    _start(ctx, s, started)
                    waits[s.name] = pool.submit(_await_ready, ctx, s, started[s.name])
            for name, future in waits.items():
                ready_times[name] = future.result()
    except BaseException:
        for service in reversed([s for s in ALL_SERVICES if s.name in started]):
            _stop_service(ctx, service)
        raise
    endpoints = stack_endpoints(ctx, running_services(config))
    _write_env(config, endpoints)
    return UpResult(endpoints, ready_times, time.monotonic() - started_at)


def wanted(config: StackConfig, running: set[str]) -> list[Service]:
    """The services `up` keeps: every one of the topology's required ones, an optional one asked for
    or already running."""
    return [
        s
        for s in services(config.topology)
        if not s.optional or s.name in config.optional or s.name in running
    ]


def stack_endpoints(ctx: Context, running: set[str]) -> dict[str, str]:
    """The endpoints for .stack/env: an optional service's only while it runs."""
    return {
        k: v
        for k, v in ctx.endpoints().items()
        if k not in OPTIONAL_ENDPOINTS or OPTIONAL_ENDPOINTS[k] in running
    }


def _start(ctx: Context, service: Service, started: dict[str, float]) -> None:
    started[service.name] = time.monotonic()
    service.prepare(ctx)
    user = "postgres" if service.as_postgres_user and running_as_root() else None
    env = {**os.environ, **service.environment(ctx)} if service.environment else None
    processes.spawn(
        service.command(ctx),
        ctx.config.log_file(service.name),
        ctx.config.pid_file(service.name),
        user,
        env=env,
    )


def _await_ready(ctx: Context, service: Service, t0: float) -> float:
    deadline = t0 + ctx.config.ready_timeout_s
    pid_file = ctx.config.pid_file(service.name)
    while time.monotonic() < deadline:
        if service.probe(ctx):
            return time.monotonic() - t0
        if processes.alive_pid(pid_file) is None:
            raise ServiceNotReady(_failure(ctx, service, "exited during start-up"))
        time.sleep(0.25)
    raise ServiceNotReady(
        _failure(ctx, service, f"did not become ready within {ctx.config.ready_timeout_s:.0f}s "
                 "(raise STACK_READY_TIMEOUT on a slow machine)")
    )  # fmt: skip


def _failure(ctx: Context, service: Service, what: str) -> str:
    log_file = ctx.config.log_file(service.name)
    tail = log_file.read_text(errors="replace").splitlines()[-40:] if log_file.exists() else []
    return f"{service.name} {what}; last lines of {log_file}:\n" + "\n".join(tail)


def _stop_service(ctx: Context, service: Service) -> None:
    pid_file = ctx.config.pid_file(service.name)
    pid = processes.alive_pid(pid_file)
    if pid is not None:
        processes.stop(pid, service.stop_signal)
    pid_file.unlink(missing_ok=True)


def down(config: StackConfig) -> list[str]:
    """Stop every service (dependents first) and sweep any process still naming the state dir."""
    ctx = Context(config=config, ports={}, artifacts=Artifacts(cache_root(), Pins.load()))
    stopped = []
    for service in reversed(ALL_SERVICES):
        if processes.alive_pid(config.pid_file(service.name)):
            stopped.append(service.name)
        _stop_service(ctx, service)
    for pid in processes.pids_mentioning(str(config.state_dir)):
        processes.kill_group(pid)
        stopped.append(f"stray pid {pid}")
    config.env_file.unlink(missing_ok=True)
    return stopped


def kill(config: StackConfig, name: str) -> None:
    """kill -9 one service, as a crash would (for fault-injection tests)."""
    pid = processes.alive_pid(config.pid_file(name))
    if pid is not None:
        processes.kill_group(pid)


def status(config: StackConfig) -> list[ServiceState]:
    """The state of every service the stack keeps (an optional one only when asked for or running)."""
    running = running_services(config)
    services = wanted(config, running)
    if not config.ports_file.exists():
        return [ServiceState(s.name, None, False, 0, 0) for s in services]
    ctx = _context(config, running | {s.name for s in ALL_SERVICES})  # never re-pick ports for a status
    states = []
    for service in services:
        pid = processes.alive_pid(config.pid_file(service.name))
        ready = pid is not None and service.probe(ctx)
        rss = processes.rss_bytes(pid) if pid else 0
        states.append(ServiceState(service.name, pid, ready, rss, _main_port(ctx, service.name)))
    return states


def _main_port(ctx: Context, service: str) -> int:
    """The port a service answers at (a Spark worker: its web UI, it has no fixed other)."""
    key = port_key(service)
    return ctx.ports.get(key) or ctx.ports.get(f"{key}_ui", 0)


def _write_env(config: StackConfig, endpoints: dict[str, str]) -> None:
    # Owner-only: PG_SECURE_DSN carries the secured Postgres role's password.
    config.env_file.touch(mode=0o600)
    config.env_file.chmod(0o600)  # a file written before it held a password
    config.env_file.write_text("".join(f"export {k}={v}\n" for k, v in endpoints.items()))


def read_env(env_file: Path) -> dict[str, str]:
    pairs = (
        line.removeprefix("export ").split("=", 1)
        for line in env_file.read_text().splitlines()
        if "=" in line
    )
    return {k: v for k, v in pairs}
