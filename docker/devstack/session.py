"""One stack for a test session or the demo, whatever backs it.

Order of choice, first that applies:
1. TOOLKIT_STACK=external: the five endpoints come from the environment (docker compose, real infra).
2. A local stack already running (its .stack/env present and every service answering): reused, left running.
3. A Docker engine answers: testcontainers start the same images (docker/compose.yaml's versions).
4. Otherwise the local processes are started, and stopped again when the session ends.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from devstack import stack
from devstack.config import StackConfig
from kafkakit.settings import Endpoints

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class StackHandle:
    """The endpoints, plus fault injection that works the same on every backend."""

    endpoints: Endpoints
    backend: str
    _kill: Callable[[str], None]
    _restart: Callable[[], object]

    def __getattr__(self, name: str) -> str:
        return str(getattr(self.endpoints, name))

    def crash(self, service: str) -> None:
        """kill -9 one service (postgres, kafka, connect, redis, registry)."""
        self._kill(service)

    def recover(self) -> None:
        """Start again whatever was crashed and wait until it answers."""
        self._restart()


def _unsupported(*_: str) -> None:
    raise NotImplementedError("fault injection is not available on an external stack")


@contextmanager
def open_stack(config: StackConfig | None = None, *, keep_started: bool = False) -> Iterator[StackHandle]:
    """`keep_started`: a stack this call starts is left running at the end (the demo's --keep)."""
    config = config or StackConfig.from_env()
    if os.environ.get("TOOLKIT_STACK") == "external":
        yield StackHandle(Endpoints.from_env(), "external", _unsupported, _unsupported)
        return
    if config.env_file.exists() and all(s.ready for s in stack.status(config)):
        log.info("reusing the running local stack (%s)", config.env_file)
        yield _local_handle(config, "local (reused)")
        return
    from devstack.containers import docker_engine_available, start_container_stack

    if docker_engine_available():
        containers = start_container_stack()
        try:
            yield StackHandle(containers.endpoints, "testcontainers", containers.kill, containers.restart)
        finally:
            containers.stop()
        return
    stack.up(config)
    try:
        yield _local_handle(config, "local (started)")
    finally:
        if not keep_started:
            stack.down(config)


def _local_handle(config: StackConfig, backend: str) -> StackHandle:
    env = stack.read_env(config.env_file)
    endpoints = Endpoints.from_env(env)
    return StackHandle(endpoints, backend, lambda name: stack.kill(config, name), lambda: stack.up(config))
