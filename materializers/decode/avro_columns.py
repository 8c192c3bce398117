"""Which conversion turns a Debezium Avro field into a materializer's DDL column (pure, no Spark).

Apicurio's Connect AvroConverter keeps Connect's metadata in the writer schema: `connect.name` is
Debezium's semantic type (io.debezium.time.MicroTimestamp, ...), and Connect's own logical types add an
Avro `logicalType`. `reader_schema` hands `from_avro` the writer schema with every `logicalType` removed
except `decimal` of precision <= 38, so each value arrives as Connect wrote it (a Date's days, a
Timestamp's millis) and `conversion` alone decides how it becomes the DDL type, by semantic type first:

| source (semantic type / Avro type)                         | DDL type              | conversion |
|------------------------------------------------------------|-----------------------|------------|
| io.debezium.time.MicroTimestamp (long micros)              | timestamp             | micros     |
| io.debezium.time.Timestamp, Connect Timestamp (long millis)| timestamp             | millis     |
| io.debezium.time.NanoTimestamp (long nanos)                | timestamp             | nanos (whole micros only) |
| io.debezium.time.ZonedTimestamp (ISO string)               | timestamp             | cast       |
| io.debezium.time.Date, Connect Date (int days)             | date                  | days       |
| numeric as string (decimal.handling.mode=string)           | decimal(p,s)          | decimal_text (no digit lost) |
| Connect Decimal (bytes, precision <= 38)                   | decimal(p,s), string  | cast (exactness checked) |
| int/long/float/double/boolean/string/bytes/array           | a DDL type of its kind| cast (range and exactness checked) |
| anything                                                   | string                | text: the value as the JSON path gives it (numbers and times as their raw number, bytes as base64, arrays as JSON) |

Refused, with the reason in the dead letter of any record that carries a non-null value there:
- a Connect Decimal of precision > 38, or with none (Connect then writes 64): Spark's decimals hold 38
  digits, so no such value is read at all — capture the column with decimal.handling.mode=string (the
  toolkit's default) and declare it string, or decimal(p,s) with p <= 38;
- Debezium's VariableScaleDecimal (NUMERIC without precision, decimal.handling.mode=precise): same fix;
- MicroTime/Time/NanoTime (time of day) into anything but an integer or string column;
- any other pair this table does not list (a struct or map source, a timestamp into a boolean, ...).
A column the writer schema lacks (added to the DDL before the table, or dropped from the table) is null,
as the JSON path gives it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any, Literal

SPARK_MAX_PRECISION = 38
Kind = Literal[
    "same", "cast", "text", "micros", "millis", "nanos", "days", "decimal_text", "absent", "refuse"
]

_MICROS = {"io.debezium.time.MicroTimestamp"}
_MILLIS = {"io.debezium.time.Timestamp", "org.apache.kafka.connect.data.Timestamp"}
_NANOS = {"io.debezium.time.NanoTimestamp"}
_DAYS = {"io.debezium.time.Date", "org.apache.kafka.connect.data.Date"}
_TIME_OF_DAY = {
    "io.debezium.time.MicroTime",
    "io.debezium.time.Time",
    "io.debezium.time.NanoTime",
    "org.apache.kafka.connect.data.Time",
}
_VARIABLE_DECIMAL = "io.debezium.data.VariableScaleDecimal"
_INTEGRAL = {"tinyint", "smallint", "int", "bigint"}
_FRACTIONAL = {"float", "double"}
# Spark's DDL spellings -> the names `conversion` compares.
_ALIASES = {
    "integer": "int",
    "long": "bigint",
    "short": "smallint",
    "byte": "tinyint",
    "real": "float",
    "bool": "boolean",
    "numeric": "decimal",
    "dec": "decimal",
}
# The Spark type `from_avro` gives each Avro type (logical types removed, see `reader_schema`).
_SPARK_OF_AVRO = {
    "int": "int",
    "long": "bigint",
    "float": "float",
    "double": "double",
    "boolean": "boolean",
    "string": "string",
    "enum": "string",
    "bytes": "binary",
    "fixed": "binary",
}


@dataclass(frozen=True, slots=True)
class SourceField:
    """One field of the writer schema's row record: its Avro type as `from_avro` reads it, Debezium's
    semantic type (`connect.name`) and a Connect Decimal's precision and scale."""

    avro: str  # int, long, float, double, boolean, string, enum, bytes, fixed, array, map, record
    semantic: str = ""
    precision: int | None = None
    scale: int | None = None

    def describe(self) -> str:
        if self.precision is not None:
            return f"a Connect Decimal({self.precision},{self.scale})"
        return f"{self.semantic} ({self.avro})" if self.semantic else f"Avro {self.avro}"


