"""The ONE place that knows how event-store records look on Kafka (align here when eventstore lands).

Assumed shape (mirrors eventstore/serde.py as of this writing):
- key   = the stream id, UTF-8;
- value = Confluent wire format: magic byte 0, a 4-byte big-endian registry schema id, then the
  schemaless Avro body written with that schema;
- headers (UTF-8 strings): `event-type` (e.g. "order.line_added"), `stream-version` (1, 2, ... per
  stream), `stream-id`; others are ignored here.
The Spark side only uses the column expressions below; `encode_record` builds such a record in Python
(for tests and for producing sample data before the event store is available).
"""

from __future__ import annotations

import io
import struct
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import Column

MAGIC = 0
HEADER_SIZE = 5
# The `schema_id` a decoder gives a record without the wire header that it was built not to read (a
# JSON record where it reads Avro only: debezium.DebeziumDecoder): the job learns from it as from an id.
UNFRAMED_ID = -1
H_TYPE = "event-type"
H_VERSION = "stream-version"
H_STREAM = "stream-id"


def encode_record(
    *, stream_id: str, version: int, event_type: str, schema_id: int, schema: Any, data: Mapping[str, Any]
) -> tuple[bytes, bytes, list[tuple[str, bytes]]]:
    """(key, value, headers) exactly as the event store writes them; `schema` is a parsed fastavro schema."""
    from fastavro import schemaless_writer

    body = io.BytesIO()
    schemaless_writer(body, schema, dict(data))
    value = struct.pack(">bI", MAGIC, schema_id) + body.getvalue()
    headers = [
        (H_TYPE, event_type.encode()),
        (H_VERSION, str(version).encode()),
        (H_STREAM, stream_id.encode()),
    ]
    return stream_id.encode(), value, headers


def header(name: str) -> Column:
    """The UTF-8 value of the first Kafka header `name` (null if absent), from the source's `headers`
    column. Found by position rather than a lambda `filter`: Spark cannot compile higher-order
    functions, and one in a projection keeps the whole stage out of whole-stage code generation,
    several times slower for a large decode."""
    from pyspark.sql import functions as F

    headers = F.col("headers")
    at = F.array_position(headers.getField("key"), F.lit(name))  # 1-based; 0 when absent
    return F.get(headers.getField("value"), (at - 1).cast("int")).cast("string")  # null outside


def stream_id() -> Column:
    from pyspark.sql import functions as F

    return F.col("key").cast("string")


def stream_version() -> Column:
    return header(H_VERSION).cast("long")


def event_type() -> Column:
    return header(H_TYPE)


def has_wire_header(column: str = "value") -> Column:
    """Whether the bytes in `column` start with the Confluent framing (magic byte + id, then a body)."""
    from pyspark.sql import functions as F

    return (F.length(column) > HEADER_SIZE) & (F.substring(column, 1, 1) == F.lit(bytes([MAGIC])))


def schema_id_bytes(column: str = "value") -> Column:
    """The 4 bytes of the registry id after the magic byte (binary; compare with the id's bytes)."""
    from pyspark.sql import functions as F

    return F.substring(column, 2, 4)


def schema_id_literal(schema_id: int) -> Column:
    """A registry id as the framing's 4 big-endian bytes, a binary literal (`schema_id_bytes` equals it)."""
    from pyspark.sql import functions as F

    return F.lit(bytearray(schema_id.to_bytes(4, "big")))


def schema_id(column: str = "value") -> Column:
    """The 4-byte big-endian registry id after the magic byte, as a long."""
    from pyspark.sql import functions as F

    return F.conv(F.hex(F.substring(column, 2, 4)), 16, 10).cast("long")


def avro_body(column: str = "value") -> Column:
    from pyspark.sql import functions as F

    return F.expr(f"substring(`{column}`, {HEADER_SIZE + 1}, length(`{column}`) - {HEADER_SIZE})")
