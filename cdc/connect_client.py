"""A small client for Kafka Connect's REST API, shaped around managing Debezium connectors.

Guarantees:
- `apply` is repeatable (PUT /connectors/{name}/config creates or updates) and validates first: when
  Connect or our option-name check finds an error, nothing is registered and `ConnectorConfigInvalid`
  lists each field with its message.
- Waits poll with a deadline (no fixed sleeps) and fail fast with the task's trace on FAILED.
- `wait_snapshot_complete` reads Connect's stored source offsets (GET /connectors/{name}/offsets,
  Connect 3.5+): Debezium's Postgres offset carries `snapshot: true` until the snapshot has finished,
  and `last_snapshot_record: true` on the final snapshot record. Offsets are flushed every
  `offset.flush.interval.ms` of the worker, so this can lag the topic by that interval.
Passwords are never logged; `status` and errors only carry what Connect reports. Basic or bearer auth,
a CA file and a client certificate come from `auth` (kafkakit.http_auth; credentials in the URL work
too); a refused login (HTTP 401/403) or TLS handshake is `ServiceAccessRefused` naming the settings.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar
from urllib.parse import quote

import httpx

from cdc.errors import (
    ConnectorConfigInvalid,
    ConnectorFailed,
    ConnectorNotFound,
    ConnectRequestError,
    ConnectUnavailable,
    WaitTimeout,
)
from kafkakit.http_auth import NO_CONNECT_AUTH, HttpAuth, access_problem, httpx_options

T = TypeVar("T")
_SERVICE = "Kafka Connect"

# Option families whose member names are open-ended, so Connect's validate cannot list them.
_OPEN_PREFIXES = (
    "database.",
    "driver.",
    "transforms.",
    "predicates.",
    "topic.creation.",
    "producer.override.",
    "consumer.override.",
    "key.converter.",
    "value.converter.",
    "header.converter.",
    "snapshot.select.statement.overrides.",
    "signal.",
    "notification.",
    "converters.",
    "errors.",
)
# Options the connector reads although its validate answer does not list them (Debezium 3.6.1's Postgres
# connector omits this CommonConnectorConfig field, and honours it: `format: avro` sets it).
_READ_BUT_UNLISTED = frozenset({"field.name.adjustment.mode"})


@dataclass(frozen=True, slots=True, kw_only=True)
class ValidationResult:
    connector_class: str
    field_errors: tuple[tuple[str, str], ...]
    known_options: frozenset[str]

    @property
    def ok(self) -> bool:
        return not self.field_errors


@dataclass(frozen=True, slots=True, kw_only=True)
class TaskStatus:
    id: int
    state: str
    worker_id: str
    trace: str | None


@dataclass(frozen=True, slots=True, kw_only=True)
class ConnectorStatus:
    name: str
    state: str
    worker_id: str
    trace: str | None
    tasks: tuple[TaskStatus, ...]

    @property
    def failed(self) -> bool:
        return self.state == "FAILED" or any(t.state == "FAILED" for t in self.tasks)

    @property
    def running(self) -> bool:
        return self.state == "RUNNING" and bool(self.tasks) and all(t.state == "RUNNING" for t in self.tasks)

    @property
    def failure_trace(self) -> str | None:
        if self.state == "FAILED":
            return self.trace
        return next((t.trace for t in self.tasks if t.state == "FAILED"), None)


@dataclass(frozen=True, slots=True, kw_only=True)
class ApplyResult:
    name: str
    created: bool


def parse_validation(body: Mapping[str, Any], config: Mapping[str, str]) -> ValidationResult:
    """Turn Connect's validate answer into per-field errors, adding options Connect does not know (pure)."""
    errors: list[tuple[str, str]] = []
    known: set[str] = set()
    for item in body.get("configs", ()):
        value = item.get("value") or {}
        name = value.get("name") or (item.get("definition") or {}).get("name", "?")
        known.add(name)
        errors.extend((name, msg) for msg in value.get("errors") or ())
    unknown = sorted(
        key
        for key in config
        if key not in known
        and key not in _READ_BUT_UNLISTED
        and not key.startswith(_OPEN_PREFIXES)
        and key != "name"
    )
    errors.extend(
        (key, "unknown option: neither Connect nor the connector defines it; check the spelling")
        for key in unknown
    )
    return ValidationResult(
        connector_class=str(body.get("name", "")), field_errors=tuple(errors), known_options=frozenset(known)
    )


def parse_status(body: Mapping[str, Any]) -> ConnectorStatus:
    conn = body.get("connector") or {}
    return ConnectorStatus(
        name=str(body.get("name", "")),
        state=str(conn.get("state", "UNKNOWN")),
        worker_id=str(conn.get("worker_id", "")),
        trace=conn.get("trace"),
        tasks=tuple(
            TaskStatus(
                id=int(t.get("id", -1)),
                state=str(t.get("state", "UNKNOWN")),
                worker_id=str(t.get("worker_id", "")),
                trace=t.get("trace"),
            )
            for t in body.get("tasks", ())
        ),
    )


def snapshot_finished(offsets_body: Mapping[str, Any]) -> bool:
    """Whether Connect's stored Debezium offsets say the initial snapshot is over (pure)."""
    entries = offsets_body.get("offsets") or []
    if not entries:
        return False
    for entry in entries:
        offset = entry.get("offset") or {}
        if offset.get("snapshot") and not offset.get("last_snapshot_record"):
            return False
    return True


