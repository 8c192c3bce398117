"""Debezium CDC: connector management and typed change events.

Public API (each name is imported on first use, so Spark's workers importing `cdc.values` load no
HTTP, Postgres or YAML client):

    >>> from cdc import ConnectClient, ConnectorSpec, DatabaseSpec, RegistryClient, RegistrySpec
    >>> from cdc import decode_record, run_preflight
    >>> spec = ConnectorSpec(name="shop", database=DatabaseSpec.from_dsn("postgresql://app@db/shop"),
    ...                      topic_prefix="shop", tables=("public.orders",),
    ...                      registry=RegistrySpec.from_url("http://apicurio:8080"))  # Avro, the default
    >>> run_preflight(spec)                      # wal_level, keys, column types: PreflightFailed names each
    >>> with ConnectClient("http://127.0.0.1:18083") as connect:
    ...     connect.apply(spec.name, spec.to_config())   # repeatable PUT, validated first
    ...     connect.wait_running(spec.name)
    >>> change = decode_record(topic=msg.topic(), partition=msg.partition(), offset=msg.offset(),
    ...                        key=msg.key(), value=msg.value(),  # a ChangeEvent or a Tombstone
    ...                        schemas=RegistryClient("http://127.0.0.1:18080"))  # Avro writer schemas

- Connectors: `ConnectorSpec` (with `DatabaseSpec`, `RegistrySpec`, `HeartbeatSpec`; `from_file` reads
  YAML; records are Avro unless `format` says `json`/`json-schemaless`) rendered to Connect's config;
  `ConnectClient` for Connect's REST API; `run_preflight` checks Postgres first; `drop_slot` releases
  a deleted connector's replication slot; `collect` reports slot and connector health.
- Change events: `decode_record` turns a record into a `ChangeEvent` (`op`, `key`, `before`, `after`,
  `source`, `position`) or a `Tombstone`, with exact Python values; Avro records need
  `schemas=RegistryClient(url)`. `fold` replays changes into the table (latest row per key);
  `UNCHANGED` marks a TOASTed column Postgres did not re-send.
- Errors, all under `CdcError` (itself a `kafkakit.ToolkitError`), each naming the fix.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cdc.errors import (
    CdcError,
    ChangeEventDecodeError,
    ConnectorConfigInvalid,
    ConnectorFailed,
    ConnectorNotFound,
    ConnectRequestError,
    ConnectUnavailable,
    PreflightFailed,
    RegistryUnavailable,
    SchemaNotFound,
    SpecError,
    ValueDecodeError,
    WaitTimeout,
)
from kafkakit.exports import lazy_exports

__all__ = [
    "UNCHANGED",
    "CdcError",
    "ChangeEvent",
    "ChangeEventDecodeError",
    "ConnectClient",
    "ConnectRequestError",
    "ConnectUnavailable",
    "ConnectorConfigInvalid",
    "ConnectorFailed",
    "ConnectorNotFound",
    "ConnectorSpec",
    "ConnectorStatus",
    "DatabaseSpec",
    "HealthReport",
    "HeartbeatSpec",
    "Op",
    "PreflightFailed",
    "RecordPosition",
    "RegistryClient",
    "RegistrySpec",
    "RegistryUnavailable",
    "SchemaNotFound",
    "SourcePosition",
    "SpecError",
    "Tombstone",
    "ValueDecodeError",
    "WaitTimeout",
    "collect",
    "decode_record",
    "drop_slot",
    "fold",
    "run_preflight",
]

if TYPE_CHECKING:
    from cdc.change_event import ChangeEvent, Op, RecordPosition, SourcePosition, Tombstone, decode_record
    from cdc.connect_client import ConnectClient, ConnectorStatus
    from cdc.connector_spec import ConnectorSpec, DatabaseSpec, HeartbeatSpec, RegistrySpec
    from cdc.fold import fold
    from cdc.health import HealthReport, collect
    from cdc.preflight import run_preflight
    from cdc.registry_client import RegistryClient
    from cdc.slots import drop_slot
    from cdc.values import UNCHANGED

__getattr__, __dir__ = lazy_exports(
    __name__,
    __all__,
    {
        "cdc.change_event": (
            "ChangeEvent",
            "Op",
            "RecordPosition",
            "SourcePosition",
            "Tombstone",
            "decode_record",
        ),
        "cdc.connect_client": ("ConnectClient", "ConnectorStatus"),
        "cdc.connector_spec": ("ConnectorSpec", "DatabaseSpec", "HeartbeatSpec", "RegistrySpec"),
        "cdc.fold": ("fold",),
        "cdc.health": ("HealthReport", "collect"),
        "cdc.preflight": ("run_preflight",),
        "cdc.registry_client": ("RegistryClient",),
        "cdc.slots": ("drop_slot",),
        "cdc.values": ("UNCHANGED",),
    },
)
