"""Run one materializer as a Structured Streaming query on Spark's Kafka source.

A job drives the plan's views (`JobPlan.views`) through the `View` protocol (view.py) and knows none
of them by name.
Guarantees: every view is idempotent per change (positions) and per micro-batch (batch id / Delta
txn), so the at-least-once replays of Structured Streaming (a batch re-run after a crash, a restart
from older offsets) leave every view as if each record was applied once.
Order inside a micro-batch (`process_batch`), before Spark commits the batch to its checkpoint:
1. decode in the JVM (from_json / from_avro) into one frame of changes + error rows. The decode is
   part of the streaming query itself, built once with the writer schemas known when the query
   starts: Spark hands every batch over decoded (a decode built per batch analysed its plan again in
   the driver every batch, the most on a cold JVM). A small batch goes into Arrow in the driver
   (`_in_driver`, one Spark job), a larger one is persisted (a job whose only view is `single_pass`
   applies it in one pass instead: see process_batch). Records whose writer schema the query did not
   know come out as error rows with their `schema_id`: the job learns the new ids from the registry,
   reads those records again from Kafka by their offsets and decodes them knowing the new schemas,
   and the driver loop restarts the query after that batch so that later batches decode them in one pass
   (`stale`, driver_loop.py). So do JSON records where the query reads Avro only (debezium.DebeziumDecoder: a
   topic that holds Avro records is read without a JSON reader until one is met);
2. error rows -> dead-letter topic;
3. the views: `parallel` ones (the Redis cache, from the executors through Arrow: CDC upserts where
   Spark read them, a fold's patches partitioned by entity and sorted by version) in a thread of
   their own, meanwhile the others in turn in the driver (the search index: latest change per
   entity, one commit with the batch marker; the Delta warehouse: history append + current MERGE
   with txn app id / version), sharing ONE collect when several want the batch in the driver;
4. what the views refused (a fold's version gap) -> dead letters;
5. every N batches each view compacts (Delta OPTIMIZE).
A crash anywhere in 1-5 re-runs the whole batch; each step skips what it already did.
Failpoints (tests kill -9 there): `before-views`, `after-<view name>` after each view's apply (in its
thread), `after-views` after every view and the dead letters (`after-warehouse`, its old name, still
names that step: the warehouse's own `after-<name>` is therefore reached as `after-views`).
The app id (Delta txnAppId, search marker) is created with the checkpoint and stored beside it in
`job.json`, which also pins the checkpoint to one materializer and topic.
"""

from __future__ import annotations

import json
import logging
import shutil
import uuid
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import replace
from typing import TYPE_CHECKING, TypeVar

from kafkakit.positions import StartPosition, parse_offsets_json
from materializers import failpoints
from materializers.config import is_local
from materializers.decode import positions
from materializers.decode.avro_events import WriterSchemas, learn_topic_schemas
from materializers.decode.changes import COORDINATES, split
from materializers.decode.event_shape import UNFRAMED_ID
from materializers.errors import CheckpointMismatch, SourceUnavailable
from materializers.plan import GENERATIONS_DIR as GENERATIONS_DIR
from materializers.plan import JobPlan as JobPlan
from materializers.runtime import batch_size, checkpoint, dead_letters, lifecycle, status
from materializers.runtime.kafka_topics import ensure_topic, topic_partitions
from materializers.runtime.timeline import StepClock
from materializers.view import FrameBatch, Reject, TableBatch, View, collect, event_date, split_refused

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import Column, DataFrame, SparkSession
    from pyspark.sql.streaming.query import StreamingQuery
    from pyspark.sql.streaming.readwriter import DataStreamWriter

log = logging.getLogger(__name__)
IDENTITY_FILE = "job.json"
B = TypeVar("B", TableBatch, FrameBatch)  # the batch of one path, as every view of the job gets it
FIELD_MAPS = ("set_fields", "del_fields")  # only the cache reads them; they repeat every data value

