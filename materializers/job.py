"""Run one materializer as a Structured Streaming query on Spark's Kafka source.

Guarantees: every view is idempotent per change (positions) and per micro-batch (batch id / Delta
txn), so the at-least-once replays of Structured Streaming (a batch re-run after a crash, a restart
from older offsets) leave every view as if each record was applied once.
Order inside a micro-batch (`process_batch`), before Spark commits the batch to its checkpoint:
1. decode in the JVM (from_json / from_avro) into one frame of changes + error rows, persisted
   (a driver that keeps the cache alone decodes and applies in one pass instead: see process_batch);
2. error rows -> dead-letter topic;
3. Redis cache from executors, through Arrow (CDC upserts where Spark read them, in offset order; a
   fold's patches partitioned by entity, sorted by version); gaps -> dead letters;
4. search index on the driver (latest change per entity, one commit with the batch marker);
5. Delta history append + current MERGE (txn app id / version), OPTIMIZE every N batches.
A crash anywhere in 1-5 re-runs the whole batch; each step skips what it already did.
The app id (Delta txnAppId, search marker) is created with the checkpoint and stored beside it in
`job.json`, which also pins the checkpoint to one materializer and topic.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kafkakit.clients import admin_client
from kafkakit.limits import DEAD_LETTER_MAX_RECORD_BYTES
from kafkakit.positions import StartPosition, parse_offsets_json
from materializers import checkpoint, dead_letters, lifecycle, positions
from materializers.avro_events import WriterSchemas
from materializers.changes import split
from materializers.config import RunConfig
from materializers.driver_memory import release_freed_memory
from materializers.errors import CheckpointMismatch, SourceUnavailable
from materializers.spec import Materializer
from materializers.timeline import StepClock
from materializers.views.delta_warehouse import DeltaWarehouse
from materializers.views.redis_cache import REJECT_DDL, RedisCache, Reject
from materializers.views.search_index import SearchIndex, latest_changes

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming.query import StreamingQuery

log = logging.getLogger(__name__)
IDENTITY_FILE = "job.json"
GENERATIONS_DIR = "generations"
REDIS_COLUMNS = (
    "entity",
    "position",
    "op",
    "set_fields",
    "del_fields",
    "keep_fields",
    "src_topic",
    "src_partition",
    "src_offset",
)
FIELD_MAPS = ("set_fields", "del_fields")

# Debezium's JSON records carry their schema (~2.5 KB each): the consumer's default 1 MiB per
# partition fetch meant a round trip per ~400 records (reading 50k: 1.5 -> 0.9 s).
SOURCE_FETCH = {
    "kafka.max.partition.fetch.bytes": str(16 << 20),
    "kafka.fetch.max.bytes": str(64 << 20),
}


@dataclass(frozen=True, slots=True, kw_only=True)
class JobPlan:
    """Everything a run needs, resolved from the spec and the run config (pure)."""

    spec: Materializer
    config: RunConfig
    topic: str
    dlq_topic: str
    job_dir: Path
    checkpoint: Path
    generation: str = ""  # "" = the layout before any rebuild; see generations.py
    view_dir: Path = Path()

    @classmethod
    def of(cls, spec: Materializer, config: RunConfig, generation: str = "") -> JobPlan:
        """The plan of one generation of the views ("" = the original layout, directly in the job dir)."""
        topic = config.topic or spec.default_topic
        job_dir = config.job_dir(spec.name)
        view_dir = job_dir / GENERATIONS_DIR / generation if generation else job_dir
        return cls(
            spec=spec,
            config=config,
            topic=topic,
            dlq_topic=config.dlq_topic or f"{topic}.dlq",
            job_dir=job_dir,
            checkpoint=Path(config.checkpoint) if config.checkpoint else view_dir / "checkpoint",
            generation=generation,
            view_dir=view_dir,
        )

    @property
    def base_prefix(self) -> str:
        """The Redis prefix readers start from; its `@live` key names the live generation's prefix."""
        return f"{self.config.redis_prefix}:{self.spec.name}"

    @property
    def redis_prefix(self) -> str:
        # `@` keeps a generation's keys outside the SCAN pattern `<base>:*` of the original layout.
        return f"{self.base_prefix}@{self.generation}" if self.generation else self.base_prefix

    def cache(self) -> RedisCache:
        return RedisCache(self.config.endpoints.redis_url, self.redis_prefix)

    def search(self) -> SearchIndex | None:
        return (
            SearchIndex(self.view_dir / "search", self.spec.search_fields)
            if self.spec.search_fields and self.keeps("search")
            else None
        )

    def keeps(self, view: str) -> bool:
        return view in self.config.views

    def warehouse(self) -> DeltaWarehouse:
        return DeltaWarehouse(
            self.view_dir / "delta",
            self.spec.data_ddl,
            self.spec.current_table,
            driver_rows=self.config.warehouse_driver_rows,
        )


