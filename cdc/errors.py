"""Errors raised by the cdc package; all derive from `kafkakit.errors.ToolkitError`.

Every message says what went wrong and what to do next.
"""

from __future__ import annotations

from collections.abc import Sequence

from kafkakit.errors import ToolkitError


class CdcError(ToolkitError):
    """Root of the cdc package's errors."""


class SpecError(CdcError):
    """A connector spec file or value is malformed (unknown key, wrong type, bad name)."""


class ConnectUnavailable(CdcError):
    """Kafka Connect's REST API cannot be reached."""


class ConnectRequestError(CdcError):
    """Kafka Connect answered a request with an error status."""

    def __init__(self, message: str, *, status_code: int) -> None:
        super().__init__(message)
        self.status_code = status_code


class ConnectorNotFound(ConnectRequestError):
    """The named connector is not registered on the Connect cluster."""


class ConnectorConfigInvalid(CdcError):
    """Connect (or our own checks) refused the connector config; nothing was registered.

    `field_errors` holds (field, message) pairs so callers can show each one next to its field.
    """

    def __init__(self, connector: str, field_errors: Sequence[tuple[str, str]]) -> None:
        self.connector = connector
        self.field_errors = tuple(field_errors)
        lines = "; ".join(f"{field}: {msg}" for field, msg in self.field_errors)
        super().__init__(
            f"connector {connector!r} config is invalid and was not registered: {lines}. "
            "Fix these fields in the spec and apply again."
        )


class ConnectorFailed(CdcError):
    """The connector or one of its tasks is in state FAILED."""

    def __init__(self, connector: str, trace: str | None) -> None:
        self.connector = connector
        self.trace = trace
        first = (trace or "no trace reported").strip().splitlines()[0]
        super().__init__(
            f"connector {connector!r} FAILED: {first}. Run `cdc status {connector}` for the full trace, "
            f"fix the cause, then `cdc restart {connector}`."
        )


class WaitTimeout(CdcError):
    """A bounded wait (running, snapshot complete) ran out of time."""


class PreflightFailed(CdcError):
    """Postgres is not ready for this connector (wal_level, missing tables or keys, credentials)."""

    def __init__(self, problems: Sequence[tuple[str, str]]) -> None:
        self.problems = tuple(problems)
        lines = "; ".join(f"{field}: {msg}" for field, msg in self.problems)
        super().__init__(f"pre-flight checks against Postgres failed: {lines}")


class SecretUnresolved(PreflightFailed):
    """A spec's config-provider placeholder (${env:NAME}, ${file:PATH:KEY}) has no value here: refused
    before anything is sent to Connect. `problems` names each field; no message holds a secret."""


class ReplicaIdentityNotFull(CdcError):
    """A table's UPDATE/DELETE changes carry no full old row (REPLICA IDENTITY is not FULL), which a
    consumer taking old rows back needs; the message says how to set it."""


class RegistryUnavailable(CdcError):
    """The schema registry cannot be reached or answered with an error: not the record's fault."""


class SchemaNotFound(CdcError):
    """The registry holds no schema under the id a record names."""

    def __init__(self, schema_id: int, registry_url: str) -> None:
        self.schema_id = schema_id
        self.registry_url = registry_url
        super().__init__(
            f"schema id {schema_id} is not in the registry at {registry_url}: read with the registry the "
            "connector registers its schemas in (--registry-url or SCHEMA_REGISTRY_URL), or the record "
            "was not written by a registry-aware converter"
        )


class ChangeEventDecodeError(CdcError):
    """A Kafka record is not a change event we can decode exactly; it names where it sits and why.

    For a refused value, `table`, `column` and `source_type` name it and `fix` says what to change;
    otherwise the record itself is not a Debezium change event in a format we read (JSON with schemas,
    or Avro with a registered schema); `fix` then says what to check, when known.
    """

    def __init__(
        self,
        reason: str,
        *,
        topic: str,
        partition: int,
        offset: int,
        table: str | None = None,
        column: str | None = None,
        source_type: str | None = None,
        fix: str | None = None,
    ) -> None:
        self.reason = reason
        self.topic = topic
        self.partition = partition
        self.offset = offset
        self.table = table
        self.column = column
        self.source_type = source_type
        self.fix = fix
        where = f"cannot decode record {topic}[{partition}]@{offset}"
        if column is not None:
            what = f"{table or '?'}.{column}" + (f" ({source_type})" if source_type else "")
            super().__init__(f"{where}: column {what}: {reason}. Fix: {fix or _VALUE_FIX}")
        elif fix is not None:
            super().__init__(f"{where}: {reason}. Fix: {fix}")
        else:
            super().__init__(
                f"{where}: {reason}. The record is not a Debezium change event in JSON-with-schemas or "
                "registry Avro form; check the connector's format (json or avro; json-schemaless records "
                "carry no types to decode by) or that this topic is a CDC topic."
            )


_VALUE_FIX = (
    "check that the connector runs with the settings `cdc` renders (decimal.handling.mode=string, "
    "time.precision.mode=adaptive_time_microseconds, column.propagate.source.type=.*), or exclude the "
    "column with column.exclude.list"
)


class ValueDecodeError(CdcError):
    """One field value cannot be decoded exactly (raised inside decoding, then wrapped).

    `column` is the path of the field within the row, `source_type` the Postgres type Debezium
    reported, and `fix` what the user can change so the value arrives exactly.
    """

    def __init__(
        self,
        reason: str,
        *,
        column: str | None = None,
        source_type: str | None = None,
        fix: str | None = None,
    ) -> None:
        self.reason = reason
        self.column = column
        self.source_type = source_type
        self.fix = fix
        prefix = f"field {column!r}" + (f" ({source_type})" if source_type else "") + ": " if column else ""
        super().__init__(prefix + reason + (f". Fix: {fix}" if fix else ""))

    def at(self, column: str, source_type: str | None) -> ValueDecodeError:
        """The same error one struct level up: the column path grows from the inside out."""
        path = f"{column}.{self.column}" if self.column else column
        return ValueDecodeError(
            self.reason, column=path, source_type=self.source_type or source_type, fix=self.fix
        )