# Debezium's JSON records carry their schema (~2.5 KB each): the consumer's default 1 MiB per
# partition fetch meant a round trip per ~400 records.
# A batch's reader also asks for offsets that hold no record (a transaction's commit marker, the
# range's end), and the broker holds such an empty fetch for fetch.max.wait.ms (500 ms by default):
# that wait was most of the time a live batch took to read, from a CDC topic and more so from the
# event store's transactional one. Every offset asked for was
# planned, so nothing is waited for in vain.
# Spark's reader asks the broker for the partition's earliest and latest offsets after every poll
# (InternalKafkaConsumer.fetch, Spark 4.2: two ListOffsets round trips), and a poll hands over at most
# max.poll.records of what the fetch brought (500 by default): two round trips per 500 records were a
# large share of a backfill's executor time, so a poll hands over 5,000 (bench/results/history.md,
# "5,000 records per poll"). It bounds what a poll returns of data already fetched, not what a fetch
# holds, nor how long a poll waits.
SOURCE_FETCH = {
    "kafka.max.partition.fetch.bytes": str(16 << 20),
    "kafka.fetch.max.bytes": str(64 << 20),
    "kafka.fetch.max.wait.ms": "10",
    "kafka.max.poll.records": "5000",
}


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


class Job:
    """The imperative shell around one materializer's streaming query: it claims the checkpoint,
    starts the Kafka source and drives the plan's views through each micro-batch in the order the
    module docstring numbers (decode, dead letters, views, rejects, compaction).

    `materializers.run` builds one per materializer, all on one SparkSession, and runs them; build
    one yourself only to drive a query from code that already holds a session.

    Parameters:
        spark: the driver's session (`materializers.spark.session.build` adds the Kafka, Avro and
            Delta jars and the settings the views rely on).
        plan: the materializer resolved against a `RunConfig` (`JobPlan.of`, or the live generation's
            plan): topic, checkpoint, dead-letter topic and views. The views are built here.

    Raises:
        BadView: a view of the materializer does not implement the `View` protocol, or two share a
            name.
        UnknownView: `RunConfig.views` names a view the materializer does not keep.

    Example: docs/examples/materializer_job.py (the shop's `orders` materializer over a fresh
    store's events, its Redis cache only, caught up once):

        >>> config = RunConfig.from_env().with_overrides(home=home, topic=events, views="cache")
        >>> run(ORDERS, config=config, start="earliest", available_now=True)  # every query stopped
        0
        >>> plan = JobPlan.of(ORDERS, config)  # what the job ran: topic, checkpoint, views
        >>> verify(plan)  # the cache holds the fold of the topic
        []
    """

    def __init__(self, spark: SparkSession, plan: JobPlan) -> None:
        self.spark = spark
        sized = batch_size.sized(plan.config, plan.topic, spark, warehouse_only=plan.warehouse_only())
        self.plan = plan = replace(plan, config=sized)
        self.views: list[View] = plan.views()
        self.schemas = WriterSchemas(
            plan.config.endpoints.schema_registry_url, auth=plan.config.endpoints.schema_registry_auth
        )
        self.decode = plan.spec.decoder()
        # Spark's Kafka source converts every header of every record when asked to (Debezium adds four
        # to each), so they are asked for only when the decoder reads them; one that does not say so
        # (`reads_headers`) is taken to read them.
        self._headers: bool = getattr(self.decode, "reads_headers", True)
        # A decoder that reads JSON only once the job met a JSON record (debezium.DebeziumDecoder) is told so.
        self._meet_json: Callable[[], None] | None = getattr(self.decode, "meet_json", None)
        self._query_json = True  # whether the running query's decode reads JSON records
        self.app_id = ""
        self.streamed: frozenset[int] = frozenset()  # the writer schemas the running query decodes with
        self.task_records = 0  # records the running query's tasks read at most (split_reads; 0: a partition)
        self._start: StartPosition | None = None  # where a new checkpoint begins, for `restart`
        # `_to_driver`'s projection, by the decoded columns it was built for
        self._driver_projection: tuple[tuple[str, ...], list[Column]] = ((), [])
        self.dead_letters = 0
        self.clock = StepClock()  # the views' steps per batch, for the driver's timeline

    @property
    def small_batch_rows(self) -> int:
        """Records a batch applied whole from the driver holds at most (sized in `__init__`)."""
        rows = self.plan.config.small_batch_rows
        assert rows is not None, "batch_size.sized resolves auto"
        return rows

    def prepare(self) -> None:
        """Fail before anything is written: the views' stores, the topic, the checkpoint's owner; then
        create state (the dead-letter topic, each view's). `start` does both.

        Raises:
            ViewUnavailable: a view's store cannot be reached (its `check`).
            SourceUnavailable: the input topic does not exist, or the dead-letter topic cannot be
                created.
            CheckpointMismatch: the checkpoint belongs to another materializer or topic, or to a
                query that did not write `job.json`.
        """
        self._check()
        self._create_state()

    def _check(self) -> None:
        """`prepare`'s checks, which write nothing but the checkpoint's claim."""
        for view in self.views:
            view.check()
        endpoints = self.plan.config.endpoints
        topic_partitions(
            endpoints.kafka_bootstrap_servers, self.plan.topic, client_config=endpoints.kafka_client
        )
        self.app_id = claim_checkpoint(self.plan)

    def _create_state(self) -> None:
        """`prepare`'s state: the dead-letter topic, each view's, and the topic's writer schemas."""
        self._create_stores()
        self._learn_schemas()

    def _create_stores(self) -> None:
        """The dead-letter topic and each view's state (tables, directories)."""
        endpoints = self.plan.config.endpoints
        ensure_topic(
            endpoints.kafka_bootstrap_servers, self.plan.dlq_topic, client_config=endpoints.kafka_client
        )
        for view in self.views:
            view.prepare(self.spark)

    def _learn_schemas(self) -> None:
        """The writer schemas of the topic's subjects (`<topic>-*`), before the first batch. A job that
        knew none read its first batch three times: every record refused, its ids looked up, decoded
        again (in the one-pass path the refusals went through the driver: a task result as large as
        the batch's records).
        Ids registered later are learnt per batch. A registry that does not answer leaves it to the
        batches: a JSON topic needs none. (AggregateJob's namesake raises instead: its plan needs the
        schemas, this job only starts faster with them.)"""
        try:
            learn_topic_schemas(self.schemas, self.plan.topic)
        except SourceUnavailable as exc:
            log.info("writer schemas of %s not fetched before the first batch: %s", self.plan.topic, exc)

    def start(self, start: StartPosition, *, available_now: bool = False) -> StreamingQuery:
        """Prepare, then start the streaming query and return it (running in Spark's threads).

        Parameters:
            start: where a new checkpoint begins (`earliest`, `latest`, offsets per partition or a
                timestamp). A checkpoint that has committed a batch resumes where it stopped and
                ignores it; one pinned by a restore starts at the snapshot's offsets instead.
            available_now: read what the topic holds now, in as many batches as
                `max_offsets_per_trigger` makes, then stop; default False (a batch every
                `RunConfig.trigger` until stopped).

        Raises:
            ViewUnavailable, SourceUnavailable, CheckpointMismatch: as `prepare`.
        """
        self._check()
        self._start = pinned_start(self.plan) or start
        # Spark plans the source and the decode (which write nothing) while the stores are created
        # and the writer schemas fetched: on a cold driver each of these takes a good part of a
        # second, the decode's plan the most, so side by side they shorten every start.
        with ThreadPoolExecutor(2, thread_name_prefix="job-state") as pool:
            created = pool.submit(self._create_stores)
            learnt = pool.submit(self._learn_schemas)
            raw = self._source()
            learnt.result()  # the decode reads every writer schema known
            writer = self._writer(available_now, raw)
            created.result()
        return writer.start()

    def stale(self) -> bool:
        """Whether the job knows writer schemas the running query does not decode with, or met JSON
        records where the query reads Avro only: such records are read and decoded twice in every
        batch (`_decoded_again`) until `restart`."""
        json_met = not self._query_json and getattr(self.decode, "json_met", False)
        return json_met or not set(self.schemas.known()) <= self.streamed

    def counted(self, current: status.JobStatus, query: StreamingQuery | None) -> status.JobStatus:
        """`current` as it is: a view job's totals are the progress and its dead letters, which the
        driver loop records itself."""
        return current

    def restart(self, *, available_now: bool = False) -> StreamingQuery:
        """Start the query again, decoding with every writer schema known now (and JSON, once met);
        it resumes from the checkpoint (the caller stopped the previous one between batches)."""
        return self._writer(available_now, self._source()).start()

    def _writer(self, available_now: bool, raw: DataFrame) -> DataStreamWriter:
        """The streaming query over `raw`, ready to start."""
        schemas = self.schemas.trusting_cache()
        decoded = self.decode(raw, schemas)
        self.streamed, self._query_json = frozenset(schemas.known()), self._decode_reads_json()
        writer = (
            self._kept(decoded)
            .writeStream.queryName(f"{self.plan.spec.name}-{self.app_id[-8:]}")
            .option("checkpointLocation", str(self.plan.checkpoint))
            .foreachBatch(self.process_batch)
        )
        return triggered(writer, self.plan, available_now)

    def _source(self) -> DataFrame:
        """The topic as a streaming frame from where the query starts, its batches and tasks sized."""
        assert self._start is not None, "start() first"
        small, context = self.small_batch_rows, self.spark.sparkContext
        master = context.master or ""
        cap = batch_cap(
            self.plan.config.max_offsets_per_trigger,
            small,
            master,
            collects=bool(small) and any(view.collects(small) for view in self.views),
        )
        self.task_records = split_reads(
            cap, small, self.views, context.defaultParallelism, local=is_local(master)
        )
        return source_stream(
            self.spark,
            self.plan,
            self._start,
            max_offsets=cap,
            headers=self._headers,
            split=self.task_records,
        )

    def _kept(self, decoded: DataFrame) -> DataFrame:
        """`decoded` without the columns no step reads: the field maps when no view reads them (they
        repeat every data value), and an error row's bytes (`src_key`/`src_value`: a dead letter
        reads them back from Kafka). Each copy of the decoder's error expression that the bytes'
        columns carry was planned and code-generated again in every batch."""
        return decoded.drop("src_key", "src_value", *(() if self._reads(*FIELD_MAPS) else FIELD_MAPS))

    # --- one micro-batch ---------------------------------------------------------------------------

    def process_batch(self, batch: DataFrame, batch_id: int) -> None:
        """One micro-batch through steps 1-5 of the module docstring (Spark's `foreachBatch`): a small
        batch whole in the driver (`apply_table`), a large one as a DataFrame (`apply_frame`).

        Parameters:
            batch: the Kafka records Spark planned for this batch, decoded (the query's decode).
            batch_id: Spark's id for it, growing within the checkpoint; re-run with the same id
                after a crash, which is what the views' idempotence keys on.
        """
        timed = self.clock.timed
        planned = checkpoint.planned_records(self.plan.checkpoint, batch_id)
        if self._small(planned):
            self._in_driver(batch, batch_id)
            return
        sort = sorted_first(planned, self.task_records, sequential=self.plan.spec.sequential)
        # A view that is the job's only reader decodes and applies in ONE Spark job, nothing
        # persisted (persisting the decoded batch and reading it again cost the cache and the search
        # index much of their batch time); undecodable records come back beside the changes.
        if len(self.views) == 1 and self.views[0].single_pass:
            self._failpoint("before-views", batch_id)
            self._single_pass(batch, batch_id, sort)
            self._compact(batch.sparkSession, batch_id, None)
            return
        # Persisted once decoded: every step below reads the decoded rows, none decodes again.
        decoded, rows, failed = self._decoded_persisted(batch, batch_id)
        try:
            changes, errors = split(decoded)
            changes = changes.drop("schema_id")
            if failed:
                with timed(batch_id, "dead_letters"):
                    self._dead_letter(self._with_bytes(errors), failed)
            if rows > failed:
                self._failpoint("before-views", batch_id)
                changes = self._ordered(changes, sort)
                changes = changes.persist() if sort else changes
                try:
                    self._frames(changes, batch, batch_id, rows - failed)
                finally:
                    changes.unpersist()
            self._compact(batch.sparkSession, batch_id, rows - failed)
        finally:
            decoded.unpersist()

    def _decoded_persisted(self, batch: DataFrame, batch_id: int) -> tuple[DataFrame, int, int]:
        """The decoded batch persisted, its row count and its error count.

        The count's own job gathers the `schema_id`s of the error rows; a batch that showed a new one
        has those records decoded again knowing it (`_decoded_again`)."""
        from pyspark.sql import functions as F

        decoded = batch.persist()
        while True:
            aggregates = [F.count(F.lit(1)), F.count("error")]
            if "schema_id" in decoded.columns:
                aggregates.append(F.collect_set(F.when(F.col("error").isNotNull(), F.col("schema_id"))))
            with self.clock.timed(batch_id, "decode"):
                found = decoded.agg(*aggregates).first()
            if found is None:
                return decoded, 0, 0
            # _learn() is true only when it found an id it had never asked for, or JSON records
            # the decode had not read (decoded again, they are), so this ends.
            if len(found) < 3 or not self._learn(found[2]):
                return decoded, int(found[0]), int(found[1])
            with self.clock.timed(batch_id, "decode_again"):
                again = self._decoded_again(decoded).persist()
                again.count()  # computed before the frame it reads is dropped
            decoded.unpersist()
            decoded = again

    def _learn(self, ids: Iterable[int], *, json_read: bool = False) -> bool:
        """Learn what the `schema_id`s of a batch's undecoded records ask for: writer schemas not
        known yet, or reading JSON (UNFRAMED_ID) where the decode that refused them (`json_read`:
        read JSON) read Avro only. True: decoded again, more of those records now decode (the
        running query does not until `restart`)."""
        wanted = set(ids)
        meet = self._meet_json if UNFRAMED_ID in wanted and not json_read else None
        if meet is not None:
            meet()
        return self.schemas.learn(sorted(wanted - {UNFRAMED_ID})) or meet is not None

    def _decode_reads_json(self) -> bool:
        """Whether the decode built last reads JSON records (a decoder that does not say does)."""
        return bool(getattr(self.decode, "reads_json", True))

    def _decoded_again(self, decoded: DataFrame) -> DataFrame:
        """`decoded` with its error rows read again from Kafka and decoded with every writer schema
        known now (a record whose schema id the decode did not know is an error row there)."""
        from pyspark.sql import functions as F

        failed = F.col("error").isNotNull()
        coordinates = decoded.where(failed).select(*[F.col(f"src_{c}").alias(c) for c in COORDINATES])
        again = self._kept(self.decode(self._raw_records(coordinates), self.schemas))
        return decoded.where(~failed).unionByName(again)

    def _raw_records(self, coordinates: DataFrame) -> DataFrame:
        """The raw Kafka records at `coordinates` (topic, partition, offset; at least one), as the
        source reads them: a batch read of the offset range they span, those kept. The query hands
        over decoded rows only; the rare steps that need a record's bytes again (a new writer
        schema, a dead letter) read it back from the topic."""
        from pyspark.sql import functions as F

        spans = coordinates.groupBy("topic", "partition").agg(F.min("offset"), F.max("offset")).collect()
        bounds = [(str(t), int(p), int(low), int(high)) for t, p, low, high in spans]
        reader = self.spark.read.format("kafka").options(**kafka_options(self.plan, headers=self._headers))
        raw = reader.options(**positions.spark_range_options(bounds)).load()
        return raw.join(coordinates, list(COORDINATES), "left_semi")

    def _small(self, planned: int | None) -> bool:
        """Whether a batch of at most `planned` records (None: not known) is small enough to apply
        whole from the driver (see `_in_driver`)."""
        if planned is None or planned > self.small_batch_rows:
            return False
        return all(view.in_driver(planned) for view in self.views)

    def _reads(self, *columns: str) -> bool:
        """Whether any view reads one of `columns`."""
        return any(c in view.columns() for view in self.views for c in columns)

    def _in_driver(self, batch: DataFrame, batch_id: int) -> None:
        """A small batch: ONE Spark job decodes it into Arrow in the driver, and every view is written
        from there, where the executors' path runs a Spark job per view (the decode persisted, the
        cache's mapInArrow on Python workers, a collect for the index). Live batches of ~100 records
        spent most of their time in those jobs' scheduling, and a restarted driver's first batch
        waited for its Python workers to start."""
        import pyarrow.compute as pc

        timed = self.clock.timed
        with timed(batch_id, "decode_to_driver"):
            table = self._to_driver(batch)
        if "error" in table.column_names:
            if "schema_id" in table.column_names:
                failed = table.filter(pc.is_valid(table.column("error")))
                if self._learn(failed.column("schema_id").drop_null().to_pylist()):
                    with timed(batch_id, "decode_again"):  # a writer schema the query does not know
                        table = self._again_in_driver(table)
                table = table.drop_columns(["schema_id"])
            rejects, table = split_refused(table)
            self._dead_letter_rejects(rejects)
            table = table.drop_columns(["error"])
        if self.plan.spec.sequential:  # a fold's patches apply in version order per stream
            table = table.sort_by([("entity", "ascending"), ("position", "ascending")])
        if table.num_rows:
            self._failpoint("before-views", batch_id)
            whole = TableBatch(spark=batch.sparkSession, app_id=self.app_id, batch_id=batch_id, table=table)
            rejects = self._apply_all(batch_id, {view.name: whole for view in self.views}, Job._table)
            self._dead_letter_rejects(rejects)
            self._failpoint("after-views", batch_id)
        self._compact(batch.sparkSession, batch_id, table.num_rows)

    def _to_driver(self, decoded: DataFrame) -> pa.Table:
        """Decoded rows as Arrow in the driver: the columns the views read (one Spark job)."""
        names = tuple(decoded.columns)
        if self._driver_projection[0] != names:
            self._driver_projection = (names, self._projection_to_driver(names))
        # One projection: each Dataset operation is an analysis of its own, a share of every live batch.
        return decoded.select(*self._driver_projection[1]).toArrow()

    def _projection_to_driver(self, names: tuple[str, ...]) -> list[Column]:
        """The decoded columns and the derived ones the views read, built once per query: each
        Column is a call into the JVM, and a live batch's columns cost it milliseconds each batch."""
        from pyspark.sql import functions as F

        derived = {"event_date": event_date()} if self._reads("event_date") else {}  # as Spark's path
        columns = [F.col(f"`{c}`") for c in names if c not in derived]
        return columns + [value.alias(name) for name, value in derived.items()]

    def _again_in_driver(self, table: pa.Table) -> pa.Table:
        """`_decoded_again` for a batch in the driver: its error rows read again and decoded."""
        import pyarrow as pa
        import pyarrow.compute as pc

        failed = pc.is_valid(table.column("error"))
        coordinates = table.filter(failed).select([f"src_{c}" for c in COORDINATES])
        raw = self._raw_records(self.spark.createDataFrame(coordinates.rename_columns(list(COORDINATES))))
        again = self._to_driver(self._kept(self.decode(raw, self.schemas)))
        return pa.concat_tables(
            [table.filter(pc.invert(failed)), again.select(table.column_names).cast(table.schema)]
        )

    @staticmethod
    def _ordered(changes: DataFrame, sort: bool) -> DataFrame:
        if not sort:
            return changes
        return changes.repartition("entity").sortWithinPartitions("entity", "position")

    def _frames(self, changes: DataFrame, batch: DataFrame, batch_id: int, rows: int | None) -> None:
        """The executors' path: every view from the frame of changes (`rows` of them; None: the
        one-pass path, whose frame still holds the error rows). The views that collect the batch
        into the driver share ONE collect when there are several (a Spark job less); one alone
        collects what it reads itself, inside its own step."""
        spark = batch.sparkSession
        collecting = [v for v in self.views if rows is not None and not v.parallel and v.collects(rows)]
        collected = None
        if len(collecting) > 1:
            with self.clock.timed(batch_id, "collect"):
                collected = collect(changes, [c for v in collecting for c in v.columns()])
        batches = {
            view.name: FrameBatch(
                spark=spark,
                app_id=self.app_id,
                batch_id=batch_id,
                changes=changes,
                rows=rows,
                collected=collected if view in collecting else None,
            )
            for view in self.views
        }
        rejects = self._apply_all(batch_id, batches, Job._frame)
        self._dead_letter_rejects(rejects)
        self._failpoint("after-views", batch_id)

    def _single_pass(self, batch: DataFrame, batch_id: int, sort: bool) -> None:
        """The one-pass path: the decoded batch applied as it comes, and only if records were refused,
        their raw records read back (a small job over the refused ones) for their schema ids. One not
        asked for before makes those records decode and apply again knowing it: the view is
        idempotent, so what it applied the first time is not applied twice."""
        decoded, json_read = batch.drop("schema_id"), self._query_json
        while True:
            batches = {
                v.name: FrameBatch(spark=batch.sparkSession, app_id=self.app_id, batch_id=batch_id,
                                   changes=self._ordered(decoded, sort), rows=None)
                for v in self.views
            }  # fmt: skip
            rejects = self._apply_all(batch_id, batches, Job._frame)
            if not rejects:
                break
            refused = self._raw_records(dead_letters.rejects_frame(self.spark, rejects).select(*COORDINATES))
            if not self._learn(schema_ids(refused), json_read=json_read):
                break
            decoded = self._kept(self.decode(refused, self.schemas)).drop("schema_id")
            json_read = self._decode_reads_json()
        self._dead_letter_rejects(rejects)
        self._failpoint("after-views", batch_id)

    @staticmethod
    def _table(view: View, batch: TableBatch) -> Sequence[Reject]:
        return view.apply_table(batch)

    @staticmethod
    def _frame(view: View, batch: FrameBatch) -> Sequence[Reject]:
        return view.apply_frame(batch)

    def _apply_all(
        self, batch_id: int, batches: dict[str, B], apply: Callable[[View, B], Sequence[Reject]]
    ) -> list[Reject]:
        """Every view's write of the batch: the `parallel` views in threads of their own (the cache's
        writes run in Redis, from executors or this driver), meanwhile the others one after the other
        here. Each view's time is its step (`<view name>`); what they refused comes back."""
        parallel = [v for v in self.views if v.parallel]
        with ThreadPoolExecutor(max_workers=max(1, len(parallel)), thread_name_prefix="view") as pool:
            running: list[Future[Sequence[Reject]]] = [
                pool.submit(self._apply_one, view, batch_id, batches[view.name], apply) for view in parallel
            ]
            rejects = [
                r
                for view in self.views
                if not view.parallel
                for r in self._apply_one(view, batch_id, batches[view.name], apply)
            ]
            for done in running:
                rejects += done.result()
        return rejects

    def _apply_one(
        self, view: View, batch_id: int, batch: B, apply: Callable[[View, B], Sequence[Reject]]
    ) -> Sequence[Reject]:
        with self.clock.timed(batch_id, view.name):
            rejects = apply(view, batch)
        self._failpoint(f"after-{view.name}", batch_id)
        return rejects

    def _compact(self, spark: SparkSession, batch_id: int, rows: int | None) -> None:
        """Every `optimize_every` batches each view compacts, by the engine that wrote a batch of `rows`."""
        if (batch_id + 1) % self.plan.config.optimize_every == 0:
            with self.clock.timed(batch_id, "optimize"):
                for view in self.views:
                    view.compact(spark, rows)

    def _dead_letter_rejects(self, rejects: Sequence[Reject]) -> None:
        if rejects:
            self._dead_letter(self._with_bytes(dead_letters.rejects_frame(self.spark, rejects)), len(rejects))

    def _with_bytes(self, errors: DataFrame) -> DataFrame:
        """Error rows (topic, partition, offset, error) with their records' original key and value,
        read back from Kafka: what a dead letter holds."""
        raw = self._raw_records(errors.select(*COORDINATES)).select(*COORDINATES, "key", "value")
        return errors.join(raw, list(COORDINATES))

    def _dead_letter(self, errors: DataFrame, count: int) -> None:
        dead_letters.write(
            errors,
            bootstrap=self.plan.config.endpoints.kafka_bootstrap_servers,
            client_config=self.plan.config.endpoints.kafka_client,
            topic=self.plan.dlq_topic,
            materializer=self.plan.spec.name,
        )
        self.dead_letters += count
        log.warning(
            "%d record(s) of %s sent to dead-letter topic %s", count, self.plan.topic, self.plan.dlq_topic
        )

    def _failpoint(self, step: str, batch_id: int) -> None:
        """Test hook: hold the driver at `step` of this batch (failpoints.py)."""
        failpoints.hold(
            self.plan.config.failpoint, step, str(batch_id), lifecycle.stop_file(self.plan.job_dir)
        )

    # --- the driver's main loop ----------------------------------------------------------------

    def run(self, start: StartPosition, *, available_now: bool = False) -> int:
        """Run until SIGTERM/SIGINT, a stop request (`materializers stop NAME`) or, with
        `available_now`, caught up; publish the status (`materializers status`) after each batch.

        Parameters:
            start, available_now: as `start`.

        Returns:
            0 on a clean stop, 1 when the query failed (its status says why). `driver_loop.run` drives
            several jobs in one driver the same way.
        """
        from materializers.runtime import driver_loop

        return driver_loop.run([self], start, available_now=available_now)