@dataclass(frozen=True, slots=True)
class Conversion:
    kind: Kind
    reason: str = ""  # why a `refuse` is refused


def ddl_columns(data_ddl: str) -> dict[str, str]:
    """{column: normalized type} of a DDL like "name string, price decimal(12,2), tags array<string>"."""
    out: dict[str, str] = {}
    for part in _top_level(data_ddl, ","):
        name, _, kind = part.strip().partition(" ")
        out[name.strip("`")] = normalize_type(kind)
    return out


def normalize_type(kind: str) -> str:
    text = re.sub(r"\s+", "", kind.strip().lower())
    base, paren, rest = text.partition("(")
    return _ALIASES.get(base, base) + paren + rest


def avro_name(column: str) -> str:
    """The field name Debezium writes for `column` with field.name.adjustment.mode=avro."""
    name = re.sub(r"[^A-Za-z0-9_]", "_", column)
    return f"_{name}" if name[:1].isdigit() else name


def is_envelope(schema_text: str) -> bool:
    """Whether a writer schema is a Debezium change event's (a record with before/after/source/op)."""
    return {"after", "source", "op"} <= _field_types(json.loads(schema_text)).keys()


def row_fields(schema_text: str) -> dict[str, SourceField]:
    """The fields of an envelope's `after` row (or of a key record), by Avro field name."""
    doc = json.loads(schema_text)
    fields = _field_types(doc)
    row = _nullable(fields["after"]) if "after" in fields else doc
    named = _named_types(doc)
    if isinstance(row, str):
        row = named.get(row) or named.get(row.rpartition(".")[2], {})
    return {name: source_field(t, named) for name, t in _field_types(row).items()}


def source_field(avro: Any, named: dict[str, Any] | None = None) -> SourceField:
    avro = _nullable(avro)
    if isinstance(avro, str):
        found = (named or {}).get(avro)
        return source_field(found, named) if found is not None else SourceField(avro)
    if isinstance(avro, list):  # a union other than [null, T]: from_avro makes it a struct
        return SourceField("record")
    kind = avro.get("type")
    if isinstance(kind, (dict, list)):
        return source_field(kind, named)
    semantic = str(avro.get("connect.name", ""))
    if avro.get("logicalType") == "decimal":
        return SourceField(str(kind), semantic, int(avro.get("precision", 64)), int(avro.get("scale", 0)))
    return SourceField(str(kind), semantic)


def reader_schema(schema_text: str) -> str:
    """The writer schema for `from_avro`: `logicalType`s removed but `decimal` of precision <= 38
    (Spark refuses to read a schema with a wider decimal, and its other logical types would hide
    Connect's own encoding, which `conversion` maps by semantic type instead)."""

    def strip(node: Any) -> Any:
        if isinstance(node, list):
            return [strip(n) for n in node]
        if not isinstance(node, dict):
            return node
        out = {k: strip(v) for k, v in node.items()}
        logical = out.get("logicalType")
        if logical is not None and not (
            logical == "decimal" and int(out.get("precision", 64)) <= SPARK_MAX_PRECISION
        ):
            del out["logicalType"]
        return out

    return json.dumps(strip(json.loads(schema_text)), separators=(",", ":"))


# What the decoder reads of an envelope (debezium.CHANGE_FIELDS_WITH_BEFORE) and of its `source`.
ENVELOPE_READ = ("before", "after", "source", "op", "ts_ms")
SOURCE_READ = ("lsn", "ts_ms")
_PRIMITIVES = {"null", "boolean", "int", "long", "float", "double", "bytes", "string"}


def envelope_reader(schema_text: str, row_columns: Collection[str]) -> str:
    """The reader schema `from_avro` resolves an envelope's writer schema to (its `avroSchema` option):
    `reader_schema` cut to ENVELOPE_READ, `source` to SOURCE_READ and the row record to `row_columns`
    (Avro field names). Avro's schema resolution skips what is left out.
    Why: Spark 4.2's Avro reader builds every nested record's row field by field, and each field costs
    it a fresh copy of the task's SQL configuration (SpecificInternalRow -> TypeOps -> SQLConf.get ->
    new ReadOnlySQLConf, per record): Debezium's 16-field `source` alone cost more than the rest of a
    products record's decode. The whole schema is returned where a left-out field defines a named type
    that a kept field refers to."""
    whole = reader_schema(schema_text)
    doc = json.loads(whole)
    named = _named_types(doc)
    fields = _field_types(doc)
    for name, wanted in (("after", set(row_columns)), ("source", set(SOURCE_READ))):
        record = _nullable(fields.get(name))
        record = named.get(record) if isinstance(record, str) else record
        if isinstance(record, dict):  # a named record's one definition: `before` shares it
            record["fields"] = [f for f in record.get("fields", []) if f["name"] in wanted]
    doc["fields"] = [f for f in doc.get("fields", []) if f["name"] in ENVELOPE_READ]
    if not _references(doc) <= _named_types(doc).keys():
        return whole
    return json.dumps(doc, separators=(",", ":"))


