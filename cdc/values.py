"""Convert one Debezium field value, as JsonConverter or the Avro converter wrote it, into a Python value (pure).

The decoder trusts the record's Connect schema (inline with JsonConverter's schemas.enable=true; rebuilt
from the registry's writer schema for Avro by `cdc.avro_records`, bytes then raw instead of base64): the schema's semantic `name` says how to read the literal (days since epoch,
microseconds, ISO strings, base64 bytes). Where the name is not enough — `decimal.handling.mode=string`
turns numeric into a plain string — the connector spec sets `column.propagate.source.type`, so the schema
carries `__debezium.source.column.type` and the string becomes an exact `Decimal`.

Postgres -> Python mapping (what `decode_value` returns):
  smallint/int/bigint -> int; numeric/decimal/money -> Decimal (exact, NaN and ±Infinity included);
  real/double -> float (NaN, ±inf); boolean -> bool; text/varchar/char/enum/xml/inet -> str;
  uuid -> uuid.UUID; date -> date; time -> time; timetz -> aware time (UTC);
  timestamp -> naive datetime; timestamptz -> aware datetime (UTC); interval -> Interval;
  json/jsonb/hstore -> parsed JSON; arrays -> tuple of the element type's values (date[] -> dates,
  timestamptz[] -> aware datetimes, ...: Debezium sends array elements without a semantic name, so the
  element type comes from the propagated source type); bytea -> bytes; bit(n>1) -> '0101' text.
A TOASTed column Debezium could not read is the `UNCHANGED` sentinel, never the placeholder text.

Exact or refused: a value that cannot be decoded exactly raises `ValueDecodeError` with a `fix`, never
a different value. Refused: bit varying (Debezium sends the bits as an integer, so leading zeros and
the length are gone), multi-dimensional text arrays (Debezium sends Java object names), and values
Python's date/time types cannot hold (BC, 'infinity', years past 9999, time 24:00:00).
"""

from __future__ import annotations

import base64
import enum
import json
import re
import struct
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal, InvalidOperation
from typing import Any
from uuid import UUID

from cdc.errors import ValueDecodeError

DEFAULT_UNAVAILABLE_PLACEHOLDER = "__debezium_unavailable_value"
SOURCE_TYPE_PARAM = "__debezium.source.column.type"
_EPOCH_DATE = date(1970, 1, 1)
_EPOCH = datetime(1970, 1, 1)
_DECIMAL_SOURCE_TYPES = frozenset({"NUMERIC", "DECIMAL", "MONEY"})
_FLOAT_SPECIALS = {"NaN": float("nan"), "Infinity": float("inf"), "-Infinity": float("-inf")}
# decimal.handling.mode=string spells numeric's infinities in Java's words; NaN arrives as "NAN".
_DECIMAL_SPECIALS = {"POSITIVE_INFINITY": Decimal("Infinity"), "NEGATIVE_INFINITY": Decimal("-Infinity")}
SCALE_PARAM = "__debezium.source.column.scale"
# Java's Object.toString() of an array: what Debezium sends for each row of a multi-dimensional text array.
_JAVA_ARRAY_NAME = re.compile(r"^\[+L[\w.$]+;@[0-9a-f]+$")
_OUT_OF_RANGE_FIX = (
    "Python's date and datetime hold years 1 to 9999 and no 'infinity', and time stops at 23:59:59.999999; "
    "keep such values out of the column (a CHECK constraint), or exclude the column (column.exclude.list) "
    "and keep a text copy filled by a trigger (col::text) instead"
)
_VARBIT_FIX = (
    "Debezium sends bit varying as an integer, so leading zeros and the length are lost; exclude the column "
    "(column.exclude.list) and keep a text copy filled by a trigger (col::text), or use bit(n)"
)
_MULTI_DIM_FIX = (
    "Debezium cannot carry multi-dimensional arrays; keep the column one-dimensional "
    "(CHECK (array_ndims(col) = 1)) or exclude it (column.exclude.list) and capture col::text"
)

Schema = Mapping[str, Any]


class Unchanged(enum.Enum):
    """Sentinel type: the column kept its previous value, Debezium did not see it (TOAST)."""

    UNCHANGED = "UNCHANGED"

    def __repr__(self) -> str:
        return "UNCHANGED"


UNCHANGED = Unchanged.UNCHANGED

