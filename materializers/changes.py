"""The one row shape every decoder produces and every view consumes.

A *change* says: entity `entity` reached source position `position` (fixed-width string, see
positions.py) through `op`:
- "upsert": the full new row (CDC create/update/snapshot read);
- "delete": the entity is gone (its position is kept by the views so older records cannot resurrect it);
- "patch":  one event of a fold: set `set_fields`, remove `del_fields` (applies only on version n+1).
Data columns (per materializer) follow. `src_*` columns carry the Kafka coordinates and original bytes
so a change a view refuses can still be dead-lettered with everything needed to replay it.
An *error* row is a record that could not be decoded: original key/value bytes, coordinates, reason.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

Op = Literal["upsert", "delete", "patch"]
OPS: tuple[Op, ...] = ("upsert", "delete", "patch")

CHANGE_COLUMNS = (
    "entity",
    "position",
    "op",
    "set_fields",
    "del_fields",
    "event_ts",
    "src_topic",
    "src_partition",
    "src_offset",
    "src_key",
    "src_value",
)
SOURCE_COLUMNS = ("key", "value", "topic", "partition", "offset")
ERROR_COLUMNS = (*SOURCE_COLUMNS, "error")


def source_coordinates() -> list[Column]:
    """The raw record's coordinates and bytes as the `src_*` columns of a change."""
    from pyspark.sql import functions as F

    return [F.col(c).alias(f"src_{c}") for c in ("topic", "partition", "offset", "key", "value")]


def errors_of(changes: DataFrame, error: Column) -> DataFrame:
    """Error rows (ERROR_COLUMNS) for changes that turned out not to be applicable."""
    from pyspark.sql import functions as F

    return changes.select(*[F.col(f"src_{c}").alias(c) for c in SOURCE_COLUMNS], error.alias("error"))
