"""The one row shape every decoder produces and every view consumes.

A *change* says: entity `entity` reached source position `position` (fixed-width string, see
positions.py) through `op`:
- "upsert": the full new row (CDC create/update/snapshot read); a null value in `set_fields` means the
  field is not set (a null column, or a kept one), so a decoder needs no per-row map filtering;
- "delete": the entity is gone (its position is kept by the views so older records cannot resurrect it);
- "patch":  one event of a fold: set `set_fields`, remove `del_fields` (applies only on version n+1).
`keep_fields` (array<string>) names the data fields the change does not carry because the source did
not send them — Debezium's unchanged TOAST values (see debezium.py). They are absent from `set_fields`
and null in the data columns; a view keeps the value it already has for them: the value of the newest
change that did carry the field (`latest_per_entity`). Event decoders always leave it empty.
Data columns (per materializer) follow, then `src_*` columns with the Kafka coordinates.
A decoder returns ONE *decoded* frame: every record once, as a change plus an `error` column (null for
a change, the reason for a record that could not be decoded or applied). Error rows also carry the
original key/value bytes in `src_key`/`src_value` (null on changes: shipped with every change they
would dominate its size), so a dead letter holds everything needed to replay it. One frame means the
batch is decoded once: a job persists it and `split`s it, where separate change and error frames each
re-ran the decoding (and Spark pushes a filter below the decoder's projection, copying it into the
filter once per reference).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import TYPE_CHECKING, Literal, NamedTuple

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
    "keep_fields",
    "event_ts",
    "src_topic",
    "src_partition",
    "src_offset",
)
SOURCE_COLUMNS = ("key", "value", "topic", "partition", "offset")
COORDINATES = ("topic", "partition", "offset")  # a Kafka record's place


def source_coordinates(error: Column) -> list[Column]:
    """The raw record's coordinates as `src_*` columns, and its bytes where `error` is not null."""
    from pyspark.sql import functions as F

    failed = error.isNotNull()
    return [
        *[F.col(c).alias(f"src_{c}") for c in COORDINATES],
        *[F.when(failed, F.col(c)).alias(f"src_{c}") for c in ("key", "value")],
        error.alias("error"),
    ]


def split(decoded: DataFrame) -> tuple[DataFrame, DataFrame]:
    """(changes, errors) of a decoded frame without the records' bytes (`Job._kept`): changes keep
    CHANGE_COLUMNS and the data columns, errors are (topic, partition, offset, error) rows (their
    bytes are read back for a dead letter)."""
    from pyspark.sql import functions as F

    failed = F.col("error").isNotNull()
    errors = decoded.where(failed).select(*[F.col(f"src_{c}").alias(c) for c in COORDINATES], "error")
    return decoded.where(~failed).drop("error"), errors


def latest_per_entity(
    changes: DataFrame, extra: tuple[str, ...], data: tuple[str, ...], *, unique: bool = False
) -> DataFrame:
    """One row per entity: its newest change's `position`, `op` and `extra` columns, and for each `data`
    column the newest value a change *carried* (a change whose `keep_fields` does not name the column).

    `carried_at` is a struct with one field per data column: the position of the change whose value was
    taken, null when no change of the batch carried the column (its value is null then). A view keeps
    the value it holds when the column was not carried, or was carried at a position not newer than the
    view's own (a late record): see `keeps`.
    `unique`: the caller knows no entity changed twice in `changes` (a snapshot's backfill), so
    each change is its entity's newest and the rows are projected in place, without the aggregation's
    shuffle of every column (a large share of a backfill batch's time).
    """
    from pyspark.sql import functions as F

    def carried(column: str) -> Column:
        return F.when(~F.array_contains("keep_fields", F.lit(column)), F.col("position"))

    if unique:
        return changes.select(
            "entity",
            "position",
            "op",
            *extra,
            *[F.when(carried(c).isNotNull(), F.col(f"`{c}`")).alias(c) for c in data],
            F.struct(*[carried(c).alias(c) for c in data]).alias("carried_at"),
        )
    return (
        changes.groupBy("entity")
        .agg(
            F.max_by(F.struct("position", "op", *extra), F.col("position")).alias("_latest"),
            # max_by ignores rows whose ordering is null (checked on Spark 4.2), so a change that kept
            # the column never supplies its value; max ignores them too.
            *[F.max_by(F.col(f"`{c}`"), carried(c)).alias(c) for c in data],
            F.struct(*[F.max(carried(c)).alias(c) for c in data]).alias("carried_at"),
        )
        .select("entity", "_latest.*", *data, "carried_at")
    )


class Newest(NamedTuple):
    """Row indices of a batch's changes, one per entity (same order in every list): `rows` its newest
    change; `carriers[column]` the newest change that carried `column` (None: none carried it)."""

    rows: list[int]
    carriers: dict[str, list[int | None]]


def newest_indices(
    entities: Sequence[str],
    positions: Sequence[str],
    keep_fields: Sequence[Collection[str] | None],
    data: tuple[str, ...],
) -> Newest:
    """`latest_per_entity` over columns held in the driver (pure): which row each entity's newest
    change and each data column's newest carried value come from. Ties keep the first row."""
    newest: dict[str, int] = {}
    carriers: dict[str, dict[str, int]] = {c: {} for c in data}
    for i, (entity, position, kept) in enumerate(zip(entities, positions, keep_fields, strict=True)):
        held = newest.get(entity)
        if held is None or position > positions[held]:
            newest[entity] = i
        for column in data:
            if kept and column in kept:
                continue
            held = carriers[column].get(entity)
            if held is None or position > positions[held]:
                carriers[column][entity] = i
    order = list(newest)
    return Newest([newest[e] for e in order], {c: [carriers[c].get(e) for e in order] for c in data})


def keeps(carried_at: str | None, held_at: str | None) -> bool:
    """Whether a view keeps the value it holds (as of position `held_at`, None = no row) rather than
    take the batch's value carried at `carried_at` (None = not carried)."""
    return held_at is not None and (carried_at is None or carried_at <= held_at)


def unique_entities(changes: DataFrame) -> bool:
    """Whether no entity appears twice in `changes` (one narrow aggregation: entity keys only)."""
    return changes.groupBy("entity").count().where("count > 1").isEmpty()