# An envelope body whose `before` is null (union branch 0, one byte 0x00) and whose `after` is a row
# (branch 1, 0x02): every insert, snapshot read and update of a table without REPLICA IDENTITY FULL.
FLAT_PREFIX = b"\x00\x02"
FLAT_SEP = "__"  # a flat field's name: `after__<column>`, `source__<field>`


def flat_envelope(schema_text: str, row_columns: Collection[str]) -> tuple[str, str] | None:
    """(writer, reader) schemas that read an envelope body starting with FLAT_PREFIX as one flat record
    (None: this envelope has no such form): Avro writes a record as its fields one after the other
    and a union as its branch number then the branch, so such a body is, byte for byte, a record of
    two longs (the branches), the row's fields, `source`'s fields and the envelope's other fields.
    The reader keeps what `envelope_reader` keeps, named `after__<column>`, `source__<field>`, `op`,
    `ts_ms`. Why: the nested records cost Spark 4.2's Avro reader a copy of the task's SQL
    configuration per field per record (`envelope_reader`); flat, a products change decoded as
    fast as Kafka read it. None where the layout differs (another field order, a union that is not
    [null, record]) or a row or `source` field has a named type of its own (a flat copy would
    define it twice or in another namespace): those bodies keep the nested read."""
    doc = json.loads(reader_schema(schema_text))
    fields, named = doc.get("fields", []), _named_types(doc)
    if [f["name"] for f in fields[:2]] != ["before", "after"]:
        return None
    row = _defined(_null_first(fields[0]["type"]), named)
    source = _defined(next((f["type"] for f in fields if f["name"] == "source"), None), named)
    if row is None or source is None or _defined(_null_first(fields[1]["type"]), named) is not row:
        return None
    flat = [{"name": f"{side}{FLAT_SEP}branch", "type": "long"} for side in ("before", "after")]
    flat += [_renamed(f, "after") for f in row["fields"]]
    for f in fields[2:]:
        flat += [_renamed(g, "source") for g in source["fields"]] if f["name"] == "source" else [f]
    names = [f["name"] for f in flat]
    if (
        len(set(names)) != len(names)
        or any(_references(f["type"]) or _named_types(f["type"]) for f in [*row["fields"], *source["fields"]])
        or not _references(flat) <= _named_types(flat).keys()
    ):
        return None
    wanted = {f"after{FLAT_SEP}{c}" for c in row_columns} | {f"source{FLAT_SEP}{c}" for c in SOURCE_READ}
    wanted |= set(ENVELOPE_READ) - {"before", "after", "source"}
    writer = {k: v for k, v in doc.items() if k != "fields"} | {"fields": flat}
    reader = writer | {"fields": [f for f in flat if f["name"] in wanted]}
    return json.dumps(writer, separators=(",", ":")), json.dumps(reader, separators=(",", ":"))


def _null_first(avro: Any) -> Any:
    """The branch of a [null, X] union (None: another type)."""
    return avro[1] if isinstance(avro, list) and len(avro) == 2 and avro[0] == "null" else None


def _defined(avro: Any, named: dict[str, Any]) -> dict[str, Any] | None:
    """The record `avro` is or names (None: not a record)."""
    found = named.get(avro) if isinstance(avro, str) else avro
    return found if isinstance(found, dict) and found.get("type") == "record" else None


def _renamed(field: dict[str, Any], side: str) -> dict[str, Any]:
    return {**field, "name": f"{side}{FLAT_SEP}{field['name']}"}


def _references(node: Any) -> set[str]:
    """The named types a schema node uses by name."""
    if isinstance(node, str):
        return set() if node in _PRIMITIVES else {node}
    if isinstance(node, list):
        return set().union(*(_references(n) for n in node))
    if not isinstance(node, dict):
        return set()
    kind = node.get("type")
    if kind in ("record", "error"):
        return set().union(*(_references(f["type"]) for f in node.get("fields", [])))
    if kind == "array":
        return _references(node.get("items"))
    if kind == "map":
        return _references(node.get("values"))
    return set() if kind in ("enum", "fixed") else _references(kind)