class ConnectClient:
    """Sync client; use as a context manager or call `close()`."""

    def __init__(
        self,
        base_url: str,
        *,
        auth: HttpAuth = NO_CONNECT_AUTH,
        timeout: float = 15.0,
        transport: httpx.BaseTransport | None = None,
    ):
        self._base_url = base_url.rstrip("/")
        self._auth = auth
        self._http = httpx.Client(
            base_url=self._base_url, timeout=timeout, transport=transport, **httpx_options(auth)
        )

    def __enter__(self) -> ConnectClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    # ---- plumbing ------------------------------------------------------------------------------
    def _request(self, method: str, path: str, *, connector: str | None = None, **kw: Any) -> httpx.Response:
        try:
            response = self._http.request(method, path, **kw)
        except httpx.TransportError as exc:
            if refused := access_problem(_SERVICE, self._base_url, self._auth, error=exc):
                raise refused from None
            raise ConnectUnavailable(
                f"Kafka Connect at {self._base_url} is unreachable ({exc.__class__.__name__}: {exc}); "
                "check --connect-url / KAFKA_CONNECT_URL and that the worker is up"
            ) from exc
        if refused := access_problem(_SERVICE, self._base_url, self._auth, status=response.status_code):
            raise refused
        if response.status_code == 404 and connector is not None:
            raise ConnectorNotFound(
                f"connector {connector!r} is not registered on {self._base_url}; "
                "list them with `cdc status` or create it with `cdc apply FILE`",
                status_code=404,
            )
        if response.status_code >= 400:
            raise ConnectRequestError(
                f"Kafka Connect refused {method} {path}: HTTP {response.status_code} {_message(response)}",
                status_code=response.status_code,
            )
        return response

    @staticmethod
    def _path(name: str) -> str:
        return f"/connectors/{quote(name, safe='')}"

    # ---- operations ----------------------------------------------------------------------------
    def list_connectors(self) -> tuple[str, ...]:
        return tuple(sorted(self._request("GET", "/connectors").json()))

    def validate(self, config: Mapping[str, str]) -> ValidationResult:
        cls = config.get("connector.class", "")
        body = self._request(
            "PUT", f"/connector-plugins/{quote(cls, safe='')}/config/validate", json=dict(config)
        ).json()
        return parse_validation(body, config)

    def apply(self, name: str, config: Mapping[str, str]) -> ApplyResult:
        """Validate, then create or update. Raises ConnectorConfigInvalid (and registers nothing)."""
        result = self.validate({**config, "name": name})
        if not result.ok:
            raise ConnectorConfigInvalid(name, result.field_errors)
        response = self._request("PUT", f"{self._path(name)}/config", json=dict(config))
        return ApplyResult(name=name, created=response.status_code == 201)

    def config(self, name: str) -> dict[str, str]:
        return dict(self._request("GET", f"{self._path(name)}/config", connector=name).json())

    def status(self, name: str) -> ConnectorStatus:
        return parse_status(self._request("GET", f"{self._path(name)}/status", connector=name).json())

    def topics(self, name: str) -> tuple[str, ...]:
        body = self._request("GET", f"{self._path(name)}/topics", connector=name).json()
        return tuple(sorted((body.get(name) or {}).get("topics", ())))

    def offsets(self, name: str) -> dict[str, Any]:
        return dict(self._request("GET", f"{self._path(name)}/offsets", connector=name).json())

    def pause(self, name: str) -> None:
        self._request("PUT", f"{self._path(name)}/pause", connector=name)

    def resume(self, name: str) -> None:
        self._request("PUT", f"{self._path(name)}/resume", connector=name)

    def restart(self, name: str, *, only_failed: bool = False) -> None:
        """Restart the connector and its tasks (all, or only the FAILED ones)."""
        params = {"includeTasks": "true", "onlyFailed": "true" if only_failed else "false"}
        self._request("POST", f"{self._path(name)}/restart", connector=name, params=params)

    def restart_task(self, name: str, task_id: int) -> None:
        self._request("POST", f"{self._path(name)}/tasks/{task_id}/restart", connector=name)

    def delete(self, name: str) -> None:
        self._request("DELETE", self._path(name), connector=name)

    # ---- waits ---------------------------------------------------------------------------------
    def wait_running(self, name: str, timeout: float = 60.0) -> ConnectorStatus:
        """Poll until the connector and all its tasks are RUNNING; raise ConnectorFailed at once on FAILED."""

        def check() -> ConnectorStatus | None:
            try:
                status = self.status(name)
            except ConnectorNotFound:
                return None  # just created: the herder may not have written the status yet
            if status.failed:
                raise ConnectorFailed(name, status.failure_trace)
            return status if status.running else None

        return _poll(check, timeout, f"connector {name!r} to be RUNNING with all tasks RUNNING")

    def wait_snapshot_complete(self, name: str, timeout: float = 120.0) -> None:
        """Poll the stored offsets until Debezium's snapshot flag is gone (or marks the last record)."""

        def check() -> bool | None:
            status = self.status(name)
            if status.failed:
                raise ConnectorFailed(name, status.failure_trace)
            return True if snapshot_finished(self.offsets(name)) else None

        _poll(check, timeout, f"the initial snapshot of connector {name!r} to complete")


def _poll(check: Callable[[], T | None], timeout: float, what: str, interval: float = 0.25) -> T:
    deadline = time.monotonic() + timeout
    while True:
        found = check()
        if found is not None:
            return found
        if time.monotonic() >= deadline:
            raise WaitTimeout(
                f"gave up after {timeout:.0f}s waiting for {what}; check `cdc status` and the worker log"
            )
        time.sleep(min(interval, max(0.0, deadline - time.monotonic())))
        interval = min(interval * 1.5, 2.0)


def _message(response: httpx.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        return response.text[:500]
    return str(body.get("message", body)) if isinstance(body, dict) else str(body)
