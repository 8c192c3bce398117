"""Warehouse view: Delta Lake tables kept from the change stream, every write idempotent per batch.

Tables under `root`:
- `current/` (optional): one row per entity, `deleted` kept as a soft flag with its position so an
  older record can never re-insert a deleted entity; readers filter `deleted = false`;
- `history/`: append-only, one row per (entity, position), partitioned by `event_date` (the UTC date
  of `event_ts`: `view.event_date`); a data column the source did not send (an unchanged TOAST value,
  named in the change's `keep_fields`) is null there: "not sent by the source", not "set to null".
Both are created from the driver by delta-rs (`delta_rs.create_table`: the log Spark's CREATE TABLE
writes, without a cold JVM's seconds before a fresh job's first batch).
Commit order for a micro-batch (driver; Spark commits the checkpoint only after all of them):
1. history: drop (entity, position) pairs already in the table (`written`: only the batch's dates,
   and there only files whose entity/position statistics overlap the batch's), then append with
   writer options txnAppId/txnVersion = (app id, batch id): a re-run of the same batch is skipped
   by Delta, a replay of old offsets adds no duplicates. The check is skipped when every position of
   the batch is above the highest one in the table (`_ceiling`: read from the Delta log's file
   statistics once, then raised by each append; CDC's LSNs grow, so a live stream's batches skip
   it): that was a Delta scan and a Spark job, a fifth of a small batch's time on 2 cores.
   The common cases cost no shuffle of the
   batch's rows: no pair already written (the check comes back empty: plain append), no entity twice
   in the batch (`unique_entities`, checked on the keys alone: no in-batch dedup, and step 2 needs no
   aggregation), which speeds up a snapshot's backfill (bench/results/history.md);
2. current: MERGE the latest change per entity where the incoming position is newer. Each data column
   takes the newest value a change of the batch carried (`changes.latest_per_entity`); the row keeps
   its own value where no change carried the column, or carried it at a position not newer than the
   row's (`merge_assignments`, the SQL twin of `changes.keeps`); a new row has null there. The session
   confs spark.databricks.delta.write.txnAppId/txnVersion make Delta skip a re-run of the same batch
   (verified on delta-spark 4.4.0: the second MERGE with the same txnVersion commits nothing);
3. every `optimize_every` batches: OPTIMIZE (compaction) of both tables, by the engine that wrote the
   batch; delta-rs's in a thread of its own (`background.Background`: one at a time, a round that
   finds one still running is skipped, its tables handles of its own) while the next batches are
   written: Delta lets a compaction commit beside appends (history), and a lock keeps the current
   table's compaction and MERGE apart (they conflict: one of them would fail). A Spark write or
   OPTIMIZE first waits for it.
A batch of at most `driver_rows` changes (runtime/batch_size.py sizes the bound) takes the same steps in
the driver: one Spark job collects it as Arrow, `changes.newest_of` folds it, and delta-rs writes
both tables side by side (see delta_rs.py: a fraction of Spark's fixed work per batch). Larger
batches stay distributed. Both record the batch in the same `txn` actions, so either engine skips
what the other committed.
The app id belongs to the checkpoint (see job.py): a new checkpoint gets a new app id, otherwise its
batch ids restarting at 0 would be skipped as "already written".
One job writes a warehouse: the ceiling is what this writer knows of the table.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from materializers.decode.changes import (
    EntityOrder,
    Newest,
    entity_order,
    first_deliveries,
    latest_per_entity,
    newest_of,
    unique_entities,
)
from materializers.view import event_date
from materializers.views.background import Background
from materializers.views.warehouse import delta_rs
from materializers.views.warehouse.delta_rs import Bounds

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import Column, DataFrame, SparkSession

TXN_APP_ID = "spark.databricks.delta.write.txnAppId"
TXN_VERSION = "spark.databricks.delta.write.txnVersion"
STATE_DDL = "entity string, position string, deleted boolean, updated_at timestamp"
HISTORY_DDL = "entity string, position string, op string, event_ts timestamp, src_topic string, src_partition int, src_offset long"
HISTORY_COLUMNS = ("entity", "position", "op", "event_ts", "src_topic", "src_partition", "src_offset")


@dataclass(slots=True)
class DeltaWarehouse:
    root: Path
    data_ddl: str
    current: bool = True
    driver_rows: int = 0  # batches of at most this many changes are written from the driver
    # The highest position in history as far as this writer knows; read from the table on first use.
    _ceiling: str | None = field(default=None, init=False, repr=False)
    _ceiling_read: bool = field(default=False, init=False, repr=False)
    _driver_tables: dict[str, delta_rs.DriverTable] = field(default_factory=dict, init=False, repr=False)
    _compacted: dict[str, delta_rs.DriverTable] = field(default_factory=dict, init=False, repr=False)
    _compactor: Background = field(
        default_factory=lambda: Background("delta-compaction"), init=False, repr=False
    )
    _current_lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

    @property
    def current_path(self) -> str:
        return str(self.root / "current")

    @property
    def history_path(self) -> str:
        return str(self.root / "history")

    def read(self, entities: Sequence[str]) -> dict[str, dict[str, object]]:
        """The current rows of these entities (deleted ones left out), read with `deltalake`."""
        if not entities:
            return {}
        wanted = ", ".join(delta_rs.literal(e) for e in entities)
        rows = query(self.current_path, f"SELECT * FROM t WHERE NOT deleted AND entity IN ({wanted})")
        return {str(r["entity"]): r for r in rows}

    def ensure_tables(self, spark: SparkSession) -> None:
        # A restarted driver finds its tables there: checking the log directory costs nothing, where
        # Spark's CREATE TABLE IF NOT EXISTS (which would change nothing) analysed and read each
        # table's log on a cold JVM before the first batch could start.
        if self.current and not _has_log(self.current_path):
            delta_rs.create_table(spark, self.current_path, f"{STATE_DDL}, {self.data_ddl}")
        if not _has_log(self.history_path):
            delta_rs.create_table(
                spark, self.history_path, f"{HISTORY_DDL}, {self.data_ddl}, event_date date", ("event_date",)
            )

    def write_batch(
        self,
        changes: DataFrame,
        app_id: str,
        batch_id: int,
        data_columns: tuple[str, ...],
        rows: int | None = None,
        collected: pa.Table | None = None,
    ) -> None:
        """`rows`: how many changes the batch holds, if known; a batch of at most `driver_rows` is
        written from the driver, from `collected` if the caller collected it already (`collect`)."""
        if self.in_driver(rows):
            batch = self.collect(changes, data_columns) if collected is None else collected
            self.write_collected(changes.sparkSession, batch, app_id, batch_id, data_columns)
            return
        self.settle()  # Spark's MERGE conflicts with a compaction of the current table
        unique = unique_entities(changes)
        self._append_history(changes, app_id, batch_id, data_columns, unique)
        if self.current:
            self._merge_current(changes, app_id, batch_id, data_columns, unique)

    def _append_history(
        self, changes: DataFrame, app_id: str, batch_id: int, data_columns: tuple[str, ...], unique: bool
    ) -> None:
        from pyspark.sql import functions as F

        rows = changes.select(*HISTORY_COLUMNS, *data_columns).withColumn("event_date", event_date())
        keys = ["entity", "position"]
        fresh = rows if unique else rows.dropDuplicates(keys)
        bounds = batch_bounds(changes)
        if self._may_hold(changes.sparkSession, bounds.low):
            already = self.written(changes, rows.select(*keys), bounds)
            if not already.isEmpty():  # a replay: at most the batch's own keys, so broadcast them
                fresh = fresh.join(F.broadcast(already), keys, "left_anti")
        writer = (
            fresh.write.format("delta")
            .mode("append")
            .option("txnAppId", app_id)
            .option("txnVersion", batch_id)
        )
        self._appended(lambda: writer.save(self.history_path), bounds.high)

    def _appended(self, append: Callable[[], None], high: str | None) -> None:
        """Run a history `append`, then raise the ceiling to the batch's highest position `high`."""
        try:
            append()
        except BaseException:
            self._ceiling_read = False  # it may have committed all the same: read the table again
            raise
        self._ceiling = max((p for p in (self._ceiling, high) if p is not None), default=None)

    def in_driver(self, rows: int | None) -> bool:
        """Whether a batch of `rows` changes (None: unknown) is written from the driver."""
        return rows is not None and rows <= self.driver_rows

    @staticmethod
    def collect(changes: DataFrame, data_columns: tuple[str, ...], extra: tuple[str, ...] = ()) -> pa.Table:
        """The batch as Arrow in the driver: what a write needs, and the `extra` columns."""

        wanted = [*HISTORY_COLUMNS, *data_columns, "keep_fields"]
        return changes.select(
            *wanted, *[c for c in extra if c not in wanted], event_date().alias("event_date")
        ).toArrow()

    def write_collected(
        self, spark: SparkSession, batch: pa.Table, app_id: str, batch_id: int, data_columns: tuple[str, ...]
    ) -> None:
        """Write a batch already in the driver as Arrow (the columns of `collect`) with delta-rs: the
        history append and the current table's MERGE side by side (two tables, two logs: each commit
        records the batch, so a re-run after either failed redoes that one only). One after the other
        they were a third of a backfill's time; pyarrow and delta-rs work outside the GIL."""
        order = entity_order(batch["entity"], batch["position"])
        history = partial(self._history_collected, spark, batch, order, app_id, batch_id, data_columns)
        if not self.current:
            history()
            return
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="warehouse-history") as pool:
            appended = pool.submit(history)
            try:
                self._current_collected(batch, order, app_id, batch_id, data_columns)
            finally:
                appended.result()  # never return (nor raise) with the append still running

    def _history_collected(
        self,
        spark: SparkSession,
        batch: pa.Table,
        order: EntityOrder,
        app_id: str,
        batch_id: int,
        data_columns: tuple[str, ...],
    ) -> None:
        history = self._driver_table(self.history_path)
        if history.committed(app_id, batch_id):
            return
        bounds = arrow_bounds(batch)
        seen = history.written(bounds) if self._may_hold(spark, bounds.low) else None
        fresh = history_rows(batch, seen, data_columns, order)
        self._appended(lambda: history.append(fresh, app_id, batch_id), bounds.high)

    def _current_collected(
        self, batch: pa.Table, order: EntityOrder, app_id: str, batch_id: int, data_columns: tuple[str, ...]
    ) -> None:
        current = self._driver_table(self.current_path)
        with self._current_lock:
            if current.committed(app_id, batch_id):
                return
            newest = newest_of(batch["entity"], batch["position"], batch["keep_fields"], data_columns, order)
            current.merge(
                current_rows(batch, newest, data_columns),
                app_id,
                batch_id,
                updates=merge_assignments(data_columns, DATAFUSION),
                inserted=["entity", "position", "deleted", "updated_at", *data_columns],
            )

    def _driver_table(self, path: str) -> delta_rs.DriverTable:
        """The delta-rs handle of one of the tables (opened on first use, then kept)."""
        if path not in self._driver_tables:
            self._driver_tables[path] = delta_rs.DriverTable(path)
        return self._driver_tables[path]

    def _may_hold(self, spark: SparkSession, low: str | None) -> bool:
        """Whether history may already hold a position at or above `low` (the batch's lowest)."""
        if not self._ceiling_read:
            self._ceiling, self._ceiling_read = self._highest_position(spark), True
        return self._ceiling is not None and low is not None and low <= self._ceiling

    def _highest_position(self, spark: SparkSession) -> str | None:
        """The files' `position` maxima in the Delta log (no data read, where a scan of a large
        history took seconds at a job's start); a scan where a file has no statistics or
        delta-rs cannot read the log. A truncated string statistic is still an upper bound."""
        import pyarrow as pa
        import pyarrow.compute as pc
        from deltalake.exceptions import DeltaError
        from pyspark.sql import functions as F

        try:
            files = pa.table(self._driver_table(self.history_path).latest().get_add_actions(flatten=True))
            if files.num_rows == 0:
                return None
            highs = files.column("max.position")
            if highs.null_count == 0:
                return str(pc.max(highs).as_py())
        except (DeltaError, KeyError):
            pass
        found = spark.read.format("delta").load(self.history_path).agg(F.max("position")).first()
        return found[0] if found else None

    def written(self, changes: DataFrame, keys: DataFrame, bounds: Bounds | None = None) -> DataFrame:
        """The (entity, position) `keys` of a batch of `changes` already in the history table.

        Only the batch's event dates are read (partition pruning), and in them only the files whose
        entity and position statistics overlap the batch's ranges: CDC positions (LSNs) grow with
        time, so older files are skipped and the cost follows the batch, not the day. Spark picks the
        join: a small batch's keys are broadcast by its size threshold; a forced broadcast of a
        backfill's keys cost more collecting and hashing in the driver than the shuffle join, even
        against an empty table.
        """
        from pyspark.sql import functions as F

        low_entity, high_entity, low, high, dates = bounds or batch_bounds(changes)
        return (
            changes.sparkSession.read.format("delta")
            .load(self.history_path)
            .where(F.col("event_date").isin(dates))
            .where(F.col("entity").between(F.lit(low_entity), F.lit(high_entity)))
            .where(F.col("position").between(F.lit(low), F.lit(high)))
            .select("entity", "position")
            .join(keys, ["entity", "position"], "left_semi")
        )

    def _merge_current(
        self, changes: DataFrame, app_id: str, batch_id: int, data_columns: tuple[str, ...], unique: bool
    ) -> None:
        from delta.tables import DeltaTable
        from pyspark.sql import functions as F

        spark = changes.sparkSession
        latest = latest_per_entity(changes, ("event_ts",), data_columns, unique=unique).select(
            "entity",
            "position",
            (F.col("op") == "delete").alias("deleted"),
            F.col("event_ts").alias("updated_at"),
            *data_columns,
            "carried_at",
        )
        inserted = ["entity", "position", "deleted", "updated_at", *data_columns]
        updates: dict[str, str | Column] = dict(merge_assignments(data_columns))
        spark.conf.set(TXN_APP_ID, app_id)
        spark.conf.set(TXN_VERSION, str(batch_id))
        try:
            (
                DeltaTable.forPath(spark, self.current_path)
                .alias("t")
                .merge(latest.alias("s"), "t.entity = s.entity")
                .whenMatchedUpdate(condition="s.position > t.position", set=updates)
                .whenNotMatchedInsert(values={c: f"s.`{c}`" for c in inserted})
                .execute()
            )
        finally:
            spark.conf.unset(TXN_APP_ID)
            spark.conf.unset(TXN_VERSION)

    def optimize(self, spark: SparkSession, rows: int | None = None) -> None:
        """Compact both tables: after a batch of `rows` written from the driver, with delta-rs in the
        background (skipped while the previous one runs), else with Spark's OPTIMIZE."""
        from delta.tables import DeltaTable

        if self.in_driver(rows):
            self._compactor.start(self._compact_in_driver)
            return
        self.settle()
        for path in self._paths():
            DeltaTable.forPath(spark, path).optimize().executeCompaction()

    def settle(self) -> None:
        """Wait for a background compaction to end; raise what it raised."""
        self._compactor.settle()

    def _compact_in_driver(self) -> None:
        for path in self._paths():
            table = self._compacted.setdefault(path, delta_rs.DriverTable(path))
            if path == self.current_path:
                with self._current_lock:
                    table.compact()
            else:
                table.compact()

    def _paths(self) -> list[str]:
        return [self.history_path, *([self.current_path] if self.current else [])]


