"""One stack for a test session, the demo or a user's own tests, whatever backs it.

`TOOLKIT_STACK` picks the backend (read only in `StackChoice.from_env`):
- unset or `auto`, first that applies: a local stack already running (its .stack/env present and every
  service answering) is reused and left running; where a Docker engine answers and has the stack's
  images (`devstack images build`), testcontainers start them; otherwise the local processes are
  started, and stopped again when the session ends (an engine without the images is said in one line);
- `external`: the five endpoints come from the environment (docker compose, real infrastructure);
- `containers`: testcontainers, and nothing else;
- `local`: the local processes (a running local stack is reused).

Guarantees: a backend asked for by name is used or refused, never swapped for another; a refusal
(`BackendUnavailable`: no Docker engine, testcontainers not installed, an external endpoint that does
not answer its probe) is raised before anything starts and names the cause and the fix. An external
stack's five endpoints are probed at once (`devstack.probes`), so an absent one costs one timeout.

Connect's view: the Connect worker opens its own connections to Postgres (a connector's `database`)
and to the schema registry (an Avro connector's `registry.url`). In containers it reaches them by
network alias (postgres:5432, http://apicurio:8080), not at the host's mapped ports; so every handle
carries `connect_view`, the addresses *Connect* uses, beside `endpoints`, the host's. Locally both are
the same; for an external stack set TOOLKIT_CONNECT_PG_DSN / TOOLKIT_CONNECT_REGISTRY_URL where they
differ (docker compose: postgresql://postgres@postgres:5432/postgres, http://apicurio:8080).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Literal

from devstack import probes, stack
from devstack.config import StackConfig
from devstack.errors import BackendUnavailable, ImagesNotBuilt, StackError
from kafkakit.errors import ConfigError
from kafkakit.settings import Endpoints

log = logging.getLogger(__name__)

Backend = Literal["auto", "external", "containers", "local"]
BACKENDS: tuple[Backend, ...] = ("auto", "external", "containers", "local")


@dataclass(frozen=True, slots=True, kw_only=True)
class ConnectView:
    """Postgres and the schema registry as the Connect worker reaches them (for connector specs)."""

    pg_dsn: str
    schema_registry_url: str

    @classmethod
    def same_as(cls, endpoints: Endpoints) -> ConnectView:
        """Connect runs beside the caller (local processes): it uses the caller's addresses."""
        return cls(pg_dsn=endpoints.pg_dsn, schema_registry_url=endpoints.schema_registry_url)


@dataclass(frozen=True, slots=True, kw_only=True)
class StackChoice:
    """Which backend `open_stack` uses, and an external stack's addresses."""

    backend: Backend = "auto"
    # Only for `external`: the host's endpoints, and Connect's view where it differs (None: the same).
    endpoints: Endpoints = field(default_factory=Endpoints)
    connect_pg_dsn: str | None = None
    connect_registry_url: str | None = None
    opensearch_url: str | None = None  # OPENSEARCH_URL, for an external stack

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, *, backend: str | None = None) -> StackChoice:
        """`backend` (a command-line flag) overrides TOOLKIT_STACK."""
        env = os.environ if environ is None else environ
        backend = backend or env.get("TOOLKIT_STACK", "").strip() or "auto"
        if backend not in BACKENDS:
            raise ConfigError(
                f"TOOLKIT_STACK={backend!r} is not a stack backend; use one of {', '.join(BACKENDS)} "
                "(unset: auto)"
            )
        return cls(
            backend=backend,
            endpoints=Endpoints.from_env(env),
            connect_pg_dsn=env.get("TOOLKIT_CONNECT_PG_DSN") or None,
            connect_registry_url=env.get("TOOLKIT_CONNECT_REGISTRY_URL") or None,
            opensearch_url=env.get("OPENSEARCH_URL") or None,
        )

    def external_connect_view(self) -> ConnectView:
        return ConnectView(
            pg_dsn=self.connect_pg_dsn or self.endpoints.pg_dsn,
            schema_registry_url=self.connect_registry_url or self.endpoints.schema_registry_url,
        )


@dataclass(frozen=True, slots=True)
class StackHandle:
    """The endpoints (`handle.pg_dsn` etc. read `endpoints`), Connect's view of Postgres and the
    registry, and fault injection that works the same on every backend but `external`."""

    endpoints: Endpoints
    backend: str
    _kill: Callable[[str], None]
    _restart: Callable[[], object]
    connect_view: ConnectView
    opensearch_url: str | None = None  # None: the stack runs no OpenSearch
    _stopped: Callable[[], list[str]] = list

    def stopped(self) -> list[str]:
        """The services that are down right now, each named (a container with its name and exit code)."""
        return self._stopped()

    def __getattr__(self, name: str) -> str:
        return str(getattr(self.endpoints, name))

    def external_env(self) -> dict[str, str]:
        """What another process needs to use this stack as `TOOLKIT_STACK=external`: the endpoints,
        Connect's view of Postgres and the registry, and OpenSearch's address where it runs."""
        return {
            **self.endpoints.as_env(),
            "TOOLKIT_STACK": "external",
            "TOOLKIT_CONNECT_PG_DSN": self.connect_view.pg_dsn,
            "TOOLKIT_CONNECT_REGISTRY_URL": self.connect_view.schema_registry_url,
            **({"OPENSEARCH_URL": self.opensearch_url} if self.opensearch_url else {}),
        }

    @property
    def can_inject_faults(self) -> bool:
        return self.backend != "external"

    def crash(self, service: str) -> None:
        """kill -9 one service (postgres, kafka, connect, redis, registry)."""
        self._kill(service)

    def recover(self) -> None:
        """Start again whatever was crashed and wait until it answers."""
        self._restart()


