"""The warehouse's small-batch writes: a batch held in the driver as Arrow, written with delta-rs.

A streaming batch of a few thousand rows cost Spark seconds of fixed work on 2 cores (planning and
scheduling the history append, the MERGE's two jobs, Delta's snapshot and commit), whatever its size;
delta-rs appends and MERGEs the same rows in a small fraction of that (bench/results/history.md).
Both engines write the same tables through the Delta log's optimistic commits, and both record the
batch as a `txn` action (app id, batch id) in the commit that writes it: a batch either engine
committed is skipped by either (`DriverTable.committed`), so a re-run after a crash never writes
twice.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, NamedTuple

import pyarrow as pa

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from deltalake import CommitProperties, DeltaTable
    from pyspark.sql import SparkSession


log = logging.getLogger(__name__)


class Bounds(NamedTuple):
    """A batch's key ranges and event dates: which history files can hold its rows."""

    low_entity: str | None
    high_entity: str | None
    low: str | None  # position
    high: str | None
    dates: list[object]


@dataclass(slots=True)
class DriverTable:
    """One Delta table as the driver writes it: its log is read once, then only the commits added
    since (opening a table replays its whole log, and a batch opened each table several times).
    A batch brings it up to date once, in `committed`; its later steps use that version: on a local
    disk each update (and each commit) lists the log's whole directory, a cost that grows with every
    file in it, and a table committed every quarter second gains some 345k a day until its log
    retention expires them (README, the warehouse's limits)."""

    path: str
    _table: DeltaTable | None = field(default=None, init=False, repr=False)

    def latest(self) -> DeltaTable:
        from deltalake import DeltaTable

        if self._table is None:
            self._table = DeltaTable(self.path)
        else:
            self._table.update_incremental()
        return self._table

    def _held(self) -> DeltaTable:
        """The table as of the last `latest()` (or opened now)."""
        return self._table if self._table is not None else self.latest()

    def committed(self, app_id: str, batch_id: int) -> bool:
        """Whether the table holds a commit of batch `batch_id` (or a later one) of writer `app_id`."""
        version = self.latest().transaction_version(app_id)
        return version is not None and version >= batch_id

    def append(self, rows: pa.Table, app_id: str, batch_id: int) -> None:
        from deltalake import write_deltalake

        write_deltalake(self._held(), rows, mode="append", commit_properties=batch_commit(app_id, batch_id))

    def merge(
        self,
        source: pa.Table,
        app_id: str,
        batch_id: int,
        *,
        updates: Mapping[str, str],
        inserted: Sequence[str],
    ) -> None:
        """MERGE `source` (one row per entity) into a current table: a matched row is updated where
        the source's position is newer, an unmatched entity is inserted."""
        (
            self._held()
            .merge(
                source,
                "t.entity = s.entity",
                source_alias="s",
                target_alias="t",
                commit_properties=batch_commit(app_id, batch_id),
            )
            .when_matched_update(updates=dict(updates), predicate="s.position > t.position")
            .when_not_matched_insert(updates={quoted(c): f"s.{quoted(c)}" for c in inserted})
            .execute()
        )

    def compact(self) -> None:
        """Bin-pack the table's small files (no commit when there is nothing to compact), from the
        driver: Spark's OPTIMIZE stalled the stream on 2 busy cores. Another writer's commit that
        removed files it read (a conflict) skips this round: the next one packs them."""
        from deltalake.exceptions import CommitFailedError

        try:
            self.latest().optimize.compact()
        except CommitFailedError as exc:
            log.info("compaction of %s skipped this round: %s", self.path, exc)

    def written(self, bounds: Bounds) -> pa.Table:
        """(entity, position) pairs of a history table inside the batch's `bounds`: its dates
        (partitions) and, there, the files whose statistics overlap its entity and position ranges."""
        from deltalake import QueryBuilder

        if not bounds.dates:
            return pa.table({"entity": pa.array([], pa.string()), "position": pa.array([], pa.string())})
        dates = ", ".join(f"DATE {literal(str(d))}" for d in bounds.dates)
        sql = (
            f"SELECT entity, position FROM h WHERE event_date IN ({dates}) "
            f"AND entity BETWEEN {literal(bounds.low_entity)} AND {literal(bounds.high_entity)} "
            f"AND position BETWEEN {literal(bounds.low)} AND {literal(bounds.high)}"
        )
        return pa.table(QueryBuilder().register("h", self._held()).execute(sql).read_all())


# Spark types whose Delta column delta-rs writes exactly as Spark's CREATE TABLE does (same schema
# string, protocol 1/2): checked against delta-spark 4.4.0's log.
_SAME_IN_BOTH = (
    "string", "boolean", "byte", "short", "integer", "long", "float", "double", "decimal", "date",
    "timestamp", "binary",
)  # fmt: skip


def create_table(spark: SparkSession, path: str, ddl: str, partition_by: Sequence[str] = ()) -> None:
    """A Delta table of the columns `ddl` declares at `path`, unless one is there already.

    delta-rs writes the table's first commit in milliseconds; Spark's CREATE TABLE took seconds on a
    cold driver (Delta's classes loaded, the statement analysed), before a fresh job's first batch
    could start. The columns are Spark's own parse of `ddl`, so both logs are the same; a type outside
    `_SAME_IN_BOTH` (TIMESTAMP_NTZ, VARCHAR(n), intervals, nested types, ...) or a column carrying
    metadata goes through Spark's CREATE TABLE, which knows them all."""
    from deltalake import DeltaTable
    from pyspark.sql.pandas.types import to_arrow_schema
    from pyspark.sql.types import DataType, StructType

    columns = DataType.fromDDL(ddl)
    if isinstance(columns, StructType) and all(
        f.dataType.typeName() in _SAME_IN_BOTH and not f.metadata for f in columns.fields
    ):
        schema = to_arrow_schema(columns, timezone="UTC")  # Spark's timestamp: UTC instants
        DeltaTable.create(path, schema=schema, partition_by=list(partition_by) or None, mode="ignore")
        return
    partitioned = f" PARTITIONED BY ({', '.join(partition_by)})" if partition_by else ""
    spark.sql(f"CREATE TABLE IF NOT EXISTS delta.`{path}` ({ddl}) USING DELTA{partitioned}")


def batch_commit(app_id: str, batch_id: int) -> CommitProperties:
    """A commit that records batch `batch_id` of writer `app_id` (Delta's `txn` action)."""
    from deltalake import CommitProperties, Transaction

    return CommitProperties(app_transactions=[Transaction(app_id, batch_id)])


def quoted(name: str) -> str:
    """A column name as a DataFusion SQL identifier (case kept)."""
    return '"' + name.replace('"', '""') + '"'


def literal(value: str | None) -> str:
    """A string as a DataFusion SQL literal."""
    return "NULL" if value is None else "'" + value.replace("'", "''") + "'"
