"""Run an aggregate view (declaration.py) as ONE stateful Structured Streaming query into a Delta table.

Kafka source -> the source's event types -> Avro decoded in the JVM (avro_events.decode, one
`from_avro` per writer schema id) -> event time -> `withWatermark(event time, allowed_lateness)` ->
`groupBy(window(...), *group_by).agg(...)` on Spark's own state store (kept in the checkpoint) ->
`outputMode("update")` -> foreachBatch: MERGE of the updated windows into the Delta table.

Commit order of a micro-batch (what makes a re-run change nothing):
1. Spark plans the offsets and writes them to the checkpoint's offset log;
2. the aggregation updates its state store (a new version per batch, in the checkpoint);
3. foreachBatch: the batch's line appended to the batch log (aggregate_batches, for `verify`); the
   updated rows (absolute values per window and group, not increments) are
   persisted, then MERGEd into the table keyed by (window_start, window_end, *group_by) under the
   Delta transaction (app id = the checkpoint's, job.json; version = the batch id): a batch of up to
   `warehouse_driver_rows` rows from the driver with delta-rs (a fraction of Spark's MERGE's fixed
   work per batch), which writes the
   `txn` action in its commit and skips a batch committed before; a larger one by Spark's MERGE with
   the session confs txnAppId / txnVersion, which Delta skips alike. Upserting absolute values is
   idempotent besides; then, with
   `redis_current`, each group's newest window into Redis (views/redis_windows.py: never older over
   newer, absolute values, so a re-run writes the same);
4. Spark commits the batch. A crash before 4 re-runs the batch from the same offsets and state version.

Assumptions and limits (this milestone):
- Writer schemas are fixed when the query starts: every version of the registry subjects
  `<topic>-*` (the event store's TopicRecordNameStrategy), and only those: a record framed with the
  id of another topic's schema is refused even when its body happens to decode under that schema
  (Avro bodies carry no fingerprint). A record of a schema registered later is refused until the
  job restarts.
- Refused records (undecodable, unknown schema id, no event time, an event time more than
  `max_ahead` past the batch's time) are counted in the status (`refused`) and sent to the
  dead-letter topic after their batch (aggregate_dead_letters). Records of event types the view
  does not read are skipped, uncounted.
- Late records: Spark's `numRowsDroppedByWatermark` per batch, summed in the status (`late_dropped`).
  Spark counts aggregated rows, not records: late records of one window and group in one batch count
  once (checked on Spark 4.2). Spark drops input by the watermark of the batch before (and evicts
  by the current one): a record is late when its window ended at or before the watermark that was
  in force when the previous batch started.
- Over CDC (`CdcSource`): each change is one or two signed contributions (aggregate_plan.
  row_contributions) and the state keeps `ROWS` per window and group beside the aggregations; the
  MERGE deletes a row whose ROWS reached 0 and never inserts one. Every start checks the table's
  REPLICA IDENTITY FULL; a new checkpoint must start from the topic's beginning; a batch with a row
  below 0 raises IncompleteHistory before its MERGE (the history read misses the rows' adding).
- The state fingerprint (aggregate.fingerprint) is stored in the checkpoint (`aggregate.json`) and in
  the table's properties; a start with another definition is refused before anything is written.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from cdc.replica_identity import require_full
from kafkakit.positions import Edge, StartPosition
from kafkakit.secrets import masked
from materializers import failpoints
from materializers.aggregates import batches as aggregate_batches
from materializers.aggregates.dead_letters import RefusedRecords
from materializers.aggregates.declaration import (
    ROWS,
    WINDOW_COLUMNS,
    AggregateView,
    CdcSource,
    batch_counts,
    check_compatible,
    duration_ms,
    fingerprint,
    is_cdc,
    state_record,
    watermark_delay_ms,
)
from materializers.aggregates.plan import aggregate
from materializers.decode.avro_events import WriterSchemas, learn_topic_schemas
from materializers.errors import BadAggregate, IncompleteHistory, SourceUnavailable
from materializers.ops.lag import log_bounds
from materializers.plan import JobPlan
from materializers.runtime import checkpoint, lifecycle, status
from materializers.runtime.job import Job, claim_checkpoint, source_stream, triggered
from materializers.runtime.kafka_topics import ensure_topic, topic_partitions
from materializers.runtime.timeline import StepClock
from materializers.views.redis_windows import CurrentWindows
from materializers.views.warehouse.delta import TXN_APP_ID, TXN_VERSION
from materializers.views.warehouse.delta_rs import DriverTable, batch_commit, quoted

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession
    from pyspark.sql.streaming.query import StreamingQuery

log = logging.getLogger(__name__)
STATE_FILE = "aggregate.json"  # beside job.json in the checkpoint
TABLE_DIR = "aggregate"  # the Delta table, in the plan's view directory
FINGERPRINT_PROPERTY = "kafkatoolkit.aggregate.fingerprint"


def job_for(spark: SparkSession, plan: JobPlan) -> Job | AggregateJob:
    """The job that runs `plan`: an AggregateJob for an aggregate view, else a Job."""
    return AggregateJob(spark, plan) if plan.spec.aggregate is not None else Job(spark, plan)


def table_path(plan: JobPlan) -> Path:
    return plan.view_dir / TABLE_DIR


def view_of(plan: JobPlan) -> AggregateView:
    if plan.spec.aggregate is None:
        raise BadAggregate(f"materializer {plan.spec.name!r} is not an aggregate view")
    return plan.spec.aggregate


def check_state(plan: JobPlan) -> None:
    """Refuse a checkpoint or table whose state another definition built (files only, no Spark):
    StateIncompatible, naming what changed and how to start over."""
    view = view_of(plan)
    fix = (
        f"keep the old definition, or start over: delete the checkpoint {plan.checkpoint} and the table "
        f"{table_path(plan)} (or run under a new --home) and start with --from earliest, which rebuilds "
        "the table from offset 0 with the new definition"
    )
    stored_file = plan.checkpoint / STATE_FILE
    stored = json.loads(stored_file.read_text()) if stored_file.is_file() else None
    check_compatible(view, stored, f"checkpoint {plan.checkpoint}", fix)
    table = _table_fingerprint(table_path(plan))
    if table is not None:
        check_compatible(view, {"fingerprint": table}, f"table {table_path(plan)}", fix)


def _table_fingerprint(path: Path) -> str | None:
    """The fingerprint property of the Delta table at `path` (None: no table yet), read without Spark."""
    if not (path / "_delta_log").is_dir():
        return None
    from deltalake import DeltaTable

    return DeltaTable(str(path)).metadata().configuration.get(FINGERPRINT_PROPERTY, "")


class AggregateJob:
    """The imperative shell of one aggregate view: checks, the streaming query, the MERGE per batch,
    and the late/refused totals the driver loop publishes (`counted`). The driver loop drives it
    through the same protocol as `Job` (`runtime.driver_loop.DrivenQuery`)."""

    def __init__(self, spark: SparkSession, plan: JobPlan) -> None:
        self.spark = spark
        self.plan = plan
        self._start: StartPosition | None = None  # where `start` began, for `restart`
        self.view = view_of(plan)
        endpoints = plan.config.endpoints
        self.schemas = WriterSchemas(endpoints.schema_registry_url, auth=endpoints.schema_registry_auth)
        self.app_id = ""
        self.dead_letters = 0  # refused records sent to the dead-letter topic by this driver
        self.clock = StepClock()
        self.late_dropped = 0
        self.refused = 0
        self.corrected = 0
        self._corrections: dict[int, int] = {}  # per batch run, folded in once the batch committed
        self._accounted = -1  # the last batch id folded into the totals
        self.refused_records = RefusedRecords(spark, plan, self.view)
        self.current = (
            CurrentWindows(plan.cache(), self.view.group_by, tuple(a.output for a in self.view.aggregations))
            if self.view.redis_current
            else None
        )
        # Read now: the runner replaces the status with a fresh one before it calls `start`.
        self._previous = status.read(plan.job_dir)
        self.table = DriverTable(str(table_path(plan)))

    # --- start -----------------------------------------------------------------------------------

    def start(self, start: StartPosition, *, available_now: bool = False) -> StreamingQuery:
        """Check, build the query (Spark analyses it: a bad derived column fails here), claim the
        checkpoint, create the table, start. Nothing is written before the last check passed."""
        endpoints = self.plan.config.endpoints
        topic_partitions(
            endpoints.kafka_bootstrap_servers, self.plan.topic, client_config=endpoints.kafka_client
        )
        ensure_topic(
            endpoints.kafka_bootstrap_servers, self.plan.dlq_topic, client_config=endpoints.kafka_client
        )
        check_state(self.plan)
        if isinstance(self.view.source, CdcSource):
            self._check_cdc_source(self.view.source, start)
        if self.current is not None:
            self.current.cache.check()
        self._learn_schemas()
        raw = source_stream(
            self.spark, self.plan, start, max_offsets=self.plan.config.max_offsets_per_trigger
        )
        aggregated = aggregate(raw, self.view, self.schemas.trusting_cache())
        self._start = start
        self.app_id = claim_checkpoint(self.plan)
        self._resume_totals()
        state_file = self.plan.checkpoint / STATE_FILE
        if not state_file.is_file():
            state_file.write_text(json.dumps(state_record(self.view), sort_keys=True))
        self._ensure_table()
        writer = (
            aggregated.writeStream.queryName(f"{self.plan.spec.name}-{self.app_id[-8:]}")
            .outputMode("update")
            .option("checkpointLocation", str(self.plan.checkpoint))
            .foreachBatch(self.process_batch)
        )
        return triggered(writer, self.plan, available_now).start()

    def _check_cdc_source(self, source: CdcSource, start: StartPosition) -> None:
        """Pre-flight of an aggregate that takes rows back: the table gives full before images, and
        a first start reads the topic's history from its beginning (a row added before the view's
        first offset could not be taken back)."""
        endpoints = self.plan.config.endpoints
        require_full_identity(endpoints.pg_dsn, source.table)
        if checkpoint.batch_ids(self.plan.checkpoint / "offsets"):
            return  # resumes from its checkpoint, where the start position is not used
        if start != Edge("earliest"):
            raise IncompleteHistory(
                f"aggregate {self.view.name!r} over CDC starts from {start}: rows added before it could "
                "not be taken back when they change. Start it with --from earliest (a new checkpoint "
                "reads the topic from its beginning)"
            )
        bounds = log_bounds(
            endpoints.kafka_bootstrap_servers, self.plan.topic, client_config=endpoints.kafka_client
        )
        trimmed = {p: low for p, (low, _high) in bounds.items() if low > 0}
        if trimmed:
            raise IncompleteHistory(
                f"aggregate {self.view.name!r}: topic {self.plan.topic!r} no longer holds its beginning "
                f"(first offsets {trimmed}: retention or a delete-records removed them), so rows added "
                "there could not be taken back. Take a new snapshot into a new topic (a new connector "
                "topic.prefix) and point the view at it"
            )

    def _learn_schemas(self) -> None:
        """The writer schemas of the topic's own subjects (module docstring): fixed for the query's life."""
        learn_topic_schemas(self.schemas, self.plan.topic)
        log.info("aggregate %s decodes writer schema ids %s", self.view.name, sorted(self.schemas.known()))

    def _resume_totals(self) -> None:
        """The totals the last driver of this checkpoint published (a new checkpoint starts at 0)."""
        last = self._previous
        if last is not None and last.app_id == self.app_id:
            self.late_dropped, self.refused, self.corrected = last.late_dropped, last.refused, last.corrected
        # Batches up to the last committed one were counted by the driver that ran them (a driver
        # killed between a commit and its next status write loses that batch's counts).
        self._accounted = max(checkpoint.batch_ids(self.plan.checkpoint / "commits"), default=-1)
        self.refused_records.resume(self._accounted)

    def _ensure_table(self) -> None:
        path = table_path(self.plan)
        if (path / "_delta_log").is_dir():
            return
        self.spark.sql(
            f"CREATE TABLE IF NOT EXISTS delta.`{path}` ({self.view.output_ddl()}) USING DELTA "
            f"TBLPROPERTIES ('{FINGERPRINT_PROPERTY}' = '{fingerprint(self.view)}')"
        )

    # --- one micro-batch -------------------------------------------------------------------------

    def process_batch(self, batch: DataFrame, batch_id: int) -> None:
        """Step 3 of the module docstring: the batch's updated windows MERGEd, once per batch id."""
        # Before the MERGE, so every committed batch has its line for `verify` (aggregate_batches).
        record = aggregate_batches.record_of(self.plan.checkpoint, batch_id)
        aggregate_batches.append(self.plan.checkpoint, record)
        updated = batch.persist()  # computed once: MERGE may read its source twice
        try:
            with self.clock.timed(batch_id, "merge"):
                found = BatchFacts.of(updated, self.view, record.late_watermark_ms)
                if found.rows == 0:
                    return
                if found.negative:
                    raise IncompleteHistory(unmatched_message(self.view, found.negative, updated))
                if self.view.late_policy == "correct":
                    self._corrections[batch_id] = found.corrections
                self._merge(updated, batch_id, found)
            if self.current is not None:
                with self.clock.timed(batch_id, "redis"):
                    self._write_current(updated)
            # Test hook: a kill -9 here leaves the MERGE committed and the batch not (step 3 of 4).
            failpoints.hold(
                self.plan.config.failpoint,
                "after-merge",
                str(batch_id),
                lifecycle.stop_file(self.plan.job_dir),
            )
        finally:
            updated.unpersist()

    def _merge(self, updated: DataFrame, batch_id: int, found: BatchFacts) -> None:
        """Upsert the updated rows under the batch's Delta transaction id; over CDC a window and group
        whose rows were all taken back (`ROWS` 0) is deleted, never inserted. Up to the plan's
        `driver_rows` rows are MERGEd from the driver with delta-rs, more by Spark."""
        if found.rows > self.plan.driver_rows():
            self._merge_in_spark(updated, batch_id, found.earliest_window_ms)
        elif not self.table.committed(self.app_id, batch_id):  # else a re-run: the MERGE is in already
            self._merge_in_driver(updated, batch_id, found.earliest_window_ms)

    def _merge_in_driver(self, updated: DataFrame, batch_id: int, earliest_window_ms: int) -> None:
        """`_merge` by delta-rs, the batch's rows collected as Arrow; its commit holds the `txn`."""
        keys, columns = self._columns()
        read = [*columns, ROWS] if is_cdc(self.view) else columns  # ROWS decides, the table has none
        source = updated.select(*[f"`{c}`" for c in read]).toArrow()
        values = {quoted(c): f"s.{quoted(c)}" for c in columns}
        merge = self.table.latest().merge(
            source,
            driver_merge_condition(keys, earliest_window_ms=earliest_window_ms),
            source_alias="s",
            target_alias="t",
            commit_properties=batch_commit(self.app_id, batch_id),
        )
        if is_cdc(self.view):
            merge = merge.when_matched_delete(predicate=f"s.{quoted(ROWS)} = 0").when_matched_update(values)
            merge = merge.when_not_matched_insert(values, predicate=f"s.{quoted(ROWS)} <> 0")
        else:
            merge = merge.when_matched_update(values).when_not_matched_insert(values)
        merge.execute()

    def _merge_in_spark(self, updated: DataFrame, batch_id: int, earliest_window_ms: int) -> None:
        """`_merge` by Spark's Delta MERGE, its transaction id in the session's Delta confs (a batch
        committed before is skipped by Delta)."""
        from delta.tables import DeltaTable

        keys, columns = self._columns()
        values: dict[str, str | Column] = {c: f"s.`{c}`" for c in columns}
        spark = updated.sparkSession  # the query's own session: the confs reach no other query
        spark.conf.set(TXN_APP_ID, self.app_id)
        spark.conf.set(TXN_VERSION, str(batch_id))
        try:
            merge = (
                DeltaTable.forPath(spark, str(table_path(self.plan)))
                .alias("t")
                .merge(updated.alias("s"), merge_condition(keys, earliest_window_ms))
            )
            if is_cdc(self.view):
                merge = merge.whenMatchedDelete(condition=f"s.{ROWS} = 0").whenMatchedUpdate(set=values)
                merge = merge.whenNotMatchedInsert(condition=f"s.{ROWS} <> 0", values=values)
            else:
                merge = merge.whenMatchedUpdate(set=values).whenNotMatchedInsert(values=values)
            merge.execute()
        finally:
            spark.conf.unset(TXN_APP_ID)
            spark.conf.unset(TXN_VERSION)

    def _columns(self) -> tuple[list[str], list[str]]:
        """(the table's key columns, all its columns): the MERGE matches on the first, writes the second."""
        keys = [*WINDOW_COLUMNS, *self.view.group_by]
        return keys, [*keys, *(a.output for a in self.view.aggregations)]

    def _write_current(self, updated: DataFrame) -> None:
        from pyspark.sql import functions as F

        assert self.current is not None
        rows = updated.select(
            F.unix_millis("window_start").alias("window_start"),
            F.unix_millis("window_end").alias("window_end"),
            *[F.col(f"`{c}`") for c in (*self.view.group_by, *self.current.values)],
        )
        rows.foreachPartition(self.current.write_partition)

    def stale(self) -> bool:
        """Never: an aggregate's query decodes with the writer schemas it learnt when it started, and
        is not restarted to learn more."""
        return False

    def restart(self, *, available_now: bool = False) -> StreamingQuery:
        """Start the query again; it resumes from its checkpoint."""
        assert self._start is not None, "restart follows start"
        return self.start(self._start, available_now=available_now)

    # --- status ----------------------------------------------------------------------------------

    def counted(self, current: status.JobStatus, query: StreamingQuery | None) -> status.JobStatus:
        """`current` with the totals, after folding in the batches run since the last call."""
        last = query.lastProgress if query is not None else None
        if query is not None and last and int(last.get("batchId", -1)) > self._accounted:
            for progress in sorted(query.recentProgress, key=lambda p: int(p.get("batchId", -1))):
                batch = int(progress.get("batchId", -1))
                if batch > self._accounted and "addBatch" in progress.get("durationMs", {}):
                    dropped, refused = batch_counts(progress)
                    self.late_dropped += dropped
                    self.refused += refused
                    self.corrected += self._corrections.pop(batch, 0)
                    self._accounted = batch
                    self.refused_records.saw(batch, refused)
        self.dead_letters += self.refused_records.send()
        return replace(
            current, late_dropped=self.late_dropped, refused=self.refused, corrected=self.corrected
        )