def claim_checkpoint(plan: JobPlan) -> str:
    """The checkpoint's app id; refuse a checkpoint that belongs to another materializer or topic."""
    ident = plan.checkpoint / IDENTITY_FILE
    expected = {"materializer": plan.spec.name, "topic": plan.topic}
    if ident.is_file():
        found = json.loads(ident.read_text())
        if {k: found.get(k) for k in expected} != expected:
            raise CheckpointMismatch(
                f"checkpoint {plan.checkpoint} belongs to materializer {found.get('materializer')!r} on topic "
                f"{found.get('topic')!r}, not {plan.spec.name!r} on {plan.topic!r}; pass another --checkpoint "
                "or delete that directory to start over"
            )
        return str(found["app_id"])
    if plan.checkpoint.is_dir() and any(plan.checkpoint.iterdir()):
        raise CheckpointMismatch(
            f"checkpoint {plan.checkpoint} was written by a different query (no {IDENTITY_FILE}); "
            "pass an empty or new --checkpoint directory"
        )
    plan.checkpoint.mkdir(parents=True, exist_ok=True)
    app_id = f"{plan.spec.name}-{uuid.uuid4().hex}"
    ident.write_text(json.dumps({**expected, "app_id": app_id}))
    return app_id


def reset_checkpoint(plan: JobPlan, offsets: dict[str, dict[str, int]], note: str) -> str:
    """Replace the checkpoint with a new, empty one (new app id) pinned to start at `offsets`.

    A new app id is needed because the new checkpoint's batch ids restart at 0, which Delta
    (txnAppId/txnVersion) and the search marker would otherwise skip as already written.
    """
    if plan.checkpoint.exists():
        shutil.rmtree(plan.checkpoint)
    plan.checkpoint.mkdir(parents=True)
    app_id = f"{plan.spec.name}-{uuid.uuid4().hex}"
    ident = {"materializer": plan.spec.name, "topic": plan.topic, "app_id": app_id}
    (plan.checkpoint / IDENTITY_FILE).write_text(json.dumps({**ident, "start": offsets, "note": note}))
    return app_id


def pinned_start(plan: JobPlan) -> StartPosition | None:
    """The start offsets `reset_checkpoint` pinned, while the checkpoint has not committed a batch.

    Once a batch is committed Spark resumes from the checkpoint and ignores any start position.
    """
    ident = plan.checkpoint / IDENTITY_FILE
    if not ident.is_file() or checkpoint.batch_ids(plan.checkpoint / "commits"):
        return None
    pinned = json.loads(ident.read_text()).get("start")
    return parse_offsets_json(json.dumps(pinned)) if pinned else None


def topic_partitions(bootstrap: str, topic: str) -> list[int]:
    with admin_client({"bootstrap.servers": bootstrap}) as admin:
        meta = admin.list_topics(timeout=10)
    found = meta.topics.get(topic)
    if found is None or found.error is not None:
        raise SourceUnavailable(
            f"input topic {topic!r} does not exist on {bootstrap}; create it or pass --topic"
        )
    return sorted(found.partitions)