_ISO_INTERVAL = re.compile(
    r"^P(?P<y>-?\d+)Y(?P<mo>-?\d+)M(?P<d>-?\d+)DT(?P<h>-?\d+)H(?P<mi>-?\d+)M(?P<s>-?\d+(?:\.\d+)?)S$"
)


@dataclass(frozen=True, slots=True)
class Interval:
    """A Postgres interval exactly as Postgres stores it: months, days and microseconds apart.

    A timedelta cannot hold '1 month' (its length depends on the month), so months stay separate.
    """

    months: int = 0
    days: int = 0
    microseconds: int = 0

    @classmethod
    def parse_iso(cls, text: str) -> Interval:
        """Read Debezium's `PnYnMnDTnHnMnS` form (each part may be negative, seconds fractional)."""
        m = _ISO_INTERVAL.match(text)
        if m is None:
            raise ValueDecodeError(f"interval {text!r} is not in Debezium's PnYnMnDTnHnMnS form")
        seconds = Decimal(m["s"])
        micros = (int(m["h"]) * 3600 + int(m["mi"]) * 60) * 1_000_000 + int(seconds * 1_000_000)
        return cls(months=int(m["y"]) * 12 + int(m["mo"]), days=int(m["d"]), microseconds=micros)

    def to_iso(self) -> str:
        """The Debezium/ISO form; `parse_iso(x.to_iso()) == x` and Postgres reads it back exactly."""
        years, months = divmod(abs(self.months), 12)
        sign = -1 if self.months < 0 else 1
        hours, rest = divmod(abs(self.microseconds), 3_600_000_000)
        minutes, rest = divmod(rest, 60_000_000)
        tsign = -1 if self.microseconds < 0 else 1
        seconds = (Decimal(rest) / 1_000_000).normalize()
        sec_text = format(tsign * seconds, "f") if rest else "0"
        return f"P{sign * years}Y{sign * months}M{self.days}DT{tsign * hours}H{tsign * minutes}M{sec_text}S"

    def as_timedelta(self) -> timedelta:
        """Approximate as psycopg does (1 year = 365 days, 1 month = 30 days); exact when months == 0."""
        years, months = divmod(abs(self.months), 12)
        month_days = (365 * years + 30 * months) * (-1 if self.months < 0 else 1)
        return timedelta(days=self.days + month_days, microseconds=self.microseconds)