def batch_bounds(changes: DataFrame) -> Bounds:
    from pyspark.sql import functions as F

    found = changes.agg(
        *[f(c) for c in ("entity", "position") for f in (F.min, F.max)],
        F.collect_set(event_date()).alias("dates"),
    ).first()
    return Bounds(*found) if found else Bounds(None, None, None, None, [])


class Dialect(NamedTuple):
    """How a SQL engine names a column of a table alias, and a field of a struct column."""

    column: Callable[[str, str], str]  # (alias, column)
    field: Callable[[str, str, str], str]  # (alias, struct column, field)


SPARK = Dialect(lambda a, c: f"{a}.`{c}`", lambda a, s, f: f"{a}.{s}.`{f}`")
DATAFUSION = Dialect(
    lambda a, c: f"{a}.{delta_rs.quoted(c)}",
    lambda a, s, f: f"{a}.{s}[{delta_rs.literal(f)}]",
)


def merge_assignments(data_columns: tuple[str, ...], sql: Dialect = SPARK) -> dict[str, str]:
    """The MERGE's update of a current row `t` from the batch's row `s` (pure): state columns from `s`;
    a data column from `s` only where the batch carried it at a position newer than `t`'s."""
    assignments = {c: sql.column("s", c) for c in ("position", "deleted", "updated_at")}
    for c in data_columns:
        at = sql.field("s", "carried_at", c)
        assignments[c] = (
            f"CASE WHEN {at} IS NULL OR {at} <= t.position THEN {sql.column('t', c)} ELSE {sql.column('s', c)} END"
        )
    return assignments