def ensure_topic(bootstrap: str, topic: str) -> None:
    """Create the dead-letter topic if missing (this broker does not auto-create topics)."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import NewTopic  # type: ignore[attr-defined]

    with admin_client({"bootstrap.servers": bootstrap}) as admin:
        if topic in admin.list_topics(timeout=10).topics:
            return
        try:
            # A dead letter carries its source record whole: the topic takes records as large as CDC's.
            config = {"max.message.bytes": str(DEAD_LETTER_MAX_RECORD_BYTES)}
            admin.create_topics([NewTopic(topic, 1, 1, config=config)])[topic].result(timeout=30)
        except KafkaException as exc:
            if "TOPIC_ALREADY_EXISTS" not in str(exc):
                raise SourceUnavailable(f"cannot create dead-letter topic {topic!r}: {exc}") from exc


class Job:
    """The imperative shell around one materializer's streaming query."""

    def __init__(self, spark: SparkSession, plan: JobPlan) -> None:
        self.spark = spark
        self.plan = plan
        self.cache = plan.cache()
        self.index = plan.search()
        self.warehouse = plan.warehouse()
        self.schemas = WriterSchemas(plan.config.endpoints.schema_registry_url)
        self.decode = plan.spec.decoder()
        self.app_id = ""
        self.dead_letters = 0
        self.clock = StepClock()  # the views' steps per batch, for the driver's timeline

    def prepare(self) -> None:
        """Fail before anything is written: Redis, the topic, the checkpoint's owner; then create state."""
        if self.plan.keeps("cache"):
            self.cache.check()
        bootstrap = self.plan.config.endpoints.kafka_bootstrap_servers
        topic_partitions(bootstrap, self.plan.topic)
        self.app_id = claim_checkpoint(self.plan)
        ensure_topic(bootstrap, self.plan.dlq_topic)
        if self.plan.keeps("warehouse"):
            self.warehouse.ensure_tables(self.spark)
        if self.index is not None:
            self.index.index()

    def start(self, start: StartPosition, *, available_now: bool = False) -> StreamingQuery:
        """Start the query; a checkpoint pinned by a restore starts at the snapshot's offsets instead."""
        self.prepare()
        start = pinned_start(self.plan) or start
        bootstrap = self.plan.config.endpoints.kafka_bootstrap_servers
        options = positions.spark_start_options(
            start, {self.plan.topic: topic_partitions(bootstrap, self.plan.topic)}
        )
        reader = (
            self.spark.readStream.format("kafka")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", self.plan.topic)
            .option("includeHeaders", "true")
            .options(**SOURCE_FETCH, **options)
        )
        if self.plan.config.max_offsets_per_trigger:
            reader = reader.option("maxOffsetsPerTrigger", str(self.plan.config.max_offsets_per_trigger))
        writer = (
            reader.load()
            .writeStream.queryName(f"{self.plan.spec.name}-{self.app_id[-8:]}")
            .option("checkpointLocation", str(self.plan.checkpoint))
            .foreachBatch(self.process_batch)
        )
        writer = (
            writer.trigger(availableNow=True)
            if available_now
            else writer.trigger(processingTime=self.plan.config.trigger)
        )
        return writer.start()

    # --- one micro-batch ---------------------------------------------------------------------------

    def process_batch(self, batch: DataFrame, batch_id: int) -> None:
        from pyspark.sql import functions as F

        timed = self.clock.timed
        if self._small(batch_id):
            self._in_driver(batch, batch_id)
            return
        with timed(batch_id, "plan"):  # Avro: the batch's writer schema ids are collected first
            decoded = self.decode(batch, self.schemas)
        only = self._only_view()
        # A view that is the job's only reader decodes and applies in ONE Spark job, nothing
        # persisted; undecodable records come back beside the changes (cache: 6.8 -> 5.0 s per 50k
        # records on one core; search: 1.7 -> 0.6-0.8 s per 4k-record batch).
        if only == "cache":
            self._failpoint("before-views", batch_id)
            with timed(batch_id, "cache"):
                self._cache(self._ordered(decoded), batch)
            return
        if only == "search":
            self._failpoint("before-views", batch_id)
            with timed(batch_id, "search"):
                self._index(decoded, batch_id, batch)
            return
        # Persisted once decoded: every step below reads the decoded rows, none decodes again. Only
        # the cache reads the field maps (the other views read the data columns): without it they are
        # neither built nor cached (they repeat every data value; warehouse-only 2M-row backfill:
        # 8,024 -> 11,398 rows/s).
        decoded = (decoded if self.plan.keeps("cache") else decoded.drop(*FIELD_MAPS)).persist()
        try:
            changes, errors = split(decoded)
            with timed(batch_id, "decode"):
                rows, failed = decoded.agg(F.count(F.lit(1)), F.count("error")).first() or (0, 0)
            if failed:
                with timed(batch_id, "dead_letters"):
                    self._dead_letter(errors, failed)
            if rows > failed:
                self._failpoint("before-views", batch_id)
                changes = self._ordered(changes)
                changes = changes.persist() if self.plan.spec.sequential else changes
                self._views(changes, batch, batch_id, rows - failed)
            if self.plan.keeps("warehouse") and (batch_id + 1) % self.plan.config.optimize_every == 0:
                with timed(batch_id, "optimize"):
                    self.warehouse.optimize(batch.sparkSession, rows - failed)
        finally:
            decoded.unpersist()

    def _small(self, batch_id: int) -> bool:
        """Whether the batch is small enough to apply whole from the driver (see `_in_driver`)."""
        bound = checkpoint.planned_records(self.plan.checkpoint, batch_id)
        if bound is None or bound > self.plan.config.small_batch_rows:
            return False
        return not self.plan.keeps("warehouse") or self.warehouse.in_driver(bound)

    def _in_driver(self, batch: DataFrame, batch_id: int) -> None:
        """A small batch: ONE Spark job decodes it into Arrow in the driver, and every view is written
        from there, where the executors' path runs a Spark job per view (the decode persisted, the
        cache's mapInArrow on Python workers, a collect for the index). Live batches of ~100 records
        spent most of their ~2 s in those jobs' scheduling, and a restarted driver's first batch
        waited for its Python workers to start."""
        import pyarrow.compute as pc

        timed = self.clock.timed
        with timed(batch_id, "decode_to_driver"):
            table = self._decoded_in_driver(batch, self.schemas.trusting_cache())
        if "schema_id" in table.column_names:
            if self.schemas.learn(table.column("schema_id").drop_null().to_pylist()):
                with timed(batch_id, "decode_again"):  # a writer schema first seen in this batch
                    table = self._decoded_in_driver(batch, self.schemas)
            table = table.drop_columns(["schema_id"])
        if "error" in table.column_names:
            failed = table.filter(pc.is_valid(table.column("error")))
            self._dead_letter_rejects(batch, [
                (r["src_topic"], r["src_partition"], r["src_offset"], r["error"]) for r in failed.to_pylist()
            ])  # fmt: skip
            table = table.filter(pc.is_null(table.column("error"))).drop_columns(["error"])
        if self.plan.spec.sequential:  # a fold's patches apply in version order per stream
            table = table.sort_by([("entity", "ascending"), ("position", "ascending")])
        if table.num_rows:
            self._failpoint("before-views", batch_id)
            with ThreadPoolExecutor(max_workers=1, thread_name_prefix="cache") as pool:
                cached = pool.submit(self._cache_table, table, batch_id) if self.plan.keeps("cache") else None
                if self.index is not None:
                    with timed(batch_id, "search"):
                        self._index_rows(
                            table.select(self._index_columns(table)).to_pylist(), batch_id, batch
                        )
                if self.plan.keeps("warehouse"):
                    with timed(batch_id, "warehouse"):
                        self.warehouse.write_collected(
                            batch.sparkSession, table, self.app_id, batch_id, self.plan.spec.data_columns
                        )
                rejects = cached.result() if cached is not None else []
            self._dead_letter_rejects(batch, rejects)
            self._failpoint("after-warehouse", batch_id)
        if self.plan.keeps("warehouse") and (batch_id + 1) % self.plan.config.optimize_every == 0:
            with timed(batch_id, "optimize"):
                self.warehouse.optimize(batch.sparkSession, table.num_rows)

    def _decoded_in_driver(self, batch: DataFrame, schemas: WriterSchemas) -> pa.Table:
        """The batch decoded, as Arrow in the driver: the columns the views read (one Spark job)."""
        from pyspark.sql import functions as F

        decoded = self.decode(batch, schemas).drop("src_key", "src_value")  # dead letters re-read them
        if self.plan.keeps("warehouse"):
            decoded = decoded.withColumn("event_date", F.to_date("event_ts"))  # as Spark's path does
        return (decoded if self.plan.keeps("cache") else decoded.drop(*FIELD_MAPS)).toArrow()

    def _cache_table(self, table: pa.Table, batch_id: int) -> list[Reject]:
        """The cache written from the driver, by the function the executors run on their partitions."""
        with self.clock.timed(batch_id, "cache"):
            out = self.cache.apply_arrow(iter(table.select(list(REDIS_COLUMNS)).to_batches()))
            rejects = [r for part in out for r in part.to_pylist()]
        self._failpoint("after-cache", batch_id)
        return [(r["topic"], r["partition"], r["offset"], r["error"]) for r in rejects]

    def _only_view(self) -> str | None:
        kept = [v for v in ("cache", "warehouse") if self.plan.keeps(v)] + (["search"] if self.index else [])
        return kept[0] if len(kept) == 1 else None

    def _ordered(self, changes: DataFrame) -> DataFrame:
        # A fold's patches apply in version order: one task per stream, sorted. CDC upserts commute.
        if not self.plan.spec.sequential:
            return changes
        return changes.repartition("entity").sortWithinPartitions("entity", "position")

    def _views(self, changes: DataFrame, batch: DataFrame, batch_id: int, rows: int) -> None:
        timed = self.clock.timed
        try:
            # The executors write the cache while the driver writes the index and a small warehouse
            # batch: neither waits for the other.
            with ThreadPoolExecutor(max_workers=1, thread_name_prefix="cache") as pool:
                cached = (
                    pool.submit(self._timed_cache, changes, batch_id) if self.plan.keeps("cache") else None
                )
                data = self.plan.spec.data_columns
                # A small batch reaches the driver once for the index and the warehouse (a Spark job less).
                collected = None
                if self.index is not None and self.plan.keeps("warehouse") and self.warehouse.in_driver(rows):
                    with timed(batch_id, "collect"):
                        collected = self.warehouse.collect(changes, data, self.plan.spec.search_fields)
                if self.index is not None:
                    with timed(batch_id, "search"):
                        self._index(changes, batch_id, batch, collected)
                if self.plan.keeps("warehouse"):
                    with timed(batch_id, "warehouse"):
                        self.warehouse.write_batch(changes, self.app_id, batch_id, data, rows, collected)
                rejects = cached.result() if cached is not None else []
            self._dead_letter_rejects(batch, rejects)
            self._failpoint("after-warehouse", batch_id)
        finally:
            changes.unpersist()

    def _timed_cache(self, changes: DataFrame, batch_id: int) -> list[Reject]:
        with self.clock.timed(batch_id, "cache"):
            return self._cache_rejects(changes, batch_id)

    def _cache(self, changes: DataFrame, batch: DataFrame) -> None:
        self._dead_letter_rejects(batch, self._cache_rejects(changes))

    def _cache_rejects(self, changes: DataFrame, batch_id: int | None = None) -> list[Reject]:
        """CDC upserts commute (the Lua position check), so they apply where Spark read them, in offset
        order; a fold's patches arrive partitioned by stream and sorted by version (`_ordered`).
        `changes` may still hold the decoder's error rows: those come back as rejects, unapplied."""
        columns = [*REDIS_COLUMNS, *(["error"] if "error" in changes.columns else [])]
        rejects = changes.select(*columns).mapInArrow(self.cache.apply_arrow, REJECT_DDL).collect()
        if batch_id is not None:
            self._failpoint("after-cache", batch_id)
        return [(r["topic"], r["partition"], r["offset"], r["error"]) for r in rejects]

    def _dead_letter_rejects(self, batch: DataFrame, rejects: list[Reject]) -> None:
        if rejects:
            self._dead_letter(dead_letters.rejects_frame(batch, rejects), len(rejects))

    def _dead_letter(self, errors: DataFrame, count: int) -> None:
        dead_letters.write(
            errors,
            bootstrap=self.plan.config.endpoints.kafka_bootstrap_servers,
            topic=self.plan.dlq_topic,
            materializer=self.plan.spec.name,
        )
        self.dead_letters += count
        log.warning(
            "%d record(s) of %s sent to dead-letter topic %s", count, self.plan.topic, self.plan.dlq_topic
        )

    def _index(
        self, changes: DataFrame, batch_id: int, batch: DataFrame, collected: pa.Table | None = None
    ) -> None:
        """Every change of the batch comes to the driver (the index's single writer) through Arrow and
        is folded there to each entity's newest: one Spark job, where a Spark-side fold (a shuffle)
        and a collect of Rows took two. Collected whole, not streamed: toLocalIterator ran the 1 GiB
        driver JVM out of heap on 250k-entity backfill batches. `changes` may still hold the
        decoder's error rows: those go to the dead-letter topic. `collected`: the batch as the
        warehouse collected it (error rows split off), if it did."""
        wanted = self._index_columns(collected if collected is not None else changes)
        rows = (
            collected.select(wanted) if collected is not None else changes.select(*wanted).toArrow()
        ).to_pylist()
        self._index_rows(rows, batch_id, batch)

    def _index_columns(self, source: DataFrame | pa.Table) -> list[str]:
        errors = ["src_topic", "src_partition", "src_offset", "error"] if "error" in source.columns else []
        return ["entity", "position", "op", "keep_fields", *self.plan.spec.search_fields, *errors]

    def _index_rows(self, rows: list[dict[str, Any]], batch_id: int, batch: DataFrame) -> None:
        assert self.index is not None
        failed = [
            (r["src_topic"], r["src_partition"], r["src_offset"], r["error"]) for r in rows if r.get("error")
        ]
        self._dead_letter_rejects(batch, failed)
        latest = latest_changes((r for r in rows if not r.get("error")), self.plan.spec.search_fields)
        if latest:
            self.index.apply_batch(self.app_id, batch_id, latest)
        del rows, latest
        release_freed_memory()

    def _failpoint(self, step: str, batch_id: int) -> None:
        """Test hook (RunConfig.failpoint "<step>:<marker>[:until-stop]"): announce the step, then block.

        Plain: block (to be killed mid-batch). `until-stop`: hold the batch open until a stop is
        requested, then finish it — so a test can ask for a stop while a batch is in flight.
        """
        name, _, rest = self.plan.config.failpoint.partition(":")
        marker, _, mode = rest.partition(":")
        if name != step or not marker or Path(marker).exists():
            return
        Path(marker).write_text(f"{os.getpid()} {batch_id}")
        deadline = time.monotonic() + 300
        stop = lifecycle.stop_file(self.plan.job_dir)
        while time.monotonic() < deadline and not (mode == "until-stop" and stop.exists()):
            time.sleep(0.2)

    # --- the driver's main loop ----------------------------------------------------------------

    def run(self, start: StartPosition, *, available_now: bool = False) -> int:
        """Run until SIGTERM/SIGINT, a stop request or (available_now) caught up; publish status.

        Returns 0 on a clean stop, 1 when the query failed. (`runner.run` drives several jobs.)
        """
        from materializers import runner

        return runner.run([self], start, available_now=available_now)