def require_full_identity(dsn: str, table: str) -> None:
    """ReplicaIdentityNotFull unless `table` has REPLICA IDENTITY FULL; SourceUnavailable if Postgres
    cannot be asked (the DSN masked)."""
    import psycopg

    try:
        with psycopg.connect(dsn, connect_timeout=10) as conn:
            require_full(conn, table)
    except psycopg.Error as exc:
        raise SourceUnavailable(
            f"cannot ask Postgres at {masked(dsn)} for {table}'s REPLICA IDENTITY ({masked(str(exc))}); "
            "start it or fix PG_DSN"
        ) from exc


def merge_condition(keys: list[str], earliest_window_ms: int) -> str:
    """The MERGE's match on the table's key, bounded below by the batch's earliest window (pure).

    Every updated row's window starts at or after `earliest_window_ms`, so the bound changes no
    match; it lets Delta skip the files of older windows by their min/max statistics (window_start
    is the table's first column), so a batch's cost stops growing with the table's history.
    """
    match = " AND ".join(f"t.`{k}` <=> s.`{k}`" for k in keys)
    return f"t.window_start >= timestamp_millis({earliest_window_ms}) AND {match}"


def driver_merge_condition(keys: list[str], *, earliest_window_ms: int) -> str:
    """`merge_condition` in delta-rs's SQL (DataFusion's): the same match, the same bound (pure)."""
    # Each comparison in parentheses: DataFusion's parser binds IS NOT DISTINCT FROM looser than AND.
    match = " AND ".join(f"(t.{quoted(k)} IS NOT DISTINCT FROM s.{quoted(k)})" for k in keys)
    bound = f"arrow_cast({earliest_window_ms * 1000}, 'Timestamp(Microsecond, Some(\"UTC\"))')"
    return f"(t.window_start >= {bound}) AND {match}"