def arrow_bounds(batch: pa.Table) -> Bounds:
    """`batch_bounds` of a batch held in the driver (pure)."""
    import pyarrow.compute as pc

    def low_high(column: str) -> tuple[str | None, str | None]:
        found = pc.min_max(batch.column(column))
        return found["min"].as_py(), found["max"].as_py()

    dates = pc.unique(batch.column("event_date")).drop_null().to_pylist()
    return Bounds(*low_high("entity"), *low_high("position"), dates)


def history_rows(
    batch: pa.Table, seen: pa.Table | None, data_columns: tuple[str, ...], order: EntityOrder | None = None
) -> pa.Table:
    """The batch's history rows (pure): each (entity, position) once (its first row), none of the
    pairs already `seen` (a table of entity, position), in the batch's order. The repeats are found
    along the batch's `EntityOrder` (the fold's sort, where the caller has it): a hash aggregation
    of the pairs, single-threaded, cost every large backfill batch for the rare batch that has one."""
    import pyarrow as pa

    keep = first_deliveries(order if order is not None else entity_order(batch["entity"], batch["position"]))
    if seen is not None and seen.num_rows:
        pairs = batch.select(["entity", "position"])
        rows = keep if keep is not None else pa.array(range(batch.num_rows), pa.int64())
        pairs = (pairs if keep is None else pairs.take(keep)).append_column("row", rows)
        keys = pairs.schema.remove(2)  # as the batch types them (delta-rs may answer with string views)
        fresh = pairs.join(seen.select(keys.names).cast(keys), keys.names, join_type="left anti")
        if fresh.num_rows < pairs.num_rows:  # a backfill's snapshot reads share positions: often none
            keep = fresh.column("row").sort()  # the batch's order
    history = batch.select([*HISTORY_COLUMNS, *data_columns, "event_date"])
    return history if keep is None else history.take(keep)


