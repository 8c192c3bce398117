"""Warehouse view: Delta Lake tables kept from the change stream, every write idempotent per batch.

Tables under `root`:
- `current/` (optional): one row per entity, `deleted` kept as a soft flag with its position so an
  older record can never re-insert a deleted entity; readers filter `deleted = false`;
- `history/`: append-only, one row per (entity, position), partitioned by `event_date`.
Commit order for a micro-batch (driver; Spark commits the checkpoint only after all of them):
1. history: drop (entity, position) pairs already in the table (only the batch's dates are read,
   partition pruning), then append with writer options txnAppId/txnVersion = (app id, batch id):
   a re-run of the same batch is skipped by Delta, a replay of old offsets adds no duplicates;
2. current: MERGE the latest change per entity where the incoming position is newer; the session
   confs spark.databricks.delta.write.txnAppId/txnVersion make Delta skip a re-run of the same batch
   (verified on delta-spark 4.4.0: the second MERGE with the same txnVersion commits nothing);
3. every `optimize_every` batches: OPTIMIZE (compaction) of both tables.
The app id belongs to the checkpoint (see job.py): a new checkpoint gets a new app id, otherwise its
batch ids restarting at 0 would be skipped as "already written".
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

TXN_APP_ID = "spark.databricks.delta.write.txnAppId"
TXN_VERSION = "spark.databricks.delta.write.txnVersion"
STATE_DDL = "entity string, position string, deleted boolean, updated_at timestamp"
HISTORY_DDL = "entity string, position string, op string, event_ts timestamp, src_topic string, src_partition int, src_offset long"


@dataclass(frozen=True, slots=True)
class DeltaWarehouse:
    root: Path
    data_ddl: str
    current: bool = True

    @property
    def current_path(self) -> str:
        return str(self.root / "current")

    @property
    def history_path(self) -> str:
        return str(self.root / "history")

    def ensure_tables(self, spark: SparkSession) -> None:
        if self.current:
            spark.sql(
                f"CREATE TABLE IF NOT EXISTS delta.`{self.current_path}` ({STATE_DDL}, {self.data_ddl}) USING DELTA"
            )
        spark.sql(
            f"CREATE TABLE IF NOT EXISTS delta.`{self.history_path}` "
            f"({HISTORY_DDL}, {self.data_ddl}, event_date date) USING DELTA PARTITIONED BY (event_date)"
        )

    def write_batch(
        self, changes: DataFrame, app_id: str, batch_id: int, data_columns: tuple[str, ...]
    ) -> None:
        self._append_history(changes, app_id, batch_id, data_columns)
        if self.current:
            self._merge_current(changes, app_id, batch_id, data_columns)

    def _append_history(
        self, changes: DataFrame, app_id: str, batch_id: int, data_columns: tuple[str, ...]
    ) -> None:
        from pyspark.sql import functions as F

        spark = changes.sparkSession
        rows = changes.select(
            "entity", "position", "op", "event_ts", "src_topic", "src_partition", "src_offset", *data_columns
        ).withColumn("event_date", F.to_date("event_ts"))
        rows = rows.dropDuplicates(["entity", "position"])
        dates = [r["event_date"] for r in rows.select("event_date").distinct().collect()]
        existing = spark.read.format("delta").load(self.history_path).where(F.col("event_date").isin(dates))
        fresh = rows.join(existing.select("entity", "position"), ["entity", "position"], "left_anti")
        (
            fresh.write.format("delta")
            .mode("append")
            .option("txnAppId", app_id)
            .option("txnVersion", batch_id)
            .save(self.history_path)
        )

    def _merge_current(
        self, changes: DataFrame, app_id: str, batch_id: int, data_columns: tuple[str, ...]
    ) -> None:
        from delta.tables import DeltaTable
        from pyspark.sql import functions as F

        spark = changes.sparkSession
        latest = (
            changes.groupBy("entity")
            .agg(
                F.max_by(F.struct("position", "op", "event_ts", *data_columns), F.col("position")).alias("c")
            )
            .select(
                "entity",
                "c.position",
                (F.col("c.op") == "delete").alias("deleted"),
                F.col("c.event_ts").alias("updated_at"),
                *[F.col(f"c.`{n}`").alias(n) for n in data_columns],
            )
        )
        columns = ["position", "deleted", "updated_at", *data_columns]
        spark.conf.set(TXN_APP_ID, app_id)
        spark.conf.set(TXN_VERSION, str(batch_id))
        try:
            (
                DeltaTable.forPath(spark, self.current_path)
                .alias("t")
                .merge(latest.alias("s"), "t.entity = s.entity")
                .whenMatchedUpdate(condition="s.position > t.position", set={c: f"s.`{c}`" for c in columns})
                .whenNotMatchedInsertAll()
                .execute()
            )
        finally:
            spark.conf.unset(TXN_APP_ID)
            spark.conf.unset(TXN_VERSION)

    def optimize(self, spark: SparkSession) -> None:
        from delta.tables import DeltaTable

        paths = [self.history_path, *([self.current_path] if self.current else [])]
        for path in paths:
            DeltaTable.forPath(spark, path).optimize().executeCompaction()


def query(path: str, sql: str) -> list[dict[str, object]]:
    """Run SQL over a Delta table (registered as `t`) with the `deltalake` package — no Spark needed."""
    from deltalake import DeltaTable, QueryBuilder

    table = QueryBuilder().register("t", DeltaTable(path)).execute(sql).read_all()
    columns = {name: table.column(name).to_pylist() for name in table.column_names}
    return [dict(zip(columns, values, strict=True)) for values in zip(*columns.values(), strict=True)]
