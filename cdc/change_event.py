"""Typed Debezium change events decoded from Kafka records (pure: bytes in, values out, no I/O).

Two record formats, one decoder: JsonConverter with schemas.enable=true (`{"schema": ..., "payload":
...}`), and Avro in Confluent framing (magic byte 0 + schema id), told apart by their first byte. An Avro
record's writer schema comes from `schemas` (a `SchemaLookup`, e.g. `cdc.registry_client.RegistryClient`)
and `cdc.avro_records` turns it into the same schema/payload shape, so values are read by the schema's
semantic names in `cdc.values` whichever format carried them.

Guarantees:
- A record with a null value is a `Tombstone` (Debezium writes one after each delete so compaction can
  drop the key); everything else is a `ChangeEvent` or a `ChangeEventDecodeError` naming
  topic/partition/offset. Nothing is skipped silently.
- Row images (`key`, `before`, `after`) are read-only mappings in the table's column order; a later
  schema (after ADD/DROP COLUMN) simply yields a different set of columns — no registry, no restart.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from types import MappingProxyType
from typing import Any

from cdc.avro_records import SchemaLookup, avro_document, is_avro_framed
from cdc.errors import ChangeEventDecodeError, SchemaNotFound, ValueDecodeError
from cdc.values import DEFAULT_UNAVAILABLE_PLACEHOLDER, decode_struct

Row = Mapping[str, Any]
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class Op(enum.Enum):
    READ = "r"
    CREATE = "c"
    UPDATE = "u"
    DELETE = "d"
    TRUNCATE = "t"


@dataclass(frozen=True, slots=True, kw_only=True)
class RecordPosition:
    """Where the record sits in Kafka."""

    topic: str
    partition: int
    offset: int


@dataclass(frozen=True, slots=True, kw_only=True)
class SourcePosition:
    """Where the change happened in Postgres (Debezium's `source` block)."""

    connector_name: str
    db: str
    schema: str
    table: str
    lsn: int | None
    tx_id: int | None
    commit_time: datetime | None
    # Debezium's marker: "true"/"first"/"last"/... while snapshotting, "false" (or absent) when streaming.
    snapshot: str

    @property
    def is_snapshot(self) -> bool:
        return self.snapshot not in ("false", "")

    @property
    def is_last_snapshot_record(self) -> bool:
        return self.snapshot == "last"


@dataclass(frozen=True, slots=True, kw_only=True)
class ChangeEvent:
    """One row change. `before` is None for reads/creates; `after` is None for deletes and truncates."""

    event_type = "cdc.change_event"
    schema_version = 1

    op: Op
    key: Row | None
    before: Row | None
    after: Row | None
    source: SourcePosition
    event_time: datetime | None
    position: RecordPosition

    @property
    def key_tuple(self) -> tuple[Any, ...]:
        """The primary key values in key-column order (hashable, for folding)."""
        return tuple(self.key.values()) if self.key is not None else ()


@dataclass(frozen=True, slots=True, kw_only=True)
class Tombstone:
    """A null-value record: the key is gone (compaction will drop it)."""

    event_type = "cdc.tombstone"
    schema_version = 1

    key: Row | None
    position: RecordPosition

    @property
    def key_tuple(self) -> tuple[Any, ...]:
        return tuple(self.key.values()) if self.key is not None else ()


def decode_record(
    *,
    topic: str,
    partition: int,
    offset: int,
    key: bytes | None,
    value: bytes | None,
    placeholder: str = DEFAULT_UNAVAILABLE_PLACEHOLDER,
    schemas: SchemaLookup | None = None,
) -> ChangeEvent | Tombstone:
    """Decode one Kafka record of a Debezium table topic; raise `ChangeEventDecodeError` if it is not one.

    `schemas` resolves Avro records' schema ids; its `RegistryUnavailable` propagates (no record can be
    read while the registry is away), while an id it does not know is this record's decode error.
    """
    where = RecordPosition(topic=topic, partition=partition, offset=offset)
    table: str | None = None
    try:
        key_row = None if key is None else _decode_key(_load(key, "key", schemas), placeholder)
        if value is None:
            return Tombstone(key=key_row, position=where)
        doc = _load(value, "value", schemas)
        table = _table_of(doc)
        return _decode_envelope(doc, key_row, where, placeholder)
    except SchemaNotFound as exc:
        raise ChangeEventDecodeError(
            f"its schema id {exc.schema_id} is unknown",
            topic=topic,
            partition=partition,
            offset=offset,
            fix=str(exc),
        ) from exc
    except ValueDecodeError as exc:
        raise ChangeEventDecodeError(
            exc.reason if exc.column else str(exc),
            topic=topic,
            partition=partition,
            offset=offset,
            table=table,
            column=exc.column,
            source_type=exc.source_type,
            fix=exc.fix,
        ) from exc
    except (ValueError, TypeError, KeyError, AttributeError, RecursionError, OverflowError) as exc:
        raise ChangeEventDecodeError(str(exc), topic=topic, partition=partition, offset=offset) from exc


def _table_of(doc: Mapping[str, Any]) -> str | None:
    """`schema.table` from the envelope's source block, to name a refused value's table."""
    payload = doc.get("payload")
    source = payload.get("source") if isinstance(payload, dict) else None
    if isinstance(source, dict) and source.get("table"):
        return f"{source.get('schema', '')}.{source['table']}"
    return None


def _load(raw: bytes, what: str, schemas: SchemaLookup | None) -> Mapping[str, Any]:
    if is_avro_framed(raw):
        if schemas is None:
            raise ValueDecodeError(
                f"{what} is Avro (Confluent framing) and no schema registry was given",
                fix="give the registry: --registry-url or SCHEMA_REGISTRY_URL for `cdc tail`, "
                "schemas=RegistryClient(url) for decode_record",
            )
        return avro_document(raw, schemas, what)
    try:
        doc = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ValueDecodeError(f"{what} is not JSON ({exc})") from exc
    if not isinstance(doc, dict) or set(doc) != {"schema", "payload"}:
        raise ValueDecodeError(f"{what} is not a JsonConverter envelope with 'schema' and 'payload'")
    return doc


def _decode_key(doc: Mapping[str, Any], placeholder: str) -> Row | None:
    schema = doc["schema"]
    if schema is None or schema.get("type") != "struct":
        raise ValueDecodeError("key schema is not a struct of primary-key columns")
    return _frozen(decode_struct(schema, doc["payload"], placeholder))


def _decode_envelope(
    doc: Mapping[str, Any], key_row: Row | None, where: RecordPosition, placeholder: str
) -> ChangeEvent:
    schema, payload = doc["schema"], doc["payload"]
    if not isinstance(schema, dict) or not str(schema.get("name", "")).endswith(".Envelope"):
        raise ValueDecodeError(
            f"value schema {schema.get('name') if isinstance(schema, dict) else schema!r} "
            "is not a Debezium Envelope"
        )
    if not isinstance(payload, dict):
        raise ValueDecodeError("value payload is not an object")
    fields = {f["field"]: f for f in schema.get("fields", ())}
    op_code = payload.get("op")
    try:
        op = Op(op_code)
    except ValueError as exc:
        raise ValueDecodeError(f"unknown op {op_code!r}; expected one of r, c, u, d, t") from exc

    def image(name: str) -> Row | None:
        if name not in fields:
            return None
        return _frozen(decode_struct(fields[name], payload.get(name), placeholder))

    return ChangeEvent(
        op=op,
        key=key_row,
        before=image("before"),
        after=image("after"),
        source=_source(payload.get("source")),
        event_time=_micros_or_millis(payload),
        position=where,
    )


def _source(raw: Any) -> SourcePosition:
    if not isinstance(raw, dict):
        raise ValueDecodeError("envelope has no 'source' block")
    return SourcePosition(
        connector_name=str(raw.get("name", "")),
        db=str(raw.get("db", "")),
        schema=str(raw.get("schema", "")),
        table=str(raw.get("table", "")),
        lsn=raw.get("lsn"),
        tx_id=raw.get("txId"),
        commit_time=_micros_or_millis(raw),
        snapshot=str(raw.get("snapshot") or "false"),
    )


def _micros_or_millis(block: Mapping[str, Any]) -> datetime | None:
    """Prefer ts_us (Debezium 2.6+), fall back to ts_ms."""
    for field, unit in (("ts_us", "microseconds"), ("ts_ms", "milliseconds")):
        value = block.get(field)
        if isinstance(value, int):
            try:
                return _EPOCH + timedelta(**{unit: value})
            except OverflowError as exc:
                raise ValueDecodeError(
                    f"envelope {field} {value} is out of the range of a timestamp (years 1-9999)"
                ) from exc
    return None


def _frozen(row: Any) -> Row | None:
    return None if row is None else MappingProxyType(row)