def is_placeholder(schema: Schema, value: object, placeholder: str) -> bool:
    """Whether a raw JSON literal is Debezium's 'unavailable TOAST value' marker for its type.

    Text-like columns carry the placeholder text, bytea carries its bytes (base64 in JSON, raw in Avro),
    and array columns a one-element array holding the placeholder.
    """
    kind = schema.get("type")
    if kind == "string":
        return value == placeholder
    if kind == "bytes":
        return value == _b64(placeholder) or value == placeholder.encode()
    if kind == "array" and isinstance(value, list) and len(value) == 1:
        return is_placeholder(schema["items"], value[0], placeholder)
    return False


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def decode_struct(schema: Schema, value: Any, placeholder: str = DEFAULT_UNAVAILABLE_PLACEHOLDER) -> Any:
    """Decode a Connect struct into a dict of field name -> Python value, in schema field order."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise ValueDecodeError(f"expected an object for struct {schema.get('name', '?')}, got {value!r:.80}")
    out: dict[str, Any] = {}
    for field in schema.get("fields", ()):
        name = field["field"]
        try:
            out[name] = decode_value(field, value.get(name), placeholder)
        except ValueDecodeError as exc:
            raise exc.at(name, _source_type(field) or None) from exc
    return out


def decode_value(schema: Schema, value: Any, placeholder: str = DEFAULT_UNAVAILABLE_PLACEHOLDER) -> Any:
    """Decode one value by its Connect schema (type, semantic name, propagated source type)."""
    if value is None:
        return None
    if is_placeholder(schema, value, placeholder):
        return UNCHANGED
    try:
        return _decode(schema, value, placeholder)
    except ValueDecodeError:
        raise
    except OverflowError as exc:
        raise ValueDecodeError(
            f"value {value!r:.80} is out of Python's range: {exc}", fix=_OUT_OF_RANGE_FIX
        ) from exc
    except (
        ValueError,
        TypeError,
        KeyError,
        InvalidOperation,
        struct.error,
        AttributeError,
        RecursionError,
    ) as exc:
        time_like = str(schema.get("name", "")).startswith("io.debezium.time.")
        raise ValueDecodeError(
            f"value {value!r:.80} does not fit schema {schema.get('name') or schema.get('type')}: {exc}",
            fix=_OUT_OF_RANGE_FIX if time_like else None,
        ) from exc


def _decode(schema: Schema, value: Any, placeholder: str) -> Any:
    name = schema.get("name")
    if name in _BY_NAME:
        return _BY_NAME[name](schema, value)
    kind = schema.get("type")
    if kind == "struct":
        return decode_struct(schema, value, placeholder)
    if kind == "array":
        item_schema = _element_schema(schema)
        return tuple(decode_value(item_schema, v, placeholder) for v in value)
    if kind == "map":
        return {
            decode_value(schema["keys"], k, placeholder): decode_value(schema["values"], v, placeholder)
            for k, v in (value.items() if isinstance(value, dict) else value)
        }
    return _decode_primitive(schema, kind, value)


def _element_schema(schema: Schema) -> Schema:
    """The items' schema, typed by the array's source type: Debezium names no semantic type on elements."""
    item_schema = dict(schema["items"])
    source_type = _source_type(schema)
    if not source_type.startswith("_"):
        return item_schema
    # Array columns report the element type with a leading underscore (_NUMERIC).
    element = source_type[1:]
    params = dict(item_schema.get("parameters") or {})
    params[SOURCE_TYPE_PARAM] = element
    scale = (schema.get("parameters") or {}).get(SCALE_PARAM)
    if scale is not None:
        params[SCALE_PARAM] = scale
    item_schema["parameters"] = params
    if "name" not in item_schema:
        named = _ELEMENT_NAMES.get(element)
        if element == "TIMESTAMP" and int(scale or 6) <= 3:
            named = "io.debezium.time.Timestamp"  # adaptive precision: milliseconds up to timestamp(3)
        if named is not None:
            item_schema["name"] = named
    return item_schema


def _decode_primitive(schema: Schema, kind: Any, value: Any) -> Any:
    if kind in ("int8", "int16", "int32", "int64"):
        return _strict_int(value)
    if kind in ("float", "double", "float32", "float64"):  # JsonConverter writes float/double
        if isinstance(value, str):
            return _FLOAT_SPECIALS[value]
        return float(value)
    if kind == "boolean":
        if not isinstance(value, bool):
            raise TypeError("not a boolean")
        return value
    if kind == "bytes":
        return _raw_bytes(value)
    if kind == "string":
        if not isinstance(value, str):
            raise TypeError("not a string")
        if _source_type(schema) in _DECIMAL_SOURCE_TYPES:
            return _decimal_text(value)
        if _JAVA_ARRAY_NAME.match(value):
            raise ValueDecodeError(
                f"{value!r} is the name of a Java array, not a value: a row of a multi-dimensional array",
                fix=_MULTI_DIM_FIX,
            )
        return value
    raise ValueDecodeError(f"unknown Connect schema type {kind!r}")


def _strict_int(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{value!r} is not an integer")
    return value


def _source_type(schema: Schema) -> str:
    return str((schema.get("parameters") or {}).get(SOURCE_TYPE_PARAM, "")).upper()


def _decimal_text(text: str) -> Decimal:
    # Debezium sends plain digits (money too: it strips the C locale's "$" and commas, and pre-flight
    # refuses money under other lc_monetary settings); anything else is refused rather than guessed
    # at, since "1,5" may mean 1.5 or 15.
    special = _DECIMAL_SPECIALS.get(text)
    return special if special is not None else Decimal(text)


def _raw_bytes(value: Any) -> bytes:
    """A Connect bytes value: raw from Avro, base64 text from JsonConverter."""
    if isinstance(value, bytes):
        return value
    return base64.b64decode(value, validate=True)


def _unscaled(raw: Any) -> int:
    return int.from_bytes(_raw_bytes(raw), "big", signed=True)


def _connect_decimal(schema: Schema, value: Any) -> Decimal:
    scale = int((schema.get("parameters") or {})["scale"])
    if isinstance(value, (int, float, str)) and not _looks_base64_bytes(schema, value):
        return Decimal(str(value))  # JsonConverter decimal.format=NUMERIC
    return Decimal(_unscaled(value)).scaleb(-scale)


def _looks_base64_bytes(schema: Schema, value: Any) -> bool:
    return schema.get("type") == "bytes" and isinstance(value, str)


def _variable_scale_decimal(_schema: Schema, value: Any) -> Decimal:
    return Decimal(_unscaled(value["value"])).scaleb(-int(value["scale"]))


def _zoned_timestamp(_schema: Schema, value: Any) -> datetime:
    moment = datetime.fromisoformat(value)
    if moment.tzinfo is None:
        raise ValueError("ZonedTimestamp without an offset")
    return moment


def _zoned_time(_schema: Schema, value: Any) -> time:
    text = value[:-1] + "+00:00" if value.endswith("Z") else value
    parsed = time.fromisoformat(text)
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)


def _micro_time(_schema: Schema, value: Any) -> time:
    micros = _strict_int(value)
    hours, rest = divmod(micros, 3_600_000_000)
    minutes, rest = divmod(rest, 60_000_000)
    seconds, micro = divmod(rest, 1_000_000)
    return time(hours, minutes, seconds, micro)


def _bits(schema: Schema, value: Any) -> str:
    """bit(n) as Postgres prints it ('1000'); Debezium sends the bits as a little-endian integer.

    The integer has no leading zeros, so only a fixed-length bit(n) can be padded back exactly. For bit
    varying the length is known only when the value fills the declared maximum; otherwise it is refused
    (never padded to the maximum, which for an unbounded column is 2^31 - 1).
    """
    number = int.from_bytes(_raw_bytes(value), "little")
    declared = int((schema.get("parameters") or {})["length"])
    if number.bit_length() > declared:
        raise ValueError(f"{number.bit_length()} bits do not fit bit({declared})")
    if _source_type(schema) == "BIT" or number.bit_length() == declared:
        return format(number, f"0{declared}b")
    raise ValueDecodeError(f"bit varying({declared}) value {number:b} without its length", fix=_VARBIT_FIX)


def _enum_set(_schema: Schema, value: Any) -> tuple[str, ...]:
    return tuple(v for v in str(value).split(",") if v)


_Decoder = Callable[[Schema, Any], Any]
_BY_NAME: dict[str, _Decoder] = {
    "io.debezium.time.Date": lambda _s, v: _EPOCH_DATE + timedelta(days=_strict_int(v)),
    "org.apache.kafka.connect.data.Date": lambda _s, v: _EPOCH_DATE + timedelta(days=_strict_int(v)),
    "io.debezium.time.Time": lambda s, v: _micro_time(s, _strict_int(v) * 1000),
    "io.debezium.time.MicroTime": _micro_time,
    "io.debezium.time.NanoTime": lambda s, v: _micro_time(s, _strict_int(v) // 1000),
    "io.debezium.time.Timestamp": lambda _s, v: _EPOCH + timedelta(milliseconds=_strict_int(v)),
    "io.debezium.time.MicroTimestamp": lambda _s, v: _EPOCH + timedelta(microseconds=_strict_int(v)),
    "io.debezium.time.NanoTimestamp": lambda _s, v: _EPOCH + timedelta(microseconds=_strict_int(v) // 1000),
    "org.apache.kafka.connect.data.Timestamp": lambda _s, v: _EPOCH + timedelta(milliseconds=_strict_int(v)),
    "io.debezium.time.ZonedTimestamp": _zoned_timestamp,
    "io.debezium.time.ZonedTime": _zoned_time,
    "io.debezium.time.MicroDuration": lambda _s, v: timedelta(microseconds=_strict_int(v)),
    "io.debezium.time.Interval": lambda _s, v: Interval.parse_iso(v),
    "org.apache.kafka.connect.data.Decimal": _connect_decimal,
    "io.debezium.data.VariableScaleDecimal": _variable_scale_decimal,
    "io.debezium.data.Uuid": lambda _s, v: UUID(v),
    "io.debezium.data.Json": lambda _s, v: json.loads(v),
    "io.debezium.data.Enum": lambda _s, v: str(v),
    "io.debezium.data.EnumSet": _enum_set,
    "io.debezium.data.Xml": lambda _s, v: str(v),
    "io.debezium.data.Bits": _bits,
}
# Array elements by source type (their schemas carry no semantic name): the scalar decoders above.
_ELEMENT_NAMES = {
    "DATE": "io.debezium.time.Date",
    "TIME": "io.debezium.time.MicroTime",
    "TIMETZ": "io.debezium.time.ZonedTime",
    "TIMESTAMP": "io.debezium.time.MicroTimestamp",
    "TIMESTAMPTZ": "io.debezium.time.ZonedTimestamp",
    "UUID": "io.debezium.data.Uuid",
    "JSON": "io.debezium.data.Json",
    "JSONB": "io.debezium.data.Json",
    "HSTORE": "io.debezium.data.Json",
}