def current_rows(batch: pa.Table, newest: Newest, data_columns: tuple[str, ...]) -> pa.Table:
    """The MERGE's source (pure): per entity its newest change's state and, per data column, the
    newest carried value and the position it was carried at (`carried_at`; null: not carried)."""
    import pyarrow as pa

    if _each_change_newest(batch, newest, data_columns):
        return _source(batch, {c: batch.column(c) for c in data_columns}, {c: None for c in data_columns})
    rows = pa.array(newest.rows, pa.int64())
    latest = batch.select(["entity", "position", "op", "event_ts"]).take(rows)
    # A column every change carried has the newest changes as its carriers (the same list).
    carriers = {
        c: rows if newest.carriers[c] is newest.rows else pa.array(newest.carriers[c], pa.int64())
        for c in data_columns
    }
    carried_at = {
        c: None if carriers[c] is rows else batch.column("position").take(carriers[c]) for c in data_columns
    }
    return _source(latest, {c: batch.column(c).take(carriers[c]) for c in data_columns}, carried_at)


def _each_change_newest(batch: pa.Table, newest: Newest, data_columns: tuple[str, ...]) -> bool:
    """Whether every change of `batch` is its entity's newest and carried every column (pure): a
    backfill's snapshot batch. The MERGE's source is then the batch itself, in its own order: taking
    each column along the entity order was a large part of a cold driver's first backfill batch."""
    return len(newest.rows) == batch.num_rows and all(newest.carriers[c] is newest.rows for c in data_columns)