def kafka_options(plan: JobPlan, *, headers: bool = True) -> dict[str, str]:
    """The Spark Kafka source's options for the plan's cluster, streaming or batch; `headers`:
    whether its rows carry the records' headers."""
    return {
        "kafka.bootstrap.servers": plan.config.endpoints.kafka_bootstrap_servers,
        # the Java client's SASL/TLS settings, as `kafka.*`
        **plan.config.endpoints.kafka_client.spark_options(),
        "includeHeaders": str(headers).lower(),
        **SOURCE_FETCH,
    }


def source_stream(
    spark: SparkSession,
    plan: JobPlan,
    start: StartPosition,
    *,
    max_offsets: int,
    headers: bool = True,
    split: int = 0,
) -> DataFrame:
    """The plan's topic as a streaming frame from `start` (a checkpoint that committed resumes instead),
    at most `max_offsets` records per batch (0: everything available), at most `split` records per
    Spark task (0: a task per Kafka partition; see `split_reads`)."""
    partitions = topic_partitions(
        plan.config.endpoints.kafka_bootstrap_servers,
        plan.topic,
        client_config=plan.config.endpoints.kafka_client,
    )
    options = positions.spark_start_options(start, {plan.topic: partitions})
    reader = spark.readStream.format("kafka").options(**kafka_options(plan, headers=headers))
    reader = reader.option("subscribe", plan.topic)
    if max_offsets:
        reader = reader.option("maxOffsetsPerTrigger", str(max_offsets))
    if split:
        reader = reader.option("maxRecordsPerPartition", str(split))
    return reader.options(**options).load()


