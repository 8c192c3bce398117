"""The built-in stores as `View`s (view.py): how a job reaches the Redis cache, the search index and
the Delta warehouse. Each store's module keeps its own commit order and idempotence; this module only
says, per view, which path a batch takes to it and what its source-of-truth comparison is.

- cache: parallel (its writes run in Redis, from the executors' Python workers on the large path or a
  driver thread on the small one) and single-pass (its own `mapInArrow` refuses a decoder's error rows);
- search: the index's single writer is the driver: a large batch is collected (shared with the
  warehouse when it writes from the driver too), folded to each entity's newest change, committed once;
- warehouse: parallel (its writes run in delta-rs's own threads, which hold no GIL, or in Spark's
  executors): from the driver with delta-rs when a batch has at most `driver_rows` changes, else
  Spark's append and MERGE; compacted every `optimize_every` batches by the engine that wrote the batch.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from materializers.decode.changes import CHANGE_COLUMNS
from materializers.spark.memory import release_freed_memory
from materializers.truth import Difference, Truth, compare
from materializers.view import split_refused
from materializers.views.redis_cache import REJECT_DDL, RedisCache
from materializers.views.search.tantivy import SearchIndex, latest_changes
from materializers.views.warehouse import delta
from materializers.views.warehouse.delta import HISTORY_COLUMNS, DeltaWarehouse

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import SparkSession

    from materializers.view import FrameBatch, Reject, TableBatch

# The cache reads every column of a change but its event time (changes.py).
REDIS_COLUMNS = tuple(c for c in CHANGE_COLUMNS if c != "event_ts")
ERROR_COORDINATES = ("src_topic", "src_partition", "src_offset", "error")


def _rejects(rows: Iterable[Any]) -> list[Reject]:
    """(topic, partition, offset, error) of reject rows: dicts or Spark Rows (REJECT_DDL)."""
    return [(r["topic"], r["partition"], r["offset"], r["error"]) for r in rows]


@dataclass(frozen=True, slots=True)
class CacheView:
    cache: RedisCache
    name: str = "cache"
    parallel: bool = True
    single_pass: bool = True

    def columns(self) -> tuple[str, ...]:
        return REDIS_COLUMNS

    def check(self) -> None:
        self.cache.check()

    def prepare(self, spark: SparkSession) -> None:
        self.cache.check()

    def in_driver(self, rows: int) -> bool:
        return True

    def collects(self, rows: int) -> bool:
        return False  # the executors write it, where Spark read the records

    def apply_table(self, batch: TableBatch) -> list[Reject]:
        """The cache written from the driver, by the function the executors run on their partitions."""
        out = self.cache.apply_arrow(iter(batch.table.select(list(REDIS_COLUMNS)).to_batches()))
        return _rejects(r for part in out for r in part.to_pylist())

    def apply_frame(self, batch: FrameBatch) -> list[Reject]:
        """CDC upserts commute (the Lua position check), so they apply where Spark read them, in offset
        order; a fold's patches arrive partitioned by stream and sorted by version. `changes` may
        still hold the decoder's error rows (the one-pass path): those come back as rejects, unapplied."""
        changes = batch.changes
        columns = [*REDIS_COLUMNS, *(["error"] if "error" in changes.columns else [])]
        return _rejects(changes.select(*columns).mapInArrow(self.cache.apply_arrow, REJECT_DDL).collect())

    def compact(self, spark: SparkSession, rows: int | None) -> None:
        return None

    def verify(self, truth: Truth) -> list[Difference]:
        return compare(self.name, truth.rows, self.cache.entities())