def _source(
    latest: pa.Table, values: Mapping[str, pa.ChunkedArray], carried_at: Mapping[str, pa.ChunkedArray | None]
) -> pa.Table:
    """`current_rows`' table from each entity's newest change (`latest`), its data columns' `values`
    and the positions they were carried at (None: at the newest change's)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    positions = latest.column("position")
    newest_at = positions.combine_chunks()
    return pa.table(
        {
            "entity": latest.column("entity"),
            "position": positions,
            "deleted": pc.equal(latest.column("op"), "delete"),
            "updated_at": latest.column("event_ts"),
            **values,
            "carried_at": pa.StructArray.from_arrays(
                [newest_at if at is None else at.combine_chunks() for at in carried_at.values()],
                names=list(carried_at),
            ),
        }
    )


def query(path: str, sql: str) -> list[dict[str, object]]:
    """Run SQL over a Delta table (registered as `t`) with the `deltalake` package — no Spark needed."""
    from deltalake import DeltaTable, QueryBuilder

    table = QueryBuilder().register("t", DeltaTable(path)).execute(sql).read_all()
    columns = {name: table.column(name).to_pylist() for name in table.column_names}
    return [dict(zip(columns, values, strict=True)) for values in zip(*columns.values(), strict=True)]


def _has_log(table: str) -> bool:
    """Whether a Delta table was committed at `table` (old commits may be cleaned up; a checkpoint stays)."""
    log = Path(table) / "_delta_log"
    return (log / "_last_checkpoint").is_file() or any(log.glob("*.json"))