def _unsupported(*_: str) -> None:
    raise NotImplementedError("fault injection is not available on an external stack")


@contextmanager
def open_stack(
    config: StackConfig | None = None, *, keep_started: bool = False, choice: StackChoice | None = None
) -> Iterator[StackHandle]:
    """The stack `choice` (default: from the environment) names; `keep_started`: a stack this call
    starts is left running at the end (the demo's --keep). Raises `BackendUnavailable` (nothing started)
    when the backend asked for cannot be used."""
    choice = choice or StackChoice.from_env()
    config = config or StackConfig.from_env()
    if choice.backend == "external":
        yield _external_handle(choice)
        return
    if (
        choice.backend != "containers"
        and config.env_file.exists()
        and all(s.ready for s in stack.status(config))
    ):
        log.info("reusing the running local stack (%s)", config.env_file)
        yield _local_handle(config, "local (reused)")
        return
    if choice.backend == "containers" or (choice.backend == "auto" and _containers_usable()):
        with _container_handle() as handle:
            yield handle
        return
    # A stack with some services already running (one crashed, or a worker whose environment is
    # stale) is completed, not taken over: only a stack this call started from nothing is stopped.
    was_running = bool(stack.running_services(config))
    stack.up(config)
    try:
        yield _local_handle(config, "local (completed)" if was_running else "local (started)")
    finally:
        if not keep_started and not was_running:
            stack.down(config)


def _external_handle(choice: StackChoice) -> StackHandle:
    silent = probes.unanswered(choice.endpoints)
    if silent:
        raise BackendUnavailable(
            "TOOLKIT_STACK=external, but these endpoints do not answer:\n  "
            + "\n  ".join(silent)
            + "\nstart those services (docker compose -f docker/compose.yaml up -d), or export the variables"
            " with the addresses they answer at; or unset TOOLKIT_STACK to use a local or container stack"
        )
    return StackHandle(
        choice.endpoints, "external", _unsupported, _unsupported, choice.external_connect_view(),
        choice.opensearch_url,
    )  # fmt: skip


def _containers_usable() -> bool:
    """For `auto`: containers only where testcontainers is installed, a Docker engine answers and it has
    the stack's images. An engine without them is said in one line, and the local processes are used."""
    try:
        from devstack.containers import choose_images, docker_engine_available
        from devstack.images import docker_client
        from devstack.pins import Pins
    except ImportError:
        return False
    if not docker_engine_available():
        return False
    try:
        client = docker_client()
        try:
            choose_images(client, Pins.load(), StackConfig.from_env().optional)
        finally:
            client.close()
    except StackError as exc:
        log.warning("%s; TOOLKIT_STACK=auto runs the services as local processes instead", exc)
        return False
    return True


@contextmanager
def _container_handle() -> Iterator[StackHandle]:
    try:
        from devstack.containers import docker_engine_available, start_container_stack
    except ImportError as exc:
        raise BackendUnavailable(
            f"TOOLKIT_STACK=containers, but testcontainers cannot be imported ({exc}): "
            "pip install 'kafka-toolkit[dev]' (or testcontainers), or unset TOOLKIT_STACK"
        ) from exc
    if not docker_engine_available():
        where = os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock"
        raise BackendUnavailable(
            f"TOOLKIT_STACK=containers, but no Docker engine answers at {where} (DOCKER_HOST): start Docker "
            "or point DOCKER_HOST at a running engine; or unset TOOLKIT_STACK to run the services as local "
            "processes, or set TOOLKIT_STACK=external with your own services"
        )
    try:
        containers = start_container_stack()
    except ImagesNotBuilt as exc:
        raise BackendUnavailable(f"TOOLKIT_STACK=containers, but {exc}") from exc
    view = ConnectView(
        pg_dsn=containers.pg_dsn_for_connect, schema_registry_url=containers.registry_url_for_connect
    )
    try:
        yield StackHandle(
            containers.endpoints, "testcontainers", containers.kill, containers.restart, view,
            containers.opensearch_url, containers.stopped,
        )  # fmt: skip
    finally:
        containers.stop()


def _local_handle(config: StackConfig, backend: str) -> StackHandle:
    env = stack.read_env(config.env_file)
    endpoints = Endpoints.from_env(env)
    return StackHandle(
        endpoints,
        backend,
        lambda name: stack.kill(config, name),
        lambda: stack.up(config),
        ConnectView.same_as(endpoints),
        env.get("OPENSEARCH_URL") or None,
        lambda: [
            f"{s.name} (pid {s.pid or '-'}: not answering)" for s in stack.status(config) if not s.ready
        ],
    )