@dataclass(frozen=True, slots=True)
class SearchView:
    index: SearchIndex
    name: str = "search"
    parallel: bool = False
    single_pass: bool = True

    def columns(self) -> tuple[str, ...]:
        return ("entity", "position", "op", "keep_fields", *self.index.text_fields)

    def check(self) -> None:
        return None  # a local directory: `prepare` opens (or creates) it

    def prepare(self, spark: SparkSession) -> None:
        self.index.index()

    def in_driver(self, rows: int) -> bool:
        return True

    def collects(self, rows: int) -> bool:
        return True

    def apply_table(self, batch: TableBatch) -> list[Reject]:
        return self._apply(batch.table.select(list(self.columns())), batch.app_id, batch.batch_id)

    def apply_frame(self, batch: FrameBatch) -> list[Reject]:
        """Every change of the batch comes to the driver (the index's single writer) through Arrow and
        is folded there to each entity's newest: one Spark job, where a Spark-side fold (a shuffle)
        and a collect of Rows took two. Collected whole, not streamed: with toLocalIterator a
        backfill's batch did not fit the driver JVM's default 1 GiB heap."""
        errors = ERROR_COORDINATES if "error" in batch.changes.columns else ()
        return self._apply(batch.table([*self.columns(), *errors]), batch.app_id, batch.batch_id)

    def _apply(self, table: pa.Table, app_id: str, batch_id: int) -> list[Reject]:
        failed, table = split_refused(table)
        latest = latest_changes(table, self.index.text_fields)
        if latest:
            self.index.apply_batch(app_id, batch_id, latest)
        del table, latest
        release_freed_memory()
        return failed

    def compact(self, spark: SparkSession, rows: int | None) -> None:
        return None  # Tantivy merges segments itself on commit

    def verify(self, truth: Truth) -> list[Difference]:
        fields = self.index.text_fields
        searchable = {e: {k: v for k, v in row.items() if k in fields} for e, row in truth.rows.items()}
        return compare(self.name, searchable, self.index.live_documents())


@dataclass(frozen=True, slots=True)
class WarehouseView:
    warehouse: DeltaWarehouse
    data_columns: tuple[str, ...]
    name: str = "warehouse"
    parallel: bool = True
    single_pass: bool = False

    def columns(self) -> tuple[str, ...]:
        return (*HISTORY_COLUMNS, *self.data_columns, "keep_fields", "event_date")

    def check(self) -> None:
        return None  # a path: `prepare` creates the tables

    def prepare(self, spark: SparkSession) -> None:
        self.warehouse.ensure_tables(spark)

    def in_driver(self, rows: int) -> bool:
        return self.warehouse.in_driver(rows)

    def collects(self, rows: int) -> bool:
        return self.warehouse.in_driver(rows)

    def apply_table(self, batch: TableBatch) -> Sequence[Reject]:
        self.warehouse.write_collected(
            batch.spark, batch.table, batch.app_id, batch.batch_id, self.data_columns
        )
        return ()

    def apply_frame(self, batch: FrameBatch) -> Sequence[Reject]:
        self.warehouse.write_batch(
            batch.changes, batch.app_id, batch.batch_id, self.data_columns, batch.rows, batch.collected
        )
        return ()

    def compact(self, spark: SparkSession, rows: int | None) -> None:
        self.warehouse.optimize(spark, rows)

    def verify(self, truth: Truth) -> list[Difference]:
        """CDC: the current table against the source table; events: the facts, each event once."""
        if truth.kind == "cdc":
            if not self.warehouse.current:
                return []
            return compare(
                f"{self.name}.current", truth.rows, current_rows(self.warehouse, self.data_columns)
            )
        rows = delta.query(
            self.warehouse.history_path,
            "SELECT count(*) AS n, count(DISTINCT entity || '/' || position) AS d FROM t",
        )
        found = {"rows": str(rows[0]["n"]), "distinct": str(rows[0]["d"])}
        expected = {"rows": str(truth.events), "distinct": str(truth.events)}
        return compare(f"{self.name}.facts", {"count": expected}, {"count": found})


def as_text(row: Mapping[str, Any], columns: tuple[str, ...]) -> dict[str, str]:
    """A row's non-null `columns` as text: how every view's contents are compared."""
    return {c: str(row[c]) for c in columns if row.get(c) is not None}


def current_rows(warehouse: DeltaWarehouse, data_columns: tuple[str, ...]) -> dict[str, dict[str, str]]:
    rows = delta.query(warehouse.current_path, "SELECT * FROM t WHERE NOT deleted")
    return {str(r["entity"]): as_text(r, data_columns) for r in rows}
