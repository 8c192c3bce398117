"""Debezium connectors for tests: specs Connect can act on, on every backend, and removed afterwards.

Two views of one Postgres: the test (and `cdc`'s pre-flight, and slot clean-up) reach it at the
host's address (`endpoints.pg_dsn`); the Connect worker reaches it at its own (`connect_view`: in
containers, the network alias postgres:5432). A spec goes to Connect, so `spec()` fills `database`
(and an Avro spec's `registry`) from Connect's view; pre-flight runs from here, so `start()` hands it
the same spec with the host's address. On a local stack both views are the same address.

Guarantees: names are unique per call (`cdct-<10 hex>`), so tests sharing a stack never share a
connector, slot or publication; `start()` returns once the connector runs and its snapshot completed
(a change made before that could be missed); `cleanup()` deletes every connector started here and
drops its slot and publication, so no slot is left pinning WAL.
"""

from __future__ import annotations

import uuid
from contextlib import suppress
from dataclasses import dataclass, field, replace
from typing import Any

import httpx
import psycopg

from cdc.avro_records import SchemaLookup
from cdc.connect_client import ConnectClient
from cdc.connector_spec import (
    AVRO_CONVERTER,
    FORMATS,
    ConnectorSpec,
    DatabaseSpec,
    HeartbeatSpec,
    RegistrySpec,
)
from cdc.errors import ConnectorNotFound
from cdc.registry_client import RegistryClient
from cdc.slots import drop_slot
from devstack.errors import PrerequisiteMissing
from devstack.session import StackHandle


def require_record_format(connect_url: str, record_format: str) -> str:
    """`record_format` if the Connect worker at `connect_url` can write it; Avro needs Apicurio's converter."""
    if record_format not in FORMATS:
        raise ValueError(f"record format {record_format!r} is not one of {', '.join(FORMATS)}")
    if record_format == "avro":
        url = f"{connect_url}/connector-plugins?connectorsOnly=false"
        listed = {p.get("class") for p in httpx.get(url, timeout=10).json()}
        if AVRO_CONVERTER not in listed:
            raise PrerequisiteMissing(
                f"Connect at {connect_url} does not list {AVRO_CONVERTER}, which Avro connectors need: run "
                "`devstack fetch` (it puts the converter under ~/.cache/kafka-toolkit/apicurio-converter-*), put "
                "it on the worker's plugin.path and restart the worker so it scans the path again"
            )
    return record_format


@dataclass
class ConnectorFactory:
    """Creates uniquely named connectors in `record_format`; `cleanup` deletes them and drops their
    slots and publications. `schemas` reads their Avro records' writer schemas (None for JSON).

    `pg_dsn` and `registry_url` are the host's addresses (the caller's); `connect_pg_dsn` and
    `connect_registry_url` Connect's, where they differ (None: the same). `for_stack` fills all four.
    """

    connect: ConnectClient
    pg_dsn: str
    record_format: str = "json"
    registry_url: str | None = None
    connect_pg_dsn: str | None = None
    connect_registry_url: str | None = None
    created: list[ConnectorSpec] = field(default_factory=list)
    _registry: RegistryClient | None = None

    @classmethod
    def for_stack(
        cls, stack: StackHandle, connect: ConnectClient, record_format: str = "json"
    ) -> ConnectorFactory:
        """A factory for `stack`'s Connect (`connect`), with Connect's view of Postgres and the registry."""
        return cls(
            connect,
            stack.endpoints.pg_dsn,
            record_format,
            stack.endpoints.schema_registry_url,
            connect_pg_dsn=stack.connect_view.pg_dsn,
            connect_registry_url=stack.connect_view.schema_registry_url,
        )

    @property
    def schemas(self) -> SchemaLookup | None:
        if self.record_format != "avro" or self.registry_url is None:
            return None
        if self._registry is None:
            self._registry = RegistryClient(self.registry_url)
        return self._registry

    def spec(self, tables: list[str], **overrides: Any) -> ConnectorSpec:
        """A spec capturing `tables`, named `cdct-<random>`; `overrides` are ConnectorSpec fields."""
        name = overrides.pop("name", f"cdct-{uuid.uuid4().hex[:10]}")
        registry_url = self.connect_registry_url or self.registry_url
        if overrides.get("format", self.record_format) == "avro" and registry_url is not None:
            overrides.setdefault("registry", RegistrySpec.from_url(registry_url))
        return ConnectorSpec(
            name=name,
            database=overrides.pop("database", DatabaseSpec.from_dsn(self.connect_pg_dsn or self.pg_dsn)),
            topic_prefix=overrides.pop("topic_prefix", name.replace("-", "_")),
            tables=tuple(tables),
            heartbeat=overrides.pop("heartbeat", HeartbeatSpec(interval_ms=1000)),
            format=overrides.pop("format", self.record_format),
            **overrides,
        )

    def start(self, spec: ConnectorSpec, *, wait: bool = True, preflight: bool = True) -> ConnectorSpec:
        """Pre-flight `spec` (from here), register it, and (`wait`) wait for RUNNING and the snapshot."""
        from cdc.preflight import run_preflight

        if preflight:
            run_preflight(self.as_host_sees_it(spec))
        else:  # what pre-flight would have prepared, without its checks
            with psycopg.connect(self.pg_dsn, autocommit=True) as conn:
                conn.execute(spec.heartbeat_table_ddl())
        self.created.append(spec)
        self.connect.apply(spec.name, spec.to_config())
        if wait:
            # RUNNING comes before the slot and publication exist; changes made in that window can be
            # missed by an empty-table snapshot. Wait for the snapshot, as a real deployment would.
            self.connect.wait_running(spec.name, timeout=90)
            self.connect.wait_snapshot_complete(spec.name, timeout=90)
        return spec

    @property
    def preflight_at(self) -> str | None:
        """HOST:PORT where the tests reach Postgres when Connect reaches it elsewhere (pre-flight's `at`,
        `cdc apply --preflight-at`); None where both use one address."""
        if self.connect_pg_dsn is None or self.connect_pg_dsn == self.pg_dsn:
            return None
        host = DatabaseSpec.from_dsn(self.pg_dsn)
        return f"{host.hostname}:{host.port}"

    def as_host_sees_it(self, spec: ConnectorSpec) -> ConnectorSpec:
        """`spec` with its database at the host's address when it is at Connect's (for pre-flight)."""
        if self.connect_pg_dsn is None:
            return spec
        at_connect, at_host = DatabaseSpec.from_dsn(self.connect_pg_dsn), DatabaseSpec.from_dsn(self.pg_dsn)
        db = spec.database
        if (db.hostname, db.port) != (at_connect.hostname, at_connect.port):
            return spec  # a database the caller chose: used as given
        return replace(spec, database=replace(db, hostname=at_host.hostname, port=at_host.port))

    def cleanup(self) -> None:
        if self._registry is not None:
            self._registry.close()
            self._registry = None
        for spec in self.created:
            with suppress(ConnectorNotFound):
                self.connect.delete(spec.name)
            drop_slot(self.pg_dsn, spec.resolved_slot_name, spec.resolved_publication_name)
        self.created.clear()
