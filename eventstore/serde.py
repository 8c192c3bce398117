"""The only place records are encoded and decoded.

Values use the Confluent wire format: magic byte 0, a 4-byte big-endian schema id, then the Avro body
(schemaless). Writer schemas are fetched from the registry by id; reader schemas are this package's
.avsc files, so Avro schema resolution upgrades old records (e.g. a field added with a default).
Metadata travels in headers (UTF-8 strings) so tools can route without decoding the body.
Decoding failures name topic/partition/offset and never drop a record silently.
Schemas are registered under `<topic>-<record full name>` (subjects.py), never beside a store whose
schemas are still under the old `<store>-<record type>` subjects (that raises SubjectsNeedMigration).
"""

from __future__ import annotations

import io
import json
import re
import struct
from collections.abc import Sequence
from typing import Any

from fastavro import schemaless_reader, schemaless_writer
from fastavro.validation import ValidationError, validate

from eventstore.aggregate import Aggregate, type_name
from eventstore.config import StoreConfig
from eventstore.envelope import ANY_VERSION, CommandEnvelope, EventEnvelope, Outcome, Position, Snapshot
from eventstore.errors import RegistryUnavailable, SchemaNotFound, SchemaViolation, UndecodableRecord
from eventstore.records import from_record, to_record
from eventstore.registry import Registry
from eventstore.schemas import OUTCOME, Catalog, canonical, parse_text
from eventstore.subjects import StoreSubjects, require_migrated

MAGIC = 0
HEADER_SIZE = 5

H_TYPE = "event-type"
H_COMMAND_TYPE = "command-type"
H_STREAM = "stream-id"
H_VERSION = "stream-version"
H_SCHEMA_VERSION = "schema-version"
H_COMMAND_ID = "command-id"
H_CORRELATION = "correlation-id"
H_CAUSATION = "causation-id"
H_TIMESTAMP = "timestamp"
H_EXPECTED = "expected-version"
H_REPLY_PARTITION = "reply-partition"
H_EVENTS_OFFSET = "events-offset"
H_LOW_WATER = "low-water"

Headers = list[tuple[str, str | bytes | None]]
# What confluent-kafka hands back from Message.headers().
RawHeaders = dict[str, str | bytes | None] | Sequence[tuple[str, str | bytes | None]] | None


def frame(schema_id: int, body: bytes) -> bytes:
    return struct.pack(">bI", MAGIC, schema_id) + body


def unframe(value: bytes) -> tuple[int, bytes]:
    if len(value) < HEADER_SIZE or value[0] != MAGIC:
        raise ValueError("value does not start with the Confluent magic byte 0 and a 4-byte schema id")
    return struct.unpack(">I", value[1:HEADER_SIZE])[0], value[HEADER_SIZE:]


def header_map(headers: RawHeaders) -> dict[str, str]:
    """Last value wins; values are UTF-8 (undecodable bytes are shown escaped, never lost)."""
    pairs = headers.items() if isinstance(headers, dict) else headers or ()
    # Inline, not a helper per value: this runs for every header of every command the processor reads.
    return {k: v.decode("utf-8", "backslashreplace") if isinstance(v, bytes) else (v or "") for k, v in pairs}


def _headers(pairs: dict[str, str | int]) -> Headers:
    # confluent-kafka encodes str values as UTF-8 itself.
    return [(k, v if isinstance(v, str) else str(v)) for k, v in pairs.items()]


def raw_pairs(headers: RawHeaders) -> Headers:
    """Headers exactly as received (order and bytes kept), as a list for re-producing."""
    return list(headers.items()) if isinstance(headers, dict) else list(headers or ())


def _violation(record_type: str, exc: ValidationError) -> SchemaViolation:
    first = str(exc.args[0] if exc.args else exc).strip('[] \n"')
    first = first.splitlines()[0].strip().strip('",') if first else str(exc)
    found = re.match(r"Field\((?P<a>[^)]*)\)|(?P<b>\S+) is ", first)
    path = (found.group("a") or found.group("b")) if found else "?"
    field = path.rsplit(".", 1)[-1]
    return SchemaViolation(
        f"{record_type} is invalid: field {field!r}: {first}; fix the value to match the schema",
        field=field,
        reason=first,
    )


