"""Decode event-store records in the JVM with `from_avro`, picking each writer schema by registry id.

Per micro-batch (driver): the distinct schema ids in the batch are collected (a tiny aggregate), each
id's writer schema is fetched once from the registry (cached for the job's life: a registry id never
changes meaning), and the batch is decoded with one `from_avro` per id — no Python per record. Every
wanted field is projected into one wide row (null where an event type lacks it), so all event types
meet in one DataFrame. Records with a broken envelope, an id the registry does not know or a body
that does not decode become error rows (dead letters), never exceptions.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import httpx

from materializers import event_shape, positions
from materializers.changes import ERROR_COLUMNS, SOURCE_COLUMNS, source_coordinates
from materializers.errors import SourceUnavailable

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


@dataclass(slots=True)
class WriterSchemas:
    """Writer schemas by registry id, from a Confluent-compatible API (Apicurio's ccompat/v7)."""

    url: str
    _cache: dict[int, str | None] = field(default_factory=dict)

    def get(self, schema_id: int) -> str | None:
        """The schema text, or None when the registry answers 404 (the record is dead-lettered)."""
        if schema_id not in self._cache:
            try:
                reply = httpx.get(f"{self.url.rstrip('/')}/schemas/ids/{schema_id}", timeout=10.0)
            except httpx.HTTPError as exc:
                raise SourceUnavailable(
                    f"schema registry at {self.url} is unreachable ({exc}); start it or fix SCHEMA_REGISTRY_URL"
                ) from exc
            if reply.status_code == 404:
                self._cache[schema_id] = None
            elif reply.status_code != 200:
                raise SourceUnavailable(
                    f"schema registry at {self.url} answered {reply.status_code} for id {schema_id}; check the registry"
                )
            else:
                self._cache[schema_id] = str(reply.json()["schema"])
        return self._cache[schema_id]


def field_names(schema_text: str) -> set[str]:
    doc = json.loads(schema_text)
    return {f["name"] for f in doc.get("fields", [])} if isinstance(doc, dict) else set()


def decode(
    df: DataFrame, *, schemas: WriterSchemas, wanted: Mapping[str, str]
) -> tuple[DataFrame, DataFrame]:
    """(events, errors): events have entity, position, event_type, event_ts, src_*, and the wanted fields."""
    from pyspark.sql import functions as F
    from pyspark.sql.avro.functions import from_avro

    base = df.where(F.col("value").isNotNull()).select(
        *SOURCE_COLUMNS,
        "timestamp",
        event_shape.stream_id().alias("entity"),
        event_shape.stream_version().alias("version"),
        event_shape.event_type().alias("event_type"),
        event_shape.has_wire_header().alias("framed"),
        event_shape.schema_id().alias("schema_id"),
    )
    envelope_error = (
        F.when(F.col("entity").isNull(), F.lit("record key (stream id) is missing"))
        .when(
            F.col("version").isNull() | (F.col("version") < 1),
            F.lit("header stream-version is missing or not a positive integer"),
        )
        .when(F.col("event_type").isNull(), F.lit("header event-type is missing"))
        .when(
            ~F.col("framed"), F.lit("value is not in Confluent wire format (magic byte 0 + 4-byte schema id)")
        )
    )
    base = base.withColumn("error", envelope_error)
    errors = [base.where(F.col("error").isNotNull())]
    good = base.where(F.col("error").isNull())
    decoded = []
    for row in good.select("schema_id").distinct().collect():
        sid = int(row["schema_id"])
        subset = good.where(F.col("schema_id") == sid)
        text = schemas.get(sid)
        if text is None:
            errors.append(subset.withColumn("error", F.lit(f"schema id {sid} is not in the registry")))
            continue
        present = field_names(text)
        avro = subset.withColumn("e", from_avro(event_shape.avro_body(), text, {"mode": "PERMISSIVE"}))
        errors.append(
            avro.where(F.col("e").isNull())
            .drop("e")
            .withColumn("error", F.lit(f"Avro body does not decode with writer schema id {sid}"))
        )
        cols = [
            (F.col(f"e.`{n}`") if n in present else F.lit(None)).cast(t).alias(n) for n, t in wanted.items()
        ]
        decoded.append(avro.where(F.col("e").isNotNull()).select(*base.columns, *cols))
    error_df = errors[0]
    for extra in errors[1:]:
        error_df = error_df.unionByName(extra)
    error_df = error_df.select(*ERROR_COLUMNS)
    if not decoded:
        empty = good.select(*good.columns, *[F.lit(None).cast(t).alias(n) for n, t in wanted.items()]).limit(
            0
        )
        decoded.append(empty)
    events = decoded[0]
    for extra in decoded[1:]:
        events = events.unionByName(extra)
    events = events.select(
        "entity",
        F.lpad(F.col("version").cast("string"), positions.WIDTH, "0").alias("position"),
        "event_type",
        F.col("timestamp").alias("event_ts"),
        *source_coordinates(),
        *wanted,
    )
    return events, error_df