def sorted_first(planned: int | None, task_records: int, *, sequential: bool) -> bool:
    """Whether a batch of at most `planned` records (None: not known) that the executors apply is
    sorted per entity first (`Job._ordered`; pure). A fold's (`sequential`) patches apply in version
    order: one task per stream, sorted. CDC upserts commute where each entity's changes sit in one
    task in offset order, as Kafka's partitions hold them: a batch the query may have split (more
    records than a task reads, `task_records` from `split_reads`) is sorted, one within a task's
    share is not (a live batch on the executors' path pays no shuffle)."""
    if sequential:
        return True
    return bool(task_records) and (planned is None or planned > task_records)


def split_reads(
    cap: int, small_batch_rows: int, views: Sequence[View], parallelism: int, *, local: bool
) -> int:
    """Records a Spark task reads at most, where a Kafka partition's share of a batch is split over
    several tasks (0: a task per partition; pure).

    A CDC topic is often a single partition (Debezium's default: a table's changes in order), so a
    batch was read and decoded by one task while the other cores idled; split over the task slots, a
    full batch reaches the driver sooner. Each task
    reads a consecutive offset range, and a collected batch keeps offset order. The executors' own
    writes rely on one task holding an entity's changes in order (the cache's and OpenSearch's fill of
    an unchanged TOAST value from the stored one), so a split batch the executors apply is sorted per
    entity first (`Job._ordered`: a shuffle).

    A `local` master splits a full batch (`cap` records) over `parallelism` tasks only where every
    batch the query plans is applied whole from the driver: there the executors' threads are the
    driver's cores, and a shuffle would cost what the split gains; a batch planned larger anyway (a
    checkpoint's batch from a run with other bounds, a new partition) is sorted. A cluster's master
    takes every record available in a batch, so a backfill read by one task left every other
    executor idle: there a task reads at most a driver-sized batch's share of the cluster's slots,
    and a larger batch spreads over all of them, sorted per entity. A live batch far smaller keeps one
    task per partition either way. `parallelism`: Spark's default parallelism, the task slots."""
    if parallelism < 2:
        return 0
    if not local:
        return -(-small_batch_rows // parallelism) if small_batch_rows else 0
    if not cap or cap > small_batch_rows:
        return 0
    return -(-cap // parallelism) if all(view.in_driver(cap) for view in views) else 0


def batch_cap(max_offsets: int, small_batch_rows: int, master: str, *, collects: bool) -> int:
    """Records per micro-batch at most (0: everything available): `max_offsets` when set (pure).

    Unset, a local master caps a batch at what the driver applies whole (`small_batch_rows`) when a
    view `collects` a batch of that size into the driver anyway (the warehouse's delta-rs writes, the
    Tantivy index): the executors are threads of the driver's JVM, so the batch collected as Arrow
    costs a copy, and the driver's writers beat a Spark job per view there (several times the rate
    for a warehouse backfill). Views written from the executors alone (the
    cache, OpenSearch) keep large batches: they gain nothing from the driver, and larger batches
    served them better. On a cluster a batch takes
    what is available and a large one stays on the executors."""
    if max_offsets:
        return max_offsets
    return small_batch_rows if is_local(master) and collects else 0


def triggered(writer: DataStreamWriter, plan: JobPlan, available_now: bool) -> DataStreamWriter:
    """`writer` with the run's trigger: what the topic holds now, or a batch every `RunConfig.trigger`."""
    if available_now:
        return writer.trigger(availableNow=True)
    return writer.trigger(processingTime=plan.config.trigger)


def schema_ids(raw: DataFrame) -> list[int]:
    """The registry ids framing the keys and values of raw records, UNFRAMED_ID for a key or value
    without the wire header (few: one small job)."""
    from pyspark.sql import functions as F

    from materializers.decode import event_shape

    ids = [
        F.when(event_shape.has_wire_header(side), event_shape.schema_id(side))
        .when(F.col(side).isNotNull(), F.lit(UNFRAMED_ID))
        .alias(side)
        for side in ("key", "value")
    ]
    return sorted({i for row in raw.select(*ids).collect() for i in row if i is not None})
