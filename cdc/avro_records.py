"""Avro change records (Confluent framing) turned into the JSON path's document shape (pure, no I/O).

Apicurio's Connect AvroConverter writes each key and value as magic byte 0, a 4-byte big-endian schema
id (the registry's content id) and the Avro binary body. Its writer schema keeps Connect's metadata:
`connect.name` (Debezium's semantic type, e.g. io.debezium.time.MicroTimestamp), `connect.parameters`
(the propagated source column type, scale, an enum's allowed values) and `connect.type` (int8/int16).

`avro_document` reads such a record into `{"schema": <Connect schema>, "payload": <value>}`, the shape
JsonConverter gives, so `cdc.change_event` and `cdc.values` decode both formats with one core:
- the Connect schema is rebuilt from the writer schema (record -> struct, ["null", T] -> optional T,
  named-type references resolved, Connect's name/parameters/type restored);
- the body is read by fastavro with Avro logical types switched off, so every value stays as Connect
  wrote it (Decimal's unscaled bytes, Date's days, Timestamp's millis) and `cdc.values` converts it by
  its Connect name exactly as for JSON. Bytes stay bytes (JSON carries them as base64 text).

Refused with `ValueDecodeError` (and a fix): bytes without the framing, a body that does not decode
with its writer schema (or leaves bytes over), unions other than [null, T]. The schema lookup is the
caller's (`SchemaLookup`): `cdc.registry_client` fetches and caches them; tests pass a dict's get.
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from fastavro import parse_schema, schemaless_reader

from cdc.errors import ValueDecodeError

MAGIC_BYTE = 0
HEADER_BYTES = 5
# Avro type -> Connect type as JsonConverter spells it in its inline schemas ("float"/"double" too).
_PRIMITIVES = {
    "int": "int32",
    "long": "int64",
    "float": "float",
    "double": "double",
    "boolean": "boolean",
    "string": "string",
    "bytes": "bytes",
}
_BYTES_FIX = (
    "check that the topic's records were written by the connector's AvroConverter with "
    "apicurio.registry.headers.enabled=false (magic byte 0 + 4-byte id before the Avro body), and that the "
    "registry is the one the connector registers its schemas in"
)


@dataclass(frozen=True, slots=True)
class WriterSchema:
    """One registered writer schema, ready to read bodies with (`parsed`) and to type them (`connect`)."""

    schema_id: int
    parsed: Any  # fastavro's parsed schema, logical types removed
    connect: Mapping[str, Any]  # the equivalent Connect schema, in JsonConverter's JSON shape


SchemaLookup = Callable[[int], WriterSchema]


def is_avro_framed(raw: bytes) -> bool:
    """Confluent framing starts with byte 0; JsonConverter's output starts with '{'."""
    return len(raw) > 0 and raw[0] == MAGIC_BYTE


def schema_id_of(raw: bytes) -> int:
    if len(raw) < HEADER_BYTES or raw[0] != MAGIC_BYTE:
        raise ValueDecodeError(
            f"record is not Avro in Confluent framing ({len(raw)} bytes, first byte {raw[:1].hex() or 'none'})",
            fix=_BYTES_FIX,
        )
    return int.from_bytes(raw[1:HEADER_BYTES], "big")


def writer_schema(schema_id: int, schema_text: str) -> WriterSchema:
    """Build a `WriterSchema` from the registry's schema text; a schema we cannot type is refused."""
    try:
        doc = json.loads(schema_text)
        parsed = parse_schema(_without_logical_types(doc))
    except (ValueError, TypeError, KeyError) as exc:
        raise ValueDecodeError(f"writer schema {schema_id} is not a valid Avro schema: {exc}") from exc
    return WriterSchema(schema_id=schema_id, parsed=parsed, connect=connect_schema(doc))


def avro_document(raw: bytes, lookup: SchemaLookup, what: str) -> Mapping[str, Any]:
    """`{"schema", "payload"}` for one framed key or value; `lookup` raises for an unknown id."""
    schema = lookup(schema_id_of(raw))
    body = io.BytesIO(raw[HEADER_BYTES:])
    try:
        payload = schemaless_reader(body, schema.parsed, None)
    except (EOFError, ValueError, TypeError, KeyError, IndexError, UnicodeDecodeError) as exc:
        raise ValueDecodeError(
            f"{what} bytes do not decode with writer schema {schema.schema_id}: {type(exc).__name__} {exc}",
            fix=_BYTES_FIX,
        ) from exc
    left = len(raw) - HEADER_BYTES - body.tell()
    if left:
        raise ValueDecodeError(
            f"{what} has {left} byte(s) after the Avro body of writer schema {schema.schema_id}: it was "
            "written with another schema",
            fix=_BYTES_FIX,
        )
    return {"schema": schema.connect, "payload": payload}


def connect_schema(avro: Any) -> dict[str, Any]:
    """The Connect schema (JsonConverter's JSON shape) that Apicurio's AvroData turned into `avro`."""
    return _connect(avro, "", {})


def _connect(avro: Any, namespace: str, named: dict[str, dict[str, Any]]) -> dict[str, Any]:
    if isinstance(avro, str):
        if avro in _PRIMITIVES:
            return {"type": _PRIMITIVES[avro], "optional": False}
        full = avro if "." in avro or not namespace else f"{namespace}.{avro}"
        found = named.get(full) or named.get(avro)
        if found is None:
            raise ValueDecodeError(f"writer schema refers to {avro!r}, which it does not define")
        return found
    if isinstance(avro, list):
        return _optional(avro, namespace, named)
    if not isinstance(avro, dict):
        raise ValueDecodeError(f"writer schema has {avro!r:.80} where a type belongs")
    kind = avro.get("type")
    if kind == "record":
        return _struct(avro, namespace, named)
    if kind == "array":
        out = {"type": "array", "optional": False, "items": _connect(avro["items"], namespace, named)}
    elif kind == "map":
        values = _connect(avro["values"], namespace, named)
        out = {
            "type": "map",
            "optional": False,
            "keys": {"type": "string", "optional": False},
            "values": values,
        }
    elif kind == "enum":  # only with enhanced.avro.schema.support: Connect sees a string
        out = {"type": "string", "optional": False}
    elif kind == "fixed":
        out = {"type": "bytes", "optional": False}
    elif kind in _PRIMITIVES:
        out = {"type": avro.get("connect.type") or _PRIMITIVES[kind], "optional": False}
    else:  # {"type": "SomeNamedType"} or {"type": {...}}
        return _connect(kind, namespace, named)
    return _with_metadata(out, avro)


def _optional(union: list[Any], namespace: str, named: dict[str, dict[str, Any]]) -> dict[str, Any]:
    branches = [b for b in union if b != "null"]
    if len(branches) != 1:
        raise ValueDecodeError(
            f"writer schema has the union {json.dumps(union)[:120]}; Connect writes only [null, T] unions",
            fix="read this topic with the converter that wrote it (a Connect AvroConverter)",
        )
    return {**_connect(branches[0], namespace, named), "optional": True}


def _struct(avro: Mapping[str, Any], namespace: str, named: dict[str, dict[str, Any]]) -> dict[str, Any]:
    name = str(avro["name"])
    own_namespace = str(avro.get("namespace", namespace)) if "." not in name else name.rpartition(".")[0]
    full = name if "." in name or not own_namespace else f"{own_namespace}.{name}"
    out: dict[str, Any] = {"type": "struct", "optional": False, "name": full, "fields": []}
    named[full] = out  # before the fields: a later field may refer to it by name
    out["fields"] = [
        {**_connect(f["type"], own_namespace, named), "field": str(f["name"])} for f in avro["fields"]
    ]
    return _with_metadata(out, avro)


def _with_metadata(out: dict[str, Any], avro: Mapping[str, Any]) -> dict[str, Any]:
    if "connect.name" in avro:
        out["name"] = str(avro["connect.name"])
    if "connect.version" in avro:
        out["version"] = avro["connect.version"]
    params = avro.get("connect.parameters")
    if isinstance(params, dict):
        out["parameters"] = {str(k): str(v) for k, v in params.items()}
    return out


def _without_logical_types(avro: Any) -> Any:
    """The schema minus `logicalType`: values stay as Connect wrote them, `cdc.values` converts them."""
    if isinstance(avro, list):
        return [_without_logical_types(a) for a in avro]
    if isinstance(avro, dict):
        return {k: _without_logical_types(v) for k, v in avro.items() if k != "logicalType"}
    return avro
