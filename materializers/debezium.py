"""Decode Debezium Postgres change events (JsonConverter WITH schemas) in the JVM with `from_json`.

Assumptions: value = {"schema": ..., "payload": {"before", "after", "source": {"lsn", "ts_ms", ...},
"op", "ts_ms"}}, key = {"schema": ..., "payload": {<pk>: ...}}; a delete is followed by a tombstone
(null value), which carries nothing a view needs and is dropped (not dead-lettered). Snapshot reads
(op "r") are upserts. The position is `source.lsn`: every change in the WAL has its own LSN, and a
row's later change always has a higher one. Numeric columns arrive as strings
(decimal.handling.mode=string) so no precision is lost on the way to the views. A snapshot read and
the first streamed change of a row can share an LSN; see `positions.cdc` for the tie-break.
Unchanged TOAST values: with REPLICA IDENTITY DEFAULT an update that leaves a large (TOASTed) column
alone reaches Debezium without it, and the connector puts its `unavailable.value.placeholder`
(default `__debezium_unavailable_value`) in `after`. Such a column is named in `keep_fields`, left out
of `set_fields` and null in its data column, so the placeholder never reaches a view. Detection compares
the column's value as a string with the placeholder: text-like columns (text, varchar, json, numeric as
string) and bytea read as `binary` (Spark decodes the base64); an array column holding the placeholder
is not detected.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from cdc.values import DEFAULT_UNAVAILABLE_PLACEHOLDER
from materializers import positions
from materializers.changes import SOURCE_COLUMNS, source_coordinates

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

ROW_OPS = ("c", "u", "r")


def value_schema(data_ddl: str) -> str:
    row = f"struct<{data_ddl}>"
    return (
        f"payload struct<before: {row}, after: {row}, "
        "source: struct<lsn: long, ts_ms: long>, op: string, ts_ms: long>"
    )


def key_schema(key_column: str) -> str:
    return f"payload struct<`{key_column}`: string>"


def _error(payload: Column, entity: Column) -> Column:
    from pyspark.sql import functions as F

    op = payload["op"]
    return (
        F.when(payload.isNull() | op.isNull(), F.lit("value is not a Debezium JSON envelope with schemas"))
        .when(~op.isin("c", "u", "r", "d"), F.concat(F.lit("unsupported Debezium op "), op))
        .when(payload["source"]["lsn"].isNull(), F.lit("source.lsn is missing"))
        .when(entity.isNull(), F.lit("the record key has no primary-key payload"))
        .when(op.isin(*ROW_OPS) & payload["after"].isNull(), F.lit("'after' is missing for a row change"))
    )


@dataclass(slots=True)
class Decoder:
    """A job's Debezium decoder (a `Transform`): the decoded frame (see changes.py) of raw Kafka rows
    (key, value, topic, partition, offset, ...).

    The Spark expressions are built on the first batch and reused: they name columns only, so they
    bind to every batch alike. `unavailable_placeholder` must match the connector's
    `unavailable.value.placeholder`.
    """

    data_columns: tuple[str, ...]
    data_ddl: str
    key_column: str
    unavailable_placeholder: str = DEFAULT_UNAVAILABLE_PLACEHOLDER
    _built: tuple[Column, list[Column], list[Column]] | None = field(default=None, init=False, repr=False)

    def __call__(self, df: DataFrame, _schemas: object = None) -> DataFrame:
        if self._built is None:
            self._built = self._build()
        present, parsed, projected = self._built
        return df.where(present).select(*parsed).select(*projected)

    def _build(self) -> tuple[Column, list[Column], list[Column]]:
        from pyspark.sql import functions as F

        data_columns, key_column = self.data_columns, self.key_column
        parsed = [
            *[F.col(c) for c in SOURCE_COLUMNS],
            F.from_json(F.col("value").cast("string"), value_schema(self.data_ddl))["payload"].alias("p"),
            F.from_json(F.col("key").cast("string"), key_schema(key_column))["payload"][key_column].alias(
                "entity"
            ),
        ]
        deleted = F.col("p.op") == "d"
        # null for a delete (no `after`), so a delete keeps nothing.
        unavailable = {
            c: F.col(f"p.after.`{c}`").cast("string") == self.unavailable_placeholder for c in data_columns
        }
        carried = {
            c: F.when(deleted | unavailable[c], F.lit(None)).otherwise(F.col(f"p.after.`{c}`"))
            for c in data_columns
        }
        # No lambdas (filter/map_filter): Spark interprets them row by row, which cost a fifth of the
        # decoding. array_except drops the nulls; a null in set_fields means "not set" (changes.py).
        keep = F.array_except(
            F.array(*[F.when(unavailable[c], F.lit(c)) for c in data_columns]).cast("array<string>"),
            F.array(F.lit(None).cast("string")),
        )
        fields = F.map_from_arrays(
            F.array(*[F.lit(c) for c in data_columns]),
            F.array(*[carried[c].cast("string") for c in data_columns]),
        )
        projected = [
            F.col("entity"),
            # == positions.cdc(lsn, snapshot=op == "r")
            F.concat(
                F.lpad(F.col("p.source.lsn").cast("string"), positions.WIDTH, "0"),
                F.when(F.col("p.op") == "r", F.lit("0")).otherwise(F.lit("1")),
            ).alias("position"),
            F.when(deleted, F.lit("delete")).otherwise(F.lit("upsert")).alias("op"),
            F.when(deleted, F.create_map().cast("map<string,string>")).otherwise(fields).alias("set_fields"),
            F.array().cast("array<string>").alias("del_fields"),
            keep.alias("keep_fields"),
            F.timestamp_millis(F.coalesce(F.col("p.source.ts_ms"), F.col("p.ts_ms"))).alias("event_ts"),
            *source_coordinates(_error(F.col("p"), F.col("entity"))),
            *[carried[c].alias(c) for c in data_columns],
        ]
        return F.col("value").isNotNull(), parsed, projected