@dataclass(frozen=True, slots=True)
class BatchFacts:
    """What one pass over a batch's updated rows tells the MERGE: how many, the earliest window, how
    many correct closed windows (late_policy "correct") and, over CDC, how many hold fewer than 0 rows."""

    rows: int
    earliest_window_ms: int
    corrections: int
    negative: int

    @classmethod
    def of(cls, updated: DataFrame, view: AggregateView, late_watermark_ms: int) -> BatchFacts:
        from pyspark.sql import functions as F

        before = closed_before_ms(view, late_watermark_ms)
        closed = (
            F.col("window_end") <= F.timestamp_millis(F.lit(before)) if before is not None else F.lit(False)
        )
        negative = F.col(ROWS) < 0 if is_cdc(view) else F.lit(False)
        row = updated.agg(
            F.count(F.lit(1)),
            F.min(F.unix_millis("window_start")),
            F.count(F.when(closed, 1)),
            F.count(F.when(negative, 1)),
        ).first()
        assert row is not None
        return cls(int(row[0]), int(row[1] or 0), int(row[2]), int(row[3]))


def closed_before_ms(view: AggregateView, late_watermark_ms: int) -> int | None:
    """Windows ending at or before this had closed when the batch began (pure; late_policy "correct").

    The batch's input was filtered by `late_watermark_ms`, the newest event time seen before it less
    the horizon; a window closed once that newest time passed its end by `allowed_lateness`. None: no
    event was seen before the batch, so nothing had closed.
    """
    if late_watermark_ms <= 0:
        return None
    newest = late_watermark_ms + watermark_delay_ms(view)
    return newest - duration_ms(view.allowed_lateness, "allowed_lateness")


def unmatched_message(view: AggregateView, negative: int, updated: DataFrame) -> str:
    from pyspark.sql import functions as F

    first = updated.where(F.col(ROWS) < 0).first()
    example = {k: str(first[k]) for k in (*WINDOW_COLUMNS, *view.group_by)} if first is not None else {}
    return (
        f"aggregate {view.name!r}: {negative} window row(s) would hold fewer than 0 rows (e.g. {example}): "
        "the source took back rows whose adding this view never read. The topic's history is incomplete "
        "(compacted or deleted before the view read it, or the view started after the rows were added), "
        "or the rows' adding was refused (see the dead-letter topic). Nothing of this batch was written. "
        "Rebuild the view from a complete history: a new checkpoint and table over a topic that holds a "
        "fresh snapshot and every change since"
    )