def _check_fields(record_type: str, schema: Any, data: dict[str, Any]) -> None:
    """Missing and unknown top-level fields, named (fastavro only says the whole record is wrong)."""
    if not isinstance(schema, dict) or schema.get("type") != "record" or not isinstance(data, dict):
        return
    declared = {f["name"]: f for f in schema["fields"]}
    for name, spec in declared.items():
        if name not in data and "default" not in spec:
            raise SchemaViolation(
                f"{record_type} is invalid: field {name!r} is missing; add it (Avro type {spec['type']!r})",
                field=name,
                reason="missing",
            )
    for name in data:
        if name not in declared:
            raise SchemaViolation(
                f"{record_type} is invalid: field {name!r} is not in the schema; "
                f"known fields: {sorted(declared)}",
                field=name,
                reason="unknown field",
            )


class Serde:
    """Encodes and decodes one store's records against its catalog and a registry."""

    def __init__(self, aggregate: Aggregate[Any], registry: Registry, *, store: StoreConfig) -> None:
        self.aggregate = aggregate
        self.registry = registry
        self.catalog = Catalog.for_aggregate(aggregate)
        self.names = StoreSubjects.build(store, aggregate, self.catalog)
        self._migrated = False
        self._ids: dict[str, int] = {}
        self._readers: dict[str, Any] = {}
        self._writers: dict[int, Any] = {}
        self._same: dict[tuple[int, str], bool] = {}
        self._framing: dict[str, bytes] = {}

    def subjects(self, record_type: str) -> tuple[str, ...]:
        """`<topic>-<record full name>` for every topic `record_type` is written to."""
        return self.names.of(record_type)

    def require_migrated(self) -> None:
        """Raise SubjectsNeedMigration when the store's schemas are only under the old subjects.

        Asked once per Serde, before its first registration: a process that starts fresh subjects
        beside an old store's history would fork that history silently.
        """
        if not self._migrated:
            require_migrated(self.names, lambda s: self.registry.latest(s) is not None)
            self._migrated = True

    # --- raw Avro --------------------------------------------------------------------------------

    def schema_id(self, record_type: str) -> int:
        if record_type not in self._ids:
            self.require_migrated()
            text = self.catalog.text(record_type)
            # One schema text has one id in every subject, so the id serves each topic of the type.
            ids = [self.registry.register(s, text) for s in self.subjects(record_type)]
            self._ids[record_type] = ids[0]
        return self._ids[record_type]

    def _reader(self, record_type: str) -> Any:
        if record_type not in self._readers:
            self._readers[record_type] = self.catalog.parsed(record_type)
        return self._readers[record_type]

    def _writer(self, schema_id: int) -> Any:
        if schema_id not in self._writers:
            self._writers[schema_id] = parse_text(self.registry.schema_text(schema_id))
        return self._writers[schema_id]

    def validate(self, record_type: str, data: dict[str, Any]) -> None:
        """Raise SchemaViolation naming the field and reason when `data` breaks the schema."""
        _check_fields(record_type, self._reader(record_type), data)
        try:
            validate(data, self._reader(record_type), raise_errors=True, strict=True)
        except ValidationError as exc:
            raise _violation(record_type, exc) from None

    def encode(self, record_type: str, data: dict[str, Any], *, trusted: bool = False) -> bytes:
        """Avro body framed with the schema id.

        Untrusted data (commands from callers) is validated first, so the error names the field.
        `trusted` data (events, outcomes, snapshots the processor builds from typed dataclasses) goes
        straight to the writer, which still refuses a wrong value; only then is it validated, for the
        message. This saves a full validation pass per record on the processor's hot path.
        """
        if not trusted:
            self.validate(record_type, data)
        prefix = self._framing.get(record_type)
        if prefix is None:
            prefix = self._framing[record_type] = frame(self.schema_id(record_type), b"")
        buf = io.BytesIO(prefix)
        buf.seek(HEADER_SIZE)  # the body follows the framing in one buffer, no copy to join them
        try:
            schemaless_writer(buf, self._reader(record_type), data)
        except Exception:
            self.validate(record_type, data)  # raises SchemaViolation naming the field
            raise
        return buf.getvalue()

    def decode(self, value: bytes, record_type: str | None = None) -> tuple[int, dict[str, Any]]:
        """(schema id, record) read with the local schema of `record_type` when given (resolution)."""
        schema_id, body = unframe(value)
        writer = self._writer(schema_id)
        reader = None
        if record_type is not None and not self._same_schema(schema_id, record_type):
            reader = self._reader(record_type)
        record: dict[str, Any] = schemaless_reader(io.BytesIO(body), writer, reader)  # type: ignore[assignment]
        return schema_id, record

    def _same_schema(self, schema_id: int, record_type: str) -> bool:
        """Written with exactly our schema: read without resolution (several times faster)."""
        key = (schema_id, record_type)
        if key not in self._same:
            local = canonical(self.catalog.text(record_type))
            self._same[key] = canonical(self.registry.schema_text(schema_id)) == local
        return self._same[key]

    def _decode_as(self, record_type: str, value: bytes) -> tuple[int, Any]:
        cls = self.aggregate.record_class(record_type)
        if cls is None:
            raise SchemaNotFound(
                f"unknown record type {record_type!r}; this aggregate knows {list(self.aggregate.record_types())}"
            )
        schema_id, data = self.decode(value, record_type)
        return schema_id, from_record(cls, data)

    # --- events ----------------------------------------------------------------------------------

    def event_value(self, envelope: EventEnvelope) -> tuple[bytes, bytes, Headers]:
        record_type = envelope.event_type
        value = self.encode(record_type, to_record(envelope.event), trusted=True)
        headers = _headers(
            {
                H_TYPE: record_type,
                H_STREAM: envelope.stream_id,
                H_VERSION: envelope.version,
                H_SCHEMA_VERSION: envelope.schema_version,
                H_COMMAND_ID: envelope.command_id,
                H_CORRELATION: envelope.correlation_id,
                H_CAUSATION: envelope.causation_id,
                H_TIMESTAMP: envelope.timestamp_ms,
            }
        )
        return envelope.stream_id.encode(), value, headers

    def read_event(self, position: Position, value: bytes | None, headers: RawHeaders) -> EventEnvelope:
        h = header_map(headers)
        try:
            record_type = h[H_TYPE]
            schema_id, event = self._decode_as(record_type, value or b"")
            return EventEnvelope(
                stream_id=h[H_STREAM],
                version=int(h[H_VERSION]),
                event_type=record_type,
                schema_version=int(h.get(H_SCHEMA_VERSION, "1")),
                event=event,
                command_id=h.get(H_COMMAND_ID, ""),
                correlation_id=h.get(H_CORRELATION, ""),
                causation_id=h.get(H_CAUSATION, ""),
                timestamp_ms=int(h.get(H_TIMESTAMP, "0")),
                schema_id=schema_id,
                position=position,
            )
        except RegistryUnavailable:
            raise  # the registry is down: retry later, the record itself may be fine
        except Exception as exc:  # any failure on stored bytes is reported with its position
            raise UndecodableRecord(
                f"cannot decode event at {position} (type {h.get(H_TYPE)!r}): {type(exc).__name__}: {exc}; "
                "deploy code that knows this event type/schema, or configure a dead-letter topic",
                topic=position.topic,
                partition=position.partition,
                offset=position.offset,
            ) from exc

    # --- commands --------------------------------------------------------------------------------

    def command_value(self, envelope: CommandEnvelope) -> tuple[bytes, bytes, Headers]:
        value = self.encode(envelope.command_type, to_record(envelope.command))
        expected = ANY_VERSION if envelope.expected_version is None else envelope.expected_version
        headers = _headers(
            {
                H_COMMAND_TYPE: envelope.command_type,
                H_COMMAND_ID: envelope.command_id,
                H_STREAM: envelope.stream_id,
                H_EXPECTED: expected,
                H_CORRELATION: envelope.correlation_id,
                H_CAUSATION: envelope.causation_id,
                H_REPLY_PARTITION: envelope.reply_partition,
                H_TIMESTAMP: envelope.timestamp_ms,
            }
        )
        return envelope.stream_id.encode(), value, headers

    def read_command_headers(self, headers: RawHeaders) -> dict[str, str]:
        return header_map(headers)

    def read_command(
        self, value: bytes | None, headers: RawHeaders, parsed: dict[str, str] | None = None
    ) -> CommandEnvelope:
        """Raises KeyError/ValueError/SchemaNotFound for unreadable commands (the processor replies 'invalid').

        `parsed`: `header_map(headers)` when the caller has it already.
        """
        h = header_map(headers) if parsed is None else parsed
        _, command = self._decode_as(h[H_COMMAND_TYPE], value or b"")
        expected = int(h[H_EXPECTED])
        return CommandEnvelope(
            command_id=h[H_COMMAND_ID],
            stream_id=h[H_STREAM],
            command_type=h[H_COMMAND_TYPE],
            command=command,
            expected_version=None if expected == ANY_VERSION else expected,
            correlation_id=h.get(H_CORRELATION, ""),
            causation_id=h.get(H_CAUSATION, ""),
            reply_partition=int(h.get(H_REPLY_PARTITION, "0")),
            timestamp_ms=int(h.get(H_TIMESTAMP, "0")),
        )

    # --- outcomes and snapshots ------------------------------------------------------------------

    def outcome_value(self, outcome: Outcome) -> bytes:
        return self.encode(OUTCOME, to_record(outcome), trusted=True)

    def read_outcome(self, value: bytes) -> Outcome:
        _, data = self.decode(value, OUTCOME)
        return from_record(Outcome, data)

    def snapshot_value(self, snapshot: Snapshot) -> tuple[bytes, bytes, Headers]:
        record_type = type_name(type(snapshot.state))
        value = self.encode(record_type, to_record(snapshot.state), trusted=True)
        headers = _headers(
            {
                H_TYPE: record_type,
                H_STREAM: snapshot.stream_id,
                H_VERSION: snapshot.version,
                H_EVENTS_OFFSET: snapshot.events_offset,
                H_LOW_WATER: snapshot.low_water,
            }
        )
        return snapshot.stream_id.encode(), value, headers

    def read_snapshot(self, value: bytes, headers: RawHeaders) -> Snapshot:
        h = header_map(headers)
        _, state = self._decode_as(h[H_TYPE], value)
        return Snapshot(
            stream_id=h[H_STREAM],
            version=int(h[H_VERSION]),
            state=state,
            events_offset=int(h.get(H_EVENTS_OFFSET, "0")),
            low_water=int(h.get(H_LOW_WATER, "0")),
        )

    # --- any topic (replay to stdout) --------------------------------------------------------------

    def any_value(self, value: bytes | None) -> Any:
        """Avro (via registry, writer schema only) when framed; otherwise JSON; otherwise text."""
        return decode_any(self.registry, value, self._writer)


def decode_any(registry: Registry | None, value: bytes | None, writer_for: Any = None) -> Any:
    if value is None:
        return None
    if len(value) >= HEADER_SIZE and value[0] == MAGIC and (registry is not None or writer_for):
        schema_id, body = unframe(value)
        writer = writer_for(schema_id) if writer_for else parse_text(registry.schema_text(schema_id))  # type: ignore[union-attr]
        return schemaless_reader(io.BytesIO(body), writer, None)
    try:
        return json.loads(value)
    except (UnicodeDecodeError, json.JSONDecodeError):
        return {"$bytes": value.hex()}