def conversion(field: SourceField | None, ddl_type: str) -> Conversion:
    """How a value of `field` becomes `ddl_type` (normalized), or why it cannot (see the module's table)."""
    if field is None:
        return Conversion("absent")
    refused = _refused(field, ddl_type)
    if refused:
        return Conversion("refuse", refused)
    spark = spark_type(field)
    base = ddl_type.partition("(")[0].partition("<")[0]
    if ddl_type == "string":
        return Conversion("same" if spark == "string" else "text")
    if field.semantic in _MICROS | _MILLIS | _NANOS and base == "timestamp":
        return Conversion(
            "micros" if field.semantic in _MICROS else "millis" if field.semantic in _MILLIS else "nanos"
        )
    if field.semantic in _DAYS and base == "date":
        return Conversion("days")
    if (
        field.semantic
        and (field.semantic in _MICROS | _MILLIS | _NANOS | _DAYS | _TIME_OF_DAY)
        and base not in _INTEGRAL
    ):
        return _no(field, ddl_type)
    if spark == ddl_type:
        return Conversion("same")
    if spark == "string" and base == "decimal":
        return Conversion("decimal_text")
    if _castable(spark, base):
        return Conversion("cast")
    return _no(field, ddl_type)


def spark_type(field: SourceField) -> str:
    """The type `from_avro` reads `field` as (normalized DDL spelling)."""
    if field.precision is not None:
        if field.precision > SPARK_MAX_PRECISION:
            return "binary"
        return f"decimal({field.precision},{field.scale})"
    return _SPARK_OF_AVRO.get(field.avro, field.avro)


def decimal_scale(ddl_type: str) -> int:
    """The scale of a normalized decimal type ("decimal(12,2)" -> 2; "decimal" -> 0, Spark's default)."""
    match = re.fullmatch(r"decimal\((\d+),(\d+)\)", ddl_type)
    return int(match.group(2)) if match else 0


def _refused(field: SourceField, ddl_type: str) -> str:
    fix = (
        "capture the column with decimal.handling.mode=string (the toolkit's default) and declare it "
        "string, or decimal(p,s) with p <= 38"
    )
    if field.precision is not None and field.precision > SPARK_MAX_PRECISION:
        return f"it is {field.describe()}, wider than Spark's {SPARK_MAX_PRECISION} digits: {fix}"
    if field.semantic == _VARIABLE_DECIMAL:
        return f"it is Debezium's VariableScaleDecimal (NUMERIC without precision, precise mode): {fix}"
    if field.semantic in _TIME_OF_DAY and ddl_type != "string" and ddl_type not in _INTEGRAL:
        return f"it is {field.describe()}, a time of day: declare it bigint or string"
    return ""


def _castable(spark: str, base: str) -> bool:
    numeric = _INTEGRAL | _FRACTIONAL | {"decimal"}
    source = spark.partition("(")[0]
    if source in numeric:
        return base in numeric
    if source == "string":
        return base in numeric | {"boolean", "date", "timestamp", "timestamp_ntz", "binary"}
    if source == "array":
        return base == "array"
    return source == base


def _no(field: SourceField, ddl_type: str) -> Conversion:
    return Conversion("refuse", f"it is {field.describe()}, which this decoder does not turn into {ddl_type}")


def _nullable(avro: Any) -> Any:
    if isinstance(avro, list):
        branches = [b for b in avro if b != "null"]
        return branches[0] if len(branches) == 1 else avro
    return avro


def _field_types(record: Any) -> dict[str, Any]:
    if not isinstance(record, dict):
        return {}
    return {str(f["name"]): f["type"] for f in record.get("fields", [])}


def _named_types(doc: Any) -> dict[str, Any]:
    """Every named record in the schema by its short and full name (later fields may refer to them)."""
    found: dict[str, Any] = {}

    def walk(node: Any, namespace: str) -> None:
        if isinstance(node, list):
            for n in node:
                walk(n, namespace)
        elif isinstance(node, dict):
            space = str(node.get("namespace", namespace))
            if node.get("type") in ("record", "enum", "fixed") and "name" in node:
                name = str(node["name"])
                found[name.rpartition(".")[2]] = node
                found[name if "." in name else f"{space}.{name}"] = node
            for value in node.values():
                walk(value, space)

    walk(doc, "")
    return found


def _top_level(text: str, sep: str) -> list[str]:
    """`text` split at `sep` outside <...> and (...)."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch in "<(":
            depth += 1
        elif ch in ">)":
            depth -= 1
        elif ch == sep and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p for p in parts if p.strip()]
