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

import pyarrow as pa
import pyarrow.compute as pc

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
    """`newest_of` over columns held as Python lists (pure)."""
    return newest_of(
        pa.array(entities, pa.string()),
        pa.array(positions, pa.string()),
        pa.array([list(k) if k else None for k in keep_fields], pa.list_(pa.string())),
        data,
    )


class EntityOrder(NamedTuple):
    """A batch's rows sorted by (entity, position descending), ties in row order: `rows` the row
    indices, `entities` and `positions` the columns along them."""

    rows: pa.Array
    entities: pa.Array
    positions: pa.Array


def entity_order(entities: pa.Array | pa.ChunkedArray, positions: pa.Array | pa.ChunkedArray) -> EntityOrder:
    """The batch's `EntityOrder` (pure): one sort that both the fold and the history's dedup read."""
    entities, positions = _whole(entities), _whole(positions)
    rows = pc.sort_indices(
        pa.table({"entity": entities, "position": positions}),
        [("entity", "ascending"), ("position", "descending")],  # a stable sort: ties keep row order
    )
    return EntityOrder(rows, entities.take(rows), positions.take(rows))


def first_deliveries(order: EntityOrder) -> pa.Array | None:
    """The rows to keep when a change (entity, position) was delivered more than once: each one's
    first row, in row order; None when none was (pure). Equal pairs are adjacent in `order`, the
    first of them there is the first in the batch."""
    n = len(order.rows)
    if n < 2:
        return None
    again = pc.and_(
        pc.equal(order.entities.slice(1), order.entities.slice(0, n - 1)),
        pc.equal(order.positions.slice(1), order.positions.slice(0, n - 1)),
    )
    if not pc.any(again).as_py():
        return None
    return order.rows.filter(pc.invert(pa.concat_arrays([pa.array([False]), again]))).sort()


def newest_of(
    entities: pa.Array | pa.ChunkedArray,
    positions: pa.Array | pa.ChunkedArray,
    keep_fields: pa.Array | pa.ChunkedArray,
    data: tuple[str, ...],
    order: EntityOrder | None = None,
) -> Newest:
    """`latest_per_entity` over columns held in the driver as Arrow (pure): which row each entity's
    newest change and each data column's newest carried value come from, entities in ascending
    order. Ties keep the first row. Sorted once by (entity, position descending) in Arrow (`order`,
    where the caller has it), then each group's first row: a per-row Python loop was a large share of
    a backfill batch's driver-side work."""
    entities, keep_fields = _whole(entities), _whole(keep_fields)
    order = order if order is not None else entity_order(entities, positions)
    rows, held = _group_firsts(order.entities, order.rows)
    newest: list[int] = rows.to_pylist()
    carriers: dict[str, list[int | None]] = {}
    skipped = _kept_rows(keep_fields, data)
    for column in data:
        if column not in skipped:  # every change carried it: the newest change is its carrier,
            carriers[column] = newest  # type: ignore[assignment]  # the same list (current_rows tests it)
            continue
        carrying = order.rows.filter(pc.invert(pc.is_in(order.rows, value_set=skipped[column])))
        firsts, carried = _group_firsts(entities.take(carrying), carrying)
        carriers[column] = firsts.take(pc.index_in(held, value_set=carried)).to_pylist()
    return Newest(newest, carriers)


def _group_firsts(ranked: pa.Array, order: pa.Array) -> tuple[pa.Array, pa.Array]:
    """(row, entity) of the first row of each run of equal entities along `order` (pure); `ranked`
    holds the entities along it."""
    if len(ranked) == 0:
        return order, ranked
    starts = pa.concat_arrays(
        [pa.array([True]), pc.not_equal(ranked.slice(1), ranked.slice(0, len(ranked) - 1))]
    )
    return order.filter(starts), ranked.filter(starts)


def _whole(column: pa.Array | pa.ChunkedArray) -> pa.Array:
    """A table's column as one array (a collected batch holds one chunk per Arrow batch)."""
    return column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column


def _kept_rows(keep_fields: pa.Array, data: tuple[str, ...]) -> dict[str, pa.Array]:
    """Per data column named in some change's `keep_fields`, the rows that did not carry it (pure)."""
    named = pc.list_flatten(keep_fields)
    if len(named) == 0:
        return {}
    rows = pc.list_parent_indices(keep_fields)
    return {c: rows.filter(pc.equal(named, c)) for c in data if pc.any(pc.equal(named, c)).as_py()}


def keeps(carried_at: str | None, held_at: str | None) -> bool:
    """Whether a view keeps the value it holds (as of position `held_at`, None = no row) rather than
    take the batch's value carried at `carried_at` (None = not carried)."""
    return held_at is not None and (carried_at is None or carried_at <= held_at)


def unique_entities(changes: DataFrame) -> bool:
    """Whether no entity appears twice in `changes` (one narrow aggregation: entity keys only)."""
    return changes.groupBy("entity").count().where("count > 1").isEmpty()
