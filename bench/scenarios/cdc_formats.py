"""Benchmark: the three CDC record formats side by side in one run, and the peer Delta job (issue 19).

`python -m bench run cdc_formats [--size quick]` with the stack env sourced; results in
bench/results/cdc_formats/latest.{json,md} (`--quick`: small sizes, not numbers to quote).
Formats (`ConnectorSpec.format`): `json` (JsonConverter with inline schemas, the baseline of every
ratio), `json-schemaless`, `avro` (Apicurio's AvroConverter, Confluent framing). Phases, in order:
1. Snapshot: one products table of `--rows` rows (1,000,000) in Postgres; per format, one after the
   other, a connector as the committed spec renders it (heartbeats off) snapshots it into a
   pre-created topic of `--partitions` partitions (default: the connector spec's, 1, as Debezium
   writes a table; `cleanup.policy=delete`, LogAppendTime). Measured: rows/s from
   registration to the broker append time of the last record; bytes per record (key + value, a
   sample read back from the topic); the Connect process's utime+stime over the snapshot, per row
   (/proc, plus the per-thread split of `bench.scenarios.cdc.Phase`).
2. Updates: `--records` - `--rows` row updates (in 50k-row transactions) streamed by the three
   connectors at once, so each topic holds `--records` (2,000,000) change records: a snapshot read per
   row, then its updates. The connectors and slots are then dropped; the topics stay for phase 3.
3. Spark (`local[2]`, `materializers.spark.session.build`: the same settings for ours and the peer):
   per format, decode rows/s per core (the Kafka read alone, the products materializer's decoder, the
   peer's decode; each into Spark's `noop` sink, in one driver), then the warehouse backfill of the
   whole topic; every driver a process of its own (`in_new_driver`), started by this one, which
   holds no JVM of its own (a stopped session's JVM lives on in its Python process: 1.6-1.8 GB
   resident beside the backfills, it slowed ours by 10-20 %, the peer not, bench/results/history.md):
   ours (the `products` materializer, warehouse view only, history + current tables, its default batch
   sizes) and the peer (`bench/peers/delta_job.py`: newest change per key, MERGE, 8 batches), each
   `--backfill-rounds` (3) times, alternating which goes first; each job's median run is reported
   (a job's rate moved by ~10 % between runs of the same code on this machine). Every table is
   checked for the same rows and sum of stock. Where the time
   went: ours from the batches' timeline (`materializers.runtime.timeline`, written to the job's
   timeline.jsonl), the peer from Spark's progress.
4. Latency (run first, on a quiet stack: after the other phases, a 1M-row table updated a million
   times and GBs of compacted topics behind them, a steady batch took 1,063 ms where it takes ~340 on
   a quiet one, the machine's background work unaccounted for): per format, a
   `--latency-rows` products table captured by a connector at the spec's defaults, ONE driver
   (`materializers start products`, cache + search + warehouse, the job's default trigger) and
   commit->view latency at each of `--rates` (2,000 and 5,000 rows/s; `bench.scenarios.materializers.PacedUpdates`
   and `Prober`), the table's stamps reset between rates.
Everything the run creates (tables, connectors, slots, publications, topics, registry subjects, Redis
keys, the Spark work dir) is named with a run id and removed in `finally`, also on SIGTERM/Ctrl-C.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field, fields, replace
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import psycopg
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import NewTopic  # type: ignore[attr-defined]

from bench.harness import results as bench_results
from bench.harness.percentiles import summarize_ms
from bench.harness.probes import (
    Phase,
    StackPids,
    cpu_probe_ms,
    first_touch_us_per_page,
    process_cpu_s,
    stack_environment,
)
from bench.harness.stack import REPO, STACK_DIR
from bench.harness.streaming import Run, run_available_now, run_to_end
from bench.peers import delta_job as peer_delta_job
from bench.scenarios.cdc import (
    BenchConfig,
    Cleanup,
    ConnectorWatch,
    _delete_connector,
    delete_topics,
    register,
)
from bench.scenarios.materializers import (
    PacedUpdates,
    Prober,
    _caught_up,
    _wait_until,
    captured_table,
    load_table,
    prober,
    start_job,
    unlink_prefix,
)
from cdc.connect_client import ConnectClient
from cdc.connector_spec import ConnectorSpec, DatabaseSpec, HeartbeatSpec, RegistrySpec, TopicSpec
from cdc.slots import drop_slot
from kafkakit.clients import make_admin, make_consumer
from kafkakit.settings import Endpoints
from materializers import catalog
from materializers.config import VIEWS, RunConfig
from materializers.decode.avro_events import WriterSchemas
from materializers.ops import lag
from materializers.runtime import timeline
from materializers.runtime.job import Job, JobPlan
from materializers.spark import memory as driver_memory
from materializers.spark import session as spark_session
from materializers.views.warehouse.delta import query as delta_query

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from materializers.materializer import Materializer

log = logging.getLogger("bench.cdc_formats")

FORMATS = ("json", "json-schemaless", "avro")
BASELINE = "json"
TYPED = ("json", "avro")  # formats `cdc tail`/decode can type (schemaless records carry no types)
SNAPSHOT_TARGET = 50_000  # rows/s, issue 19 (as bench/scenarios/cdc.py)
BACKFILL_PER_CORE_TARGET = 50_000
BACKFILL_VS_PEER_TARGET = 2.0
P99_TARGET_MS, P99_TARGET_RATE = 1000.0, 2000
UPDATE_CHUNK = 50_000
WARM_ROWS = 20_000
BATCHES = 8  # the peer's backfill micro-batches (maxOffsetsPerTrigger = records / 8); ours runs its defaults


# ---- configuration ----------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True, kw_only=True)
class Settings:
    endpoints: Endpoints
    quick: bool
    rows: int
    records: int
    latency_rows: int
    rates: tuple[int, ...]
    latency_warmup_s: float
    latency_seconds: float
    trigger: str
    formats: tuple[str, ...]
    partitions: int
    backfill_rounds: int
    snapshot_timeout_s: float
    out_dir: Path
    stack_dir: Path

    @classmethod
    def from_args(cls, argv: Sequence[str] | None) -> Settings:
        p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
        p.add_argument(
            "--quick", action="store_true", help="small sizes (20k rows, 40k records, short rates)"
        )
        p.add_argument("--rows", type=int, help="snapshot table rows (1,000,000; quick 20,000)")
        p.add_argument(
            "--records", type=int, help="records per topic for decode + backfill (2,000,000; quick 40,000)"
        )
        p.add_argument("--latency-rows", type=int, help="latency table rows (20,000; quick 5,000)")
        p.add_argument("--rates", default="2000,5000", help="latency rates, rows/s (2000,5000)")
        p.add_argument("--latency-warmup", type=float, help="seconds of load before measuring (30; quick 10)")
        p.add_argument("--latency-seconds", type=float, help="measured seconds per rate (60; quick 15)")
        p.add_argument(
            "--trigger",
            default=RunConfig().trigger,
            help="the latency driver's trigger (the job's default: %(default)s)",
        )
        p.add_argument(
            "--formats", default=",".join(FORMATS), help=f"comma-separated of {', '.join(FORMATS)}"
        )
        p.add_argument(
            "--partitions",
            type=int,
            default=TopicSpec().partitions,
            help="partitions of the snapshot topics (the connector spec's default: %(default)s)",
        )
        p.add_argument(
            "--backfill-rounds",
            type=int,
            help="backfills of each job, alternating which runs first; the median is kept (3; quick 1)",
        )
        p.add_argument("--snapshot-timeout", type=float, default=600.0, help="seconds per snapshot")
        p.add_argument("--out", type=Path, help="the results' folder (bench/results/cdc_formats)")
        p.add_argument("--stack-dir", type=Path, default=STACK_DIR, help="the stack's pid files")
        a = p.parse_args(argv)
        formats = tuple(f.strip() for f in a.formats.split(",") if f.strip())
        if not formats or any(f not in FORMATS for f in formats):
            p.error(f"--formats {a.formats!r}: choose from {', '.join(FORMATS)}")
        rates = tuple(int(r) for r in a.rates.split(",") if r.strip())
        quick = bool(a.quick)
        rows = a.rows or (20_000 if quick else 1_000_000)
        records = a.records or (2 * rows if quick else 2_000_000)
        if records < rows:
            p.error(f"--records {records} must be >= --rows {rows}: a topic holds a snapshot read per row")
        return cls(
            endpoints=Endpoints.from_env(),
            quick=quick,
            rows=rows,
            records=records,
            latency_rows=a.latency_rows or (5_000 if quick else 20_000),
            rates=rates,
            latency_warmup_s=a.latency_warmup if a.latency_warmup is not None else (10.0 if quick else 30.0),
            latency_seconds=a.latency_seconds or (15.0 if quick else 60.0),
            trigger=a.trigger,
            formats=formats,
            partitions=a.partitions,
            backfill_rounds=a.backfill_rounds or (1 if quick else 3),
            snapshot_timeout_s=a.snapshot_timeout,
            out_dir=a.out or bench_results.RESULTS / "cdc_formats",
            stack_dir=a.stack_dir,
        )


@dataclass(frozen=True, slots=True)
class Where:
    """What a backfill needs of the run: its settings, id and work dir, the products materializer."""

    settings: Settings
    run_id: str
    work: Path
    products: Materializer

    @property
    def bootstrap(self) -> str:
        return self.settings.endpoints.kafka_bootstrap_servers

    @property
    def registry_url(self) -> str:
        return self.settings.endpoints.schema_registry_url

    def base(self, home: str) -> RunConfig:
        return replace(RunConfig.from_env(), endpoints=self.settings.endpoints, home=self.work / home)


@dataclass(frozen=True, slots=True)
class Context(Where):
    connect: ConnectClient
    pids: StackPids
    cleanup: FormatsCleanup


def ident(fmt: str) -> str:
    return fmt.replace("-", "_")


def registry_for(fmt: str, endpoints: Endpoints) -> RegistrySpec | None:
    return RegistrySpec.from_url(endpoints.schema_registry_url) if fmt == "avro" else None


# ---- cleanup ----------------------------------------------------------------------------------------
@dataclass
class FormatsCleanup(Cleanup):
    """the cdc scenario's Cleanup (connectors, slots, their topics) plus what this bench creates besides."""

    schemas: list[str] = field(default_factory=list)
    topic_prefixes: list[str] = field(default_factory=list)
    redis_prefixes: list[str] = field(default_factory=list)
    registry_url: str = ""

    def release(self, spec: ConnectorSpec) -> None:
        """The connector, its slot and publication now; its topics at the end (phase 3 reads them)."""
        self.specs.remove(spec)
        self.topic_prefixes.append(spec.topic_prefix + ".")
        self._step(f"delete connector {spec.name}", partial(_delete_connector, self.connect, spec.name))
        self._step(
            f"drop slot {spec.resolved_slot_name} + publication {spec.resolved_publication_name}",
            partial(
                drop_slot, self.cfg.endpoints.pg_dsn, spec.resolved_slot_name, spec.resolved_publication_name
            ),
        )

    def all(self) -> None:
        prefixes = [*self.topic_prefixes, *(s.topic_prefix + "." for s in self.specs)]
        self.connectors()
        for prefix in dict.fromkeys(prefixes):
            self._step(f"delete topics {prefix}*", partial(delete_topics, self.admin, prefix))
            self._step(
                f"delete registry subjects {prefix}*", partial(delete_subjects, self.registry_url, prefix)
            )
        for schema in self.schemas:
            self._step(f"drop schema {schema}", partial(drop_schema, self.cfg.endpoints.pg_dsn, schema))
        for prefix in self.redis_prefixes:
            self._step(
                f"unlink redis {prefix}:*", partial(unlink_prefix, self.cfg.endpoints.redis_url, prefix)
            )


def delete_subjects(registry_url: str, prefix: str) -> list[str]:
    """Hard-delete the registry subjects of the topics named `prefix`* (soft delete first, as the API wants)."""
    with httpx.Client(base_url=registry_url, timeout=15) as http:
        subjects = [s for s in http.get("/subjects").raise_for_status().json() if s.startswith(prefix)]
        for subject in subjects:
            http.delete(f"/subjects/{subject}")
            http.delete(f"/subjects/{subject}", params={"permanent": "true"})
    return subjects


def drop_schema(pg_dsn: str, schema: str) -> None:
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE".encode())


# ---- Kafka helpers --------------------------------------------------------------------------------
def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    config = {"message.timestamp.type": "LogAppendTime", "cleanup.policy": "delete"}
    admin = make_admin({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1, config=config)])[topic].result(timeout=30)


def records_in(bootstrap: str, topic: str) -> int:
    return sum(lag.end_offsets(bootstrap, topic)[topic].values())


def wait_records(bootstrap: str, topic: str, target: int, timeout_s: float, watch: ConnectorWatch) -> int:
    """Poll the topic's end offsets (every partition) until it holds `target` records or the timeout."""
    deadline, count = time.monotonic() + timeout_s, 0
    while time.monotonic() < deadline:
        watch.check()
        count = records_in(bootstrap, topic)
        if count >= target:
            break
        time.sleep(0.25)
    return count


def _consumer(bootstrap: str) -> Consumer:
    return make_consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"bench-cdcfmt-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
        }
    )


def last_append_ms(bootstrap: str, topic: str) -> int:
    """The broker append time of the newest record of any partition (LogAppendTime topics)."""
    ends = lag.end_offsets(bootstrap, topic)[topic]
    newest, consumer = 0, _consumer(bootstrap)
    try:
        for partition, end in ((int(p), e) for p, e in ends.items() if e > 0):
            consumer.assign([TopicPartition(topic, partition, end - 1)])
            msg = next((m for m in consumer.consume(1, 10.0) if m.error() is None), None)
            if msg is None:
                raise TimeoutError(f"could not read {topic}[{partition}]@{end - 1}; is the broker healthy?")
            newest = max(newest, msg.timestamp()[1])
    finally:
        consumer.close()
    return newest


def sample_bytes(bootstrap: str, topic: str, wanted: int) -> dict[str, Any]:
    """Mean key and value bytes of up to `wanted` records from the start of every partition."""
    parts = lag.end_offsets(bootstrap, topic)[topic]
    consumer = _consumer(bootstrap)
    consumer.assign([TopicPartition(topic, int(p), 0) for p in parts])
    keys = values = count = 0
    deadline = time.monotonic() + 60
    try:
        while count < min(wanted, sum(parts.values())) and time.monotonic() < deadline:
            for msg in consumer.consume(5000, 1.0):
                if msg.error() is None and msg.value() is not None:
                    keys, values, count = (
                        keys + len(msg.key() or b""),
                        values + len(msg.value() or b""),
                        count + 1,
                    )
    finally:
        consumer.close()
    n = max(count, 1)
    return {
        "sampled": count,
        "key": round(keys / n, 1),
        "value": round(values / n, 1),
        "total": round((keys + values) / n, 1),
    }


# ---- phase 1 + 2: snapshots, then updates ----------------------------------------------------------
def snapshot_spec(ctx: Context, fmt: str, table: str, role: str = "") -> ConnectorSpec:
    """A connector of the committed spec in `fmt` (heartbeats off); `role` tells a warm-up's apart."""
    name = "-".join(p for p in ("bench-cdcfmt", ctx.run_id, role, fmt) if p)
    return ConnectorSpec(
        name=name,
        database=DatabaseSpec.from_dsn(ctx.settings.endpoints.pg_dsn),
        topic_prefix=ident(name),
        tables=(table,),
        heartbeat=HeartbeatSpec(enabled=False),
        format=fmt,
        registry=registry_for(fmt, ctx.settings.endpoints),
    )


def warm_up(ctx: Context) -> dict[str, float]:
    """A small snapshot per format, unmeasured: the Connect JVM compiles each converter's path before
    the measured snapshots, so the first format measured does not pay for everyone's JIT."""
    schema, rows, took = f"bench_cdcfmt_{ctx.run_id}_warm", min(ctx.settings.rows, WARM_ROWS), {}
    ctx.cleanup.schemas.append(schema)
    table = load_table(ctx.settings.endpoints.pg_dsn, schema, rows)
    for fmt in ctx.settings.formats:
        spec = snapshot_spec(ctx, fmt, table, "warm")
        ctx.cleanup.specs.append(spec)
        ctx.cleanup.topic_prefixes.append(spec.topic_prefix + ".")  # its registry subjects, at the end
        create_topic(ctx.bootstrap, spec.topic_for(table), ctx.settings.partitions)
        began = time.monotonic()
        register(ctx.connect, spec)
        watch = ConnectorWatch(ctx.connect, spec.name)
        if (
            wait_records(ctx.bootstrap, spec.topic_for(table), rows, ctx.settings.snapshot_timeout_s, watch)
            < rows
        ):
            raise TimeoutError(f"the warm-up snapshot of {fmt} did not finish")
        took[fmt] = round(time.monotonic() - began, 2)
        ctx.cleanup.connectors()
    return took


def measure_snapshot(ctx: Context, spec: ConnectorSpec, topic: str) -> dict[str, Any]:
    """Register the connector; time until the topic holds every row; Connect's CPU meanwhile; bytes."""
    rows, phase = ctx.settings.rows, Phase(ctx.pids)
    cpu_before = process_cpu_s(ctx.pids.connect)
    with phase.measure():
        registered = time.time()
        settings = register(ctx.connect, spec)
        count = wait_records(
            ctx.bootstrap,
            topic,
            rows,
            ctx.settings.snapshot_timeout_s,
            ConnectorWatch(ctx.connect, spec.name),
        )
        seen = time.time()
    connect_cpu = process_cpu_s(ctx.pids.connect) - cpu_before
    complete = count >= rows
    seconds = (last_append_ms(ctx.bootstrap, topic) / 1000 if complete else seen) - registered
    resources = phase.as_json(count)
    return {
        "rows": count,
        "complete": complete,
        "seconds": round(seconds, 2),
        "rows_per_s": round(count / seconds),
        "met_50k": complete and count / seconds >= SNAPSHOT_TARGET,
        "bytes_per_record": sample_bytes(ctx.bootstrap, topic, 20_000),
        "connect_cpu_s": round(connect_cpu, 2),
        "connect_cpu_us_per_row": round(1e6 * connect_cpu / max(count, 1), 1),
        "connect_cpu_us_per_row_by_thread": {
            k.removeprefix("connect."): v
            for k, v in resources["cpu_us_per_row"].items()
            if k.startswith("connect.")
        },
        "machine_busy_cores": resources["machine_busy_cores"],
        "connector": settings,
        "resources": resources,
    }


def stream_updates(ctx: Context, table: str, specs: Mapping[str, ConnectorSpec]) -> dict[str, Any]:
    """Update rows (50k per transaction) until each topic holds `records`; every connector streams them."""
    updates, rows = ctx.settings.records - ctx.settings.rows, ctx.settings.rows
    began, done = time.monotonic(), 0
    with psycopg.connect(ctx.settings.endpoints.pg_dsn, autocommit=True) as conn:
        while done < updates:
            low = done % rows + 1
            high = min(low + min(UPDATE_CHUNK, updates - done) - 1, rows)
            conn.execute(
                f"UPDATE {table} SET stock = stock + 1 WHERE id BETWEEN %s AND %s".encode(), (low, high)
            )
            done += high - low + 1
    committed = time.monotonic() - began
    counts = {
        fmt: wait_records(
            ctx.bootstrap,
            spec.topic_for(table),
            ctx.settings.records,
            900,
            ConnectorWatch(ctx.connect, spec.name),
        )
        for fmt, spec in specs.items()
    }
    short = {fmt: n for fmt, n in counts.items() if n < ctx.settings.records}
    if short:
        raise TimeoutError(f"topics short of {ctx.settings.records} records after the updates: {short}")
    return {
        "updates": updates,
        "committed_s": round(committed, 2),
        "all_streamed_s": round(time.monotonic() - began, 2),
    }


# ---- phase 3: decode and backfill in Spark --------------------------------------------------------
def kafka_frame(spark: SparkSession, bootstrap: str, topic: str, share: float = 1.0) -> DataFrame:
    # Read by every core (a partition is split when the topic has fewer), so a rate per core is one.
    reader = (
        spark.read.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("minPartitions", str(spark.sparkContext.defaultParallelism))
    )
    if share < 1.0:
        ends = lag.end_offsets(bootstrap, topic)[topic]
        reader = reader.option(
            "endingOffsets", json.dumps({topic: {p: int(e * share) for p, e in ends.items()}})
        )
    return reader.option("startingOffsets", "earliest").load()


def noop_seconds(frame: DataFrame) -> float:
    began = time.monotonic()
    frame.write.format("noop").mode("overwrite").save()
    return time.monotonic() - began


def decoders(ctx: Where, fmt: str, topic: str) -> dict[str, Callable[[DataFrame], DataFrame]]:
    """The Kafka read alone, our decoder (writer schemas learnt before the clock starts), the peer's."""
    ours = ctx.products.decoder()
    schemas = WriterSchemas(ctx.registry_url)
    return {
        "kafka_read": lambda raw: raw,
        "ours": lambda raw: ours(raw, schemas),
        "peer": lambda raw: peer_delta_job.changes(raw, fmt, ctx.registry_url, topic),
    }


def measure_decode(ctx: Where, spark: SparkSession, fmt: str, topic: str) -> dict[str, Any]:
    cores = int(spark.sparkContext.defaultParallelism)
    ways = decoders(ctx, fmt, topic)
    for build in ways.values():  # warm-up on a twentieth of the topic (JIT, Kafka consumers)
        noop_seconds(build(kafka_frame(spark, ctx.bootstrap, topic, 0.05)))
    out: dict[str, Any] = {"cores": cores}
    for name, build in ways.items():
        frame = build(kafka_frame(spark, ctx.bootstrap, topic))
        seconds = noop_seconds(frame)
        out[name] = {
            "seconds": round(seconds, 2),
            "rows_per_s_per_core": round(ctx.settings.records / seconds / cores),
        }
    read = out["kafka_read"]["seconds"]
    for name in ("ours", "peer"):  # the decode's own share: the run minus the Kafka read alone
        own = out[name]["seconds"] - read
        out[name]["decode_only_rows_per_s_per_core"] = (
            round(ctx.settings.records / own / cores) if own > 0 else None
        )
    return out


def read_all(run: Run, records: int, what: str) -> list[dict[str, Any]]:
    """An availableNow run's batches' progress (every record read, or an error).

    Records are counted by the batches' source offsets: `numInputRows` counts every scan of a batch,
    and our job scans a batch again when it meets a new writer schema (Avro's first batch)."""
    return run.batches_reading(records, what, read=offsets_read)


def offsets_read(progress: Mapping[str, Any]) -> int:
    """Records between a batch's start and end offsets, over its sources and partitions."""
    total = 0
    for source in progress["sources"]:
        start, end = (
            json.loads(o) if isinstance(o, str) else o for o in (source["startOffset"], source["endOffset"])
        )
        for topic, parts in (end or {}).items():
            total += sum(int(o) - int((start or {}).get(topic, {}).get(p, 0)) for p, o in parts.items())
    return total


def seconds_by_step(durations: Sequence[Mapping[str, float]]) -> dict[str, float]:
    """Seconds per step summed over the batches (ms in, s out), largest first."""
    total: dict[str, float] = {}
    for steps in durations:
        for k, v in steps.items():
            total[k] = total.get(k, 0.0) + v / 1000
    return {k: round(v, 2) for k, v in sorted(total.items(), key=lambda kv: -kv[1])}


def backfill_ours(ctx: Where, spark: SparkSession, fmt: str, topic: str) -> dict[str, Any]:
    records = ctx.settings.records
    config = replace(
        ctx.base(f"ours-{ident(fmt)}"),
        topic=topic,
        views=("warehouse",),  # batch sizes: the job's default (job.batch_cap), as a user runs it
        redis_prefix=f"bench-cdcfmt-{ctx.run_id}-bf",
    )
    plan = JobPlan.of(ctx.products, config)
    job = Job(spark, plan)
    what = f"our backfill of {topic}"
    run = run_available_now(lambda: job, what, timeout_s=None)
    batches, seconds = read_all(run, records, what), run.seconds
    events = [timeline.batch_event(p, job.clock.take(int(p["batchId"]))) for p in batches]
    timeline.append(plan.job_dir, events)  # the job's timeline.jsonl, as a driver writes it
    found = delta_query(
        plan.warehouse().current_path, "SELECT count(*) AS n, sum(stock) AS s FROM t WHERE NOT deleted"
    )[0]
    return {
        **rates(records, seconds, spark),
        "batches": len(batches),
        "dead_letters": job.dead_letters,
        "current_rows": int(str(found["n"])),
        "history_rows": history_rows(plan),
        "sum_stock": int(str(found["s"])),
        "seconds_by_step": seconds_by_step([{**e["spark"], **e["steps"]} for e in events]),
        "batch_seconds": [round(e["total_ms"] / 1000, 2) for e in events],
        "timeline": events,  # the job's timeline.jsonl (its work dir is removed at the end)
    }


def history_rows(plan: JobPlan) -> int:
    return int(str(delta_query(plan.warehouse().history_path, "SELECT count(*) AS n FROM t")[0]["n"]))


def backfill_peer(ctx: Where, spark: SparkSession, fmt: str, topic: str) -> dict[str, Any]:
    from pyspark.sql import functions as F

    records, home = ctx.settings.records, ctx.work / f"peer-{ident(fmt)}"
    start = partial(
        peer_delta_job.start,
        spark,
        bootstrap=ctx.bootstrap,
        topic=topic,
        fmt=fmt,
        registry_url=ctx.registry_url,
        path=str(home / "table"),
        checkpoint=str(home / "checkpoint"),
        max_offsets=max(records // BATCHES, 1),
        available_now=True,
    )
    what = f"the peer's backfill of {topic}"
    run = run_to_end(start, what, timeout_s=None)
    batches, seconds = read_all(run, records, what), run.seconds
    found = spark.read.format("delta").load(str(home / "table")).agg(F.count("*"), F.sum("stock")).first()
    assert found is not None
    return {
        **rates(records, seconds, spark),
        "batches": len(batches),
        "current_rows": int(found[0]),
        "sum_stock": int(found[1]),
        "seconds_by_step": seconds_by_step([_spark_steps(p) for p in batches]),
        "batch_seconds": [round(int(p["durationMs"]["triggerExecution"]) / 1000, 2) for p in batches],
    }


def _spark_steps(progress: Mapping[str, Any]) -> dict[str, float]:
    return {k: float(progress["durationMs"][k]) for k in timeline.SPARK_STEPS if k in progress["durationMs"]}


def rates(records: int, seconds: float, spark: SparkSession) -> dict[str, Any]:
    cores = int(spark.sparkContext.defaultParallelism)
    return {
        "seconds": round(seconds, 2),
        "rows_per_s": round(records / seconds),
        "rows_per_s_per_core": round(records / seconds / cores),
    }


def spark_phase(ctx: Context, topics: Mapping[str, str], out: dict[str, dict[str, Any]]) -> None:
    for fmt, topic in topics.items():
        log.info("[%s] decode", fmt)
        out[fmt]["decode"] = in_new_driver(ctx, "decode", fmt, topic, 0)
    for i, (fmt, topic) in enumerate(topics.items()):
        runs: dict[str, list[dict[str, Any]]] = {name: [] for name in BACKFILLS}
        order: list[str] = []
        for round_ in range(ctx.settings.backfill_rounds):  # who goes first alternates
            for name in BACKFILLS if (i + round_) % 2 == 0 else reversed(BACKFILLS):
                log.info("[%s] backfill %d: %s", fmt, round_ + 1, name)
                order.append(name)
                runs[name].append(in_new_driver(ctx, name, fmt, topic, round_))
                log.info("[%s] backfill %s: %s rows/s", fmt, name, runs[name][-1]["rows_per_s"])
                out[fmt]["backfill"] = backfill_summary(runs, order)  # kept as it grows


def backfill_summary(runs: Mapping[str, Sequence[dict[str, Any]]], order: Sequence[str]) -> dict[str, Any]:
    """Each job's median run by rows/s (the lower of the middle two for an even count) with the
    rows/s of every run, the ratio of the medians, and whether every run left the same rows (pure)."""
    result: dict[str, Any] = {"order": list(order)}
    for who, done in runs.items():
        if done:
            ranked = sorted(done, key=lambda r: r["rows_per_s"])
            result[who] = {
                **ranked[(len(ranked) - 1) // 2],
                "rows_per_s_runs": [r["rows_per_s"] for r in done],
                "first_touch_us_per_page_runs": [r.get("first_touch_us_per_page") for r in done],
                "cpu_probe_ms_runs": [r.get("cpu_probe_ms") for r in done],
            }
    if all(runs.get(who) for who in BACKFILLS):
        result["ours_vs_peer"] = round(result["ours"]["rows_per_s"] / result["peer"]["rows_per_s"], 2)
        every = [r for done in runs.values() for r in done]
        result["same_rows"] = all(r[k] == every[0][k] for r in every for k in ("current_rows", "sum_stock"))
    return result


BACKFILLS: dict[str, Callable[[Where, SparkSession, str, str], dict[str, Any]]] = {
    "ours": backfill_ours,
    "peer": backfill_peer,
}
IN_DRIVER = {**BACKFILLS, "decode": measure_decode}  # what `in_new_driver` runs


def in_new_driver(where: Where, who: str, fmt: str, topic: str, round_: int) -> dict[str, Any]:
    """One backfill (`who`: ours or the peer) or the decode measures in a driver process of its own,
    as a user starts either job: each on a JVM of its own, cold. In one shared JVM the job run second
    found the JIT warmed by the first (Kafka source, Avro, Arrow, Spark's planner compiled): the peer
    run after ours backfilled the same 2M records in 86 s, alone in 119 s. Each round starts from
    nothing: tables and checkpoint in a directory of its own, removed once its result is read."""
    work = where.work / f"{who}-{ident(fmt)}-{round_}"
    work.mkdir(parents=True)
    out = work / "result.json"
    child = {
        "who": who,
        "format": fmt,
        "topic": topic,
        "run_id": where.run_id,
        "work": str(work),
        "rows": where.settings.rows,
        "records": where.settings.records,
        "out": str(out),
    }
    touch_us, probe_ms = first_touch_us_per_page(), cpu_probe_ms()
    # Arrow's allocator set as in `materializers start`'s process: `materializers` sets it on import,
    # before pyarrow loads, where this script loads pyarrow first (bench.scenarios.materializers).
    env = {driver_memory.JEMALLOC_CONF: driver_memory.KEEP_FREED_PAGES, **os.environ}
    subprocess.run(
        [sys.executable, "-m", "bench.scenarios.cdc_formats", DRIVER_CHILD, json.dumps(child)],
        check=True,
        env=env,
        cwd=REPO,
    )
    result: dict[str, Any] = {
        **json.loads(out.read_text(encoding="utf-8")),
        "first_touch_us_per_page": touch_us,
        "cpu_probe_ms": probe_ms,
    }
    shutil.rmtree(work, ignore_errors=True)
    return result


DRIVER_CHILD = "--driver-child"


def driver_child(arg: str) -> int:
    """The child of `in_new_driver`: a session with the JIT `materializers start` picks for a driver
    that far behind, one backfill (or the decode measures), its result written as JSON."""
    child = json.loads(arg)
    settings = Settings.from_args(
        ["--rows", str(child["rows"]), "--records", str(child["records"]), "--formats", child["format"]]
    )
    where = Where(settings, child["run_id"], Path(child["work"]), catalog.lookup("products"))
    jit = spark_session.driver_jit(backlog=settings.records)
    spark = spark_session.build(RunConfig.from_env().master, f"bench-cdc-formats-{child['who']}", jit=jit)
    try:
        result = IN_DRIVER[child["who"]](where, spark, child["format"], child["topic"])
    finally:
        with suppress(Exception):
            for active in spark.streams.active:
                active.stop()
        with suppress(Exception):
            spark.stop()
    Path(child["out"]).write_text(json.dumps(result, default=str), encoding="utf-8")
    return 0


# ---- phase 4: commit -> view latency, three views in one driver -------------------------------------
def reset_stamps(pg_dsn: str, table: str) -> None:
    """Stock 0 and the plain name on every row, so the next writer's stamps (from 1) are all new."""
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(f"UPDATE {table} SET stock = 0, name = 'Product ' || id".encode())


@contextmanager
def probing(probers: Sequence[Prober]) -> Iterator[None]:
    """Each prober polling its view in a thread of its own, for the block's duration."""
    threads = [threading.Thread(target=p.loop, daemon=True) for p in probers]
    for t in threads:
        t.start()
    try:
        yield
    finally:
        for p in probers:
            p.stop.set()
        for t in threads:
            t.join()


def one_rate(
    ctx: Context,
    plan: JobPlan,
    table: str,
    rate: int,
    proc: subprocess.Popen[bytes],
    probers: Sequence[Prober] | None = None,
) -> dict[str, Any]:
    """Warm-up, then `latency_seconds` measured at `rate`; 10 s more for the last rows to show up.
    Each of `probers` (by default one per view) reports under its name."""
    s = ctx.settings
    probers = [prober(view, plan) for view in VIEWS] if probers is None else probers
    writer = PacedUpdates(s.endpoints.pg_dsn, table, s.latency_rows, rate, probers)
    with probing(probers):
        writer.start()
        try:
            time.sleep(s.latency_warmup_s)
            for p in probers:
                p.measuring.set()
            since, updated_before = time.time(), writer.updated
            time.sleep(s.latency_seconds)
            achieved, until = (writer.updated - updated_before) / (time.time() - since), time.time()
        finally:
            writer.stop.set()
            writer.join()
        time.sleep(10)
    if writer.error is not None:
        raise writer.error
    if proc.poll() is not None:
        raise RuntimeError(f"the latency driver exited ({proc.returncode}); see its log in {ctx.work}")
    entries = timeline.read(plan.job_dir)
    steps = timeline.batch_medians(entries, since, until)
    return {
        "target_rows_per_s": rate,
        "achieved_rows_per_s": round(achieved),
        "writer_max_behind_s": round(writer.behind_s, 3),
        **{
            p.name: {
                **summarize_ms(p.latencies_ms),
                "unseen_at_end": len(p.pending),
                "poll_s": p.every_s,
                "read_on": "commit" if p.commits is not None else "poll",
                "poll_errors": len(p.errors),
            }
            for p in probers
        },
        "batch_median_ms": {k: round(v) for k, v in steps.items()},
        "slowest_batches_ms": [
            {k: round(v) for k, v in b.items()} for b in timeline.slowest_batches(entries, since, until)
        ],
    }


def measure_latency(ctx: Context, fmt: str) -> dict[str, Any]:
    s, schema = ctx.settings, f"bench_cdcfmt_lat_{ctx.run_id}_{ident(fmt)}"
    ctx.cleanup.schemas.append(schema)
    table, spec = captured_table(ctx.base("latency"), schema, s.latency_rows, fmt)
    ctx.cleanup.specs.append(spec)
    ctx.cleanup.topic_prefixes.append(spec.topic_prefix + ".")  # its registry subjects, at the end
    redis_prefix = f"bench-cdcfmt-{ctx.run_id}-lat-{fmt}"
    ctx.cleanup.redis_prefixes.append(redis_prefix)
    config = replace(
        ctx.base(f"latency-{ident(fmt)}"),
        topic=spec.topic_for(table),
        table=table,
        redis_prefix=redis_prefix,
        views=VIEWS,
    )
    plan = JobPlan.of(ctx.products, config)
    register(ctx.connect, spec)
    ctx.connect.wait_running(spec.name, timeout=120)
    ctx.connect.wait_snapshot_complete(spec.name, timeout=300)
    proc = start_job(plan, s.trigger, ctx.work / f"latency-{ident(fmt)}.log", s.endpoints.as_env())
    out: dict[str, Any] = {
        "table_rows": s.latency_rows,
        "trigger": s.trigger,
        "drivers": ["cache,search,warehouse"],
        "rates": [],
    }
    try:
        _wait_until(
            partial(_caught_up, plan), 600, proc, "the latency driver never caught up with the snapshot"
        )
        for i, rate in enumerate(s.rates):
            log.info("[%s] latency at %d rows/s", fmt, rate)
            out["rates"].append(one_rate(ctx, plan, table, rate, proc))
            if i == len(s.rates) - 1:
                break  # no reset after the last rate: a driver left behind need not catch up
            reset_stamps(s.endpoints.pg_dsn, table)
            time.sleep(2)  # the reset's changes reach the topic, then the driver applies them
            _wait_until(
                partial(_caught_up, plan), 300, proc, "the latency driver never caught up after the reset"
            )
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(90)
            except subprocess.TimeoutExpired:
                proc.kill()
        ctx.cleanup.connectors()
    return out


# ---- report -------------------------------------------------------------------------------------------
def _get(d: Any, *path: str) -> Any:
    """d[path[0]][path[1]]...; None where a step is missing (a phase not run)."""
    for key in path:
        if not isinstance(d, Mapping) or key not in d:
            return None
        d = d[key]
    return d


# Each measure: (title, path in a format's results, unit, whether higher is better)
MEASURES: tuple[tuple[str, tuple[str, ...], str, bool], ...] = (
    ("bytes per record (key + value)", ("snapshot", "bytes_per_record", "total"), "B", False),
    ("snapshot rows/s", ("snapshot", "rows_per_s"), "rows/s", True),
    ("Connect CPU per row", ("snapshot", "connect_cpu_us_per_row"), "µs", False),
    (
        "decode rows/s per core (ours, incl. Kafka read)",
        ("decode", "ours", "rows_per_s_per_core"),
        "rows/s",
        True,
    ),
    ("warehouse backfill rows/s (ours)", ("backfill", "ours", "rows_per_s"), "rows/s", True),
)


def latency_p99(res: Mapping[str, Any], rate: int) -> dict[str, float | None]:
    for r in _get(res, "latency", "rates") or ():
        if r["target_rows_per_s"] == rate:
            return {v: r[v].get("p99") for v in VIEWS}
    return {}


def derive(results: dict[str, Any]) -> None:
    """Ratios vs JSON-with-schemas, targets, the recommended default (pure over measured numbers)."""
    formats: dict[str, Any] = results["formats"]
    base = formats.get(BASELINE, {})
    ratios: dict[str, dict[str, float | None]] = {}
    wins: dict[str, list[str]] = {f: [] for f in formats}
    for title, path, _, higher in MEASURES:
        values = {f: _get(r, *path) for f, r in formats.items()}
        b = _get(base, *path)
        ratios[title] = {f: round(v / b, 2) if v and b else None for f, v in values.items()}
        typed = {f: v for f, v in values.items() if f in TYPED and v}
        if len(typed) == len(TYPED):
            best = (max if higher else min)(typed, key=lambda f: typed[f])
            wins[best].append(title)
    for rate in results["settings"]["rates"]:
        p99 = {f: latency_p99(r, rate) for f, r in formats.items()}
        worst = {f: max((v for v in d.values() if v is not None), default=None) for f, d in p99.items()}
        title = f"commit→view p99 at {rate} rows/s (worst view)"
        b = worst.get(BASELINE)
        ratios[title] = {f: round(v / b, 2) if v and b else None for f, v in worst.items()}
        typed = {f: v for f, v in worst.items() if f in TYPED and v is not None}
        if len(typed) == len(TYPED):
            wins[min(typed, key=lambda f: typed[f])].append(title)
    results["ratios_vs_json"] = ratios
    results["typed_format_wins"] = {f: w for f, w in wins.items() if f in TYPED}
    results["targets"] = targets(formats)
    typed_wins = {f: len(w) for f, w in wins.items() if f in TYPED}
    decided = any(typed_wins.values())  # a run of one format compares nothing
    results["recommended_default"] = max(typed_wins, key=lambda f: typed_wins[f]) if decided else None


def targets(formats: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for fmt, r in formats.items():
        ours, ratio = _get(r, "backfill", "ours", "rows_per_s_per_core"), _get(r, "backfill", "ours_vs_peer")
        p99 = latency_p99(r, P99_TARGET_RATE)
        out[fmt] = {
            "snapshot_50k_rows_per_s": _get(r, "snapshot", "met_50k"),
            "backfill_2x_peer": None if ratio is None else ratio >= BACKFILL_VS_PEER_TARGET,
            "backfill_50k_per_core": None if ours is None else ours >= BACKFILL_PER_CORE_TARGET,
            "p99_1s_at_2k": None
            if not p99
            else all(v is not None and v <= P99_TARGET_MS for v in p99.values()),
        }
    return out


def render_markdown(results: Mapping[str, Any]) -> str:
    s, formats = results["settings"], results["formats"]
    ratios = results.get("ratios_vs_json", {})
    lines = [
        "# CDC record formats side by side, and the peer Delta job (issue 19)",
        "",
        f"Run `{results['run_id']}` at {results['started_at']} ({results.get('duration_s')} s), "
        f"{'QUICK sizes' if s['quick'] else 'sizes'}: snapshot {s['rows']:,} rows, decode + backfill "
        f"{s['records']:,} records per topic of {s.get('partitions', 2)} partition(s), latency table {s['latency_rows']:,} rows at {', '.join(map(str, s['rates']))} "
        f"rows/s ({s['latency_warmup_s']:g} s warm-up + {s['latency_seconds']:g} s measured each). "
        f"{os.cpu_count()} cores shared by the stack, the bench and Spark (`local[2]`, driver JIT "
        f"`{results['environment'].get('driver_jit', 'quick')}` for ours and the peer: `materializers start`'s "
        "pick for a driver that far behind; each backfill, and the decode, in a fresh driver process, as "
        "a user starts either job); load average "
        f"{results['environment'].get('loadavg_start')} -> {results.get('loadavg_end')}; a fresh page's first "
        f"touch at the start {results['environment'].get('first_touch_us_per_page')} µs; a fixed CPU probe "
        f"(a 2M-step Python loop, best of 5) {results['environment'].get('cpu_probe_ms')} ms at the start, "
        f"{results.get('cpu_probe_ms_end')} ms at the end. Ratios are vs `json` "
        "(JsonConverter with inline schemas). Every number comes from this run: `cdc-formats.json`.",
        "",
    ]
    for title, path, unit, _ in MEASURES:
        lines += _table(title, formats, {unit: _at(*path), "vs json": _of(ratios.get(title, {}))})
    lines += _table("Decode, rows/s per core (each into Spark's noop sink)", formats, DECODE_COLUMNS)
    lines += _backfill_tables(formats) + _latency_table(formats, s["rates"])
    lines += ["## Targets and where the time went", "", *(f"- {n}" for n in findings(results)), ""]
    lines += ["## Recommended default", "", *recommendation(results), ""]
    if results.get("error"):
        lines += [f"**Run failed:** {results['error']}", ""]
    lines += ["Connector configs, per-thread CPU, per-batch seconds and the cleanup log: the JSON file.", ""]
    return "\n".join(lines)


def _fmt(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "NO"
    return f"{v:,}" if isinstance(v, int) else f"{v:,.2f}" if isinstance(v, float) else str(v)


def _table(
    title: str, formats: Mapping[str, Any], columns: Mapping[str, Callable[[str, Any], Any]]
) -> list[str]:
    """A markdown table: a row per format, a column per (header, value of the format's results)."""
    lines = [f"## {title}", "", f"| format | {' | '.join(columns)} |", f"|---|{'---:|' * len(columns)}"]
    for fmt, r in formats.items():
        lines.append(f"| {fmt} | {' | '.join(_fmt(value(fmt, r)) for value in columns.values())} |")
    return [*lines, ""]


def _at(*path: str) -> Callable[[str, Any], Any]:
    return lambda _fmt, r: _get(r, *path)


def _of(by_format: Mapping[str, Any]) -> Callable[[str, Any], Any]:
    return lambda fmt, _r: by_format.get(fmt)


DECODE_COLUMNS = {
    "Kafka read alone": _at("decode", "kafka_read", "rows_per_s_per_core"),
    "ours": _at("decode", "ours", "rows_per_s_per_core"),
    "ours, decode only": _at("decode", "ours", "decode_only_rows_per_s_per_core"),
    "peer": _at("decode", "peer", "rows_per_s_per_core"),
    "peer, decode only": _at("decode", "peer", "decode_only_rows_per_s_per_core"),
}
BACKFILL_COLUMNS = {
    "ours rows/s": _at("backfill", "ours", "rows_per_s"),
    "ours rows/s/core": _at("backfill", "ours", "rows_per_s_per_core"),
    "peer rows/s": _at("backfill", "peer", "rows_per_s"),
    "peer rows/s/core": _at("backfill", "peer", "rows_per_s_per_core"),
    "ours / peer": _at("backfill", "ours_vs_peer"),
    "same rows + sum(stock)": _at("backfill", "same_rows"),
}


def _backfill_tables(formats: Mapping[str, Any]) -> list[str]:
    lines = _table("Warehouse backfill: ours vs the peer job", formats, BACKFILL_COLUMNS)[:-1]
    for fmt, r in formats.items():
        order = _get(r, "backfill", "order")
        if order:
            every = _per_job(r["backfill"], "rows_per_s_runs", "{:,}")
            touch = _per_job(r["backfill"], "first_touch_us_per_page_runs", "{}")
            probe = _per_job(r["backfill"], "cpu_probe_ms_runs", "{}")
            lines += ["", f"{fmt}: each job's median run of {len(order) // len(BACKFILLS)} (in the order "
                      f"{', '.join(order)}; rows/s of every run: {every}; a fresh page's first touch just "
                      f"before each run, µs: {touch}; the CPU probe before each run, ms: {probe})."]  # fmt: skip
    lines += ["", "Where each second went (summed over the batches; ours: Spark's steps and the job's own "
              "steps inside addBatch, from the job's timeline.jsonl; the peer: Spark's steps):", ""]  # fmt: skip
    for fmt, r in formats.items():
        for who in ("ours", "peer"):
            b = _get(r, "backfill", who)
            if b:
                steps = ", ".join(f"{k} {v:g}" for k, v in b["seconds_by_step"].items())
                lines.append(f"- {fmt}, {who} ({b['seconds']} s wall, {b['batches']} batches): {steps}")
    return [*lines, ""]


def _per_job(backfill: Mapping[str, Any], runs: str, form: str) -> str:
    """Each job's `runs` list of the backfill, its values formatted with `form` ("ours 1, 2; peer 3")."""
    return "; ".join(
        f"{who} {', '.join(form.format(v) for v in backfill[who].get(runs, []))}"
        for who in BACKFILLS
        if who in backfill
    )


def _latency_table(formats: Mapping[str, Any], rates_: Sequence[int]) -> list[str]:
    lines = ["## Commit→view latency, three views in one driver", "",
             "| format | target rows/s | achieved | cache p50 / p99 ms | search p50 / p99 ms | warehouse p50 / p99 ms | batch median ms | sampled rows unseen at the end (cache/search/warehouse) |",
             "|---|---:|---:|---|---|---|---:|---|"]  # fmt: skip
    for fmt, r in formats.items():
        for lat in _get(r, "latency", "rates") or ():
            views = " | ".join(f"{_fmt(lat[v].get('p50'))} / {_fmt(lat[v].get('p99'))}" for v in VIEWS)
            lines.append(
                f"| {fmt} | {lat['target_rows_per_s']:,} | {lat['achieved_rows_per_s']:,} | {views} "
                f"| {_fmt(lat['batch_median_ms'].get('total'))} | {'/'.join(str(lat[v]['unseen_at_end']) for v in VIEWS)} |"
            )
    lines += [
        "",
        "A steady batch's median steps, ms (Spark's and the job's own, from the driver's timeline.jsonl):",
        "",
    ]
    for fmt, r in formats.items():
        for lat in _get(r, "latency", "rates") or ():
            steps = ", ".join(f"{k} {v}" for k, v in lat["batch_median_ms"].items())
            lines.append(f"- {fmt} at {lat['target_rows_per_s']:,} rows/s: {steps}")
    lines += ["", "The slowest batches (a per-record p99 is theirs), ms:", ""]
    for fmt, r in formats.items():
        for lat in _get(r, "latency", "rates") or ():
            for b in lat.get("slowest_batches_ms", ()):
                steps = ", ".join(f"{k} {v}" for k, v in b.items() if k not in ("batch_id", "rows", "total"))
                lines.append(
                    f"- {fmt} at {lat['target_rows_per_s']:,} rows/s, batch {b['batch_id']} ({b['rows']:,} rows): "
                    f"total {b['total']}: {steps}"
                )
    return [*lines, ""]


INSIDE_ADD_BATCH = (
    "addBatch",
)  # our job's own steps run inside Spark's addBatch: left out, not counted twice


def _verdict(met: bool | None) -> str:
    return "not measured" if met is None else "met" if met else "MISSED"


def _top(steps: Mapping[str, float], n: int, skip: Sequence[str] = ()) -> str:
    kept = [(k, v) for k, v in steps.items() if k not in skip]
    return ", ".join(f"{k} {v:g}" for k, v in sorted(kept, key=lambda kv: -kv[1])[:n])


def findings(results: Mapping[str, Any]) -> list[str]:
    """Each target per format, met or missed, and where the seconds went (pure over the results)."""
    notes: list[str] = []
    for fmt, r in results["formats"].items():
        met, snap, b = results.get("targets", {}).get(fmt, {}), r.get("snapshot"), r.get("backfill")
        if snap:
            threads = {k: v for k, v in snap["connect_cpu_us_per_row_by_thread"].items() if v}
            notes.append(
                f"[{fmt}] snapshot {snap['rows_per_s']:,} rows/s: target {SNAPSHOT_TARGET:,} "
                f"{_verdict(met.get('snapshot_50k_rows_per_s'))}. Connect {snap['connect_cpu_us_per_row']} µs CPU/row "
                f"({_top(threads, 4)}); the machine was {snap['machine_busy_cores']} of {os.cpu_count()} cores busy, "
                f"~{snap['resources']['other_processes_cores_approx']} of them other processes"
            )
        if b and "ours" in b and "peer" in b:
            ours, peer = b["ours"], b["peer"]
            notes.append(
                f"[{fmt}] backfill ours {ours['rows_per_s']:,} rows/s ({ours['rows_per_s_per_core']:,}/core) vs the "
                f"peer {peer['rows_per_s']:,}: {b['ours_vs_peer']}x, target 2x {_verdict(met.get('backfill_2x_peer'))}, "
                f"{BACKFILL_PER_CORE_TARGET:,}/core {_verdict(met.get('backfill_50k_per_core'))}. Ours: {ours['seconds']} s "
                f"wall = {_top(ours['seconds_by_step'], 3, INSIDE_ADD_BATCH)} (s, inside addBatch "
                f"{ours['seconds_by_step'].get('addBatch')}); the peer: {peer['seconds']} s wall, addBatch "
                f"(decode + window + MERGE) {peer['seconds_by_step'].get('addBatch')} s; run {' then '.join(b['order'])}"
            )
        for lat in _get(r, "latency", "rates") or ():
            worst = max((lat[v].get("p99") or 0.0) for v in VIEWS)
            steps = dict(lat["batch_median_ms"])
            interval, total = steps.pop("interval", None), steps.pop("total", None)
            batches = int(steps.pop("batches", 0))
            pace = (
                f"only {batches} batch(es) ended in the measured window"
                if interval is None
                else f"one ending every {interval:g} ms (trigger {_get(r, 'latency', 'trigger')})"
            )
            verdict = (
                f", target p99 <= {P99_TARGET_MS:g} ms {_verdict(met.get('p99_1s_at_2k'))}"
                if lat["target_rows_per_s"] == P99_TARGET_RATE
                else ""
            )
            slowest = next(iter(lat.get("slowest_batches_ms", ())), None)
            tail = (
                ""
                if slowest is None
                else f"; the slowest {slowest['total']:g} ms: "
                + _top(slowest, 5, (*INSIDE_ADD_BATCH, "batch_id", "rows", "total"))
            )
            notes.append(
                f"[{fmt}] {lat['target_rows_per_s']:,} rows/s: worst view p99 {worst:,.0f} ms{verdict}; a steady "
                f"batch {total:g} ms, {pace}; "
                f"its median steps ms: {_top(steps, 5, INSIDE_ADD_BATCH)}{tail}"
            )
    return notes


def recommendation(results: Mapping[str, Any]) -> list[str]:
    chosen, wins = results.get("recommended_default"), results.get("typed_format_wins") or {}
    if chosen is None:
        return ["Not decided: the run did not measure both typed formats (json, avro) on every measure."]
    ratios = results.get("ratios_vs_json", {})
    lines = [
        f"**{chosen}**. `json-schemaless` is not a candidate for the default: its records carry no types, so "
        "`cdc tail`/decode cannot give exact values (the materializers type columns by their DDL). Of the two "
        f"typed formats, {chosen} does better on {len(wins.get(chosen, []))} of "
        f"{sum(len(w) for w in wins.values())} measures:",
        "",
    ]
    for title, by_format in ratios.items():
        lines.append(
            f"- {title}: " + ", ".join(f"{f} {_fmt(v)}x json" for f, v in by_format.items() if f != BASELINE)
        )
    return lines


# ---- orchestration -----------------------------------------------------------------------------------
def run(settings: Settings) -> dict[str, Any]:
    run_id, t0 = uuid.uuid4().hex[:6], time.monotonic()
    pids = StackPids.discover(settings.stack_dir)
    results: dict[str, Any] = {
        "run_id": run_id,
        "started_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "settings": {k: (str(v) if isinstance(v, Path) else v) for k, v in _settings_json(settings).items()},
        "environment": {
            **stack_environment(settings.endpoints, pids),
            "driver_jit": spark_session.driver_jit(backlog=settings.records),
        },
        "formats": {fmt: {} for fmt in settings.formats},
    }
    work = Path(tempfile.mkdtemp(prefix="bench-cdcfmt-"))
    cfg = BenchConfig(endpoints=settings.endpoints, stack_dir=settings.stack_dir)
    admin = make_admin({"bootstrap.servers": settings.endpoints.kafka_bootstrap_servers})
    with ConnectClient(settings.endpoints.kafka_connect_url) as connect:
        cleanup = FormatsCleanup(cfg, connect, admin, registry_url=settings.endpoints.schema_registry_url)
        try:
            ctx = Context(settings, run_id, work, catalog.lookup("products"), connect, pids, cleanup)
            phases(ctx, results)
        except (Exception, KeyboardInterrupt, SystemExit) as exc:
            results["error"] = f"{type(exc).__name__}: {exc}"
            log.exception("run failed")
        finally:
            cleanup.all()
            results["cleanup"] = cleanup.log
            shutil.rmtree(work, ignore_errors=True)
    derive(results)
    results["loadavg_end"] = tuple(round(x, 2) for x in os.getloadavg())
    results["cpu_probe_ms_end"] = cpu_probe_ms()
    results["duration_s"] = round(time.monotonic() - t0, 1)
    return results


def _settings_json(s: Settings) -> dict[str, Any]:
    return {f.name: getattr(s, f.name) for f in fields(s) if f.name != "endpoints"}


def phases(ctx: Context, results: dict[str, Any]) -> None:
    s, out = ctx.settings, results["formats"]
    for fmt in s.formats:
        out[fmt]["latency"] = measure_latency(ctx, fmt)
    schema = f"bench_cdcfmt_{ctx.run_id}"
    ctx.cleanup.schemas.append(schema)
    log.info("loading %d rows into %s.products", s.rows, schema)
    began = time.monotonic()
    table = load_table(s.endpoints.pg_dsn, schema, s.rows)
    results["load_seconds"] = round(time.monotonic() - began, 2)
    log.info("warm-up snapshots")
    results["warm_up_seconds"] = warm_up(ctx)
    topics: dict[str, str] = {}
    specs: dict[str, ConnectorSpec] = {}
    for fmt in s.formats:
        spec = specs[fmt] = snapshot_spec(ctx, fmt, table)
        ctx.cleanup.specs.append(spec)
        topics[fmt] = spec.topic_for(table)
        create_topic(ctx.bootstrap, topics[fmt], s.partitions)
        log.info("[%s] snapshot of %d rows", fmt, s.rows)
        out[fmt]["snapshot"] = measure_snapshot(ctx, spec, topics[fmt])
        log.info("[%s] snapshot: %s rows/s", fmt, out[fmt]["snapshot"]["rows_per_s"])
    log.info("streaming %d updates through every connector", s.records - s.rows)
    results["updates"] = stream_updates(ctx, table, specs)
    for spec in list(ctx.cleanup.specs):
        ctx.cleanup.release(spec)
    spark_phase(ctx, topics, out)


def parse(argv: Sequence[str] | None = None) -> Settings:
    return Settings.from_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    run_start = bench_results.Began()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    for noisy in ("httpx", "py4j"):  # a line per REST poll / per Py4J callback drowns the progress
        logging.getLogger(noisy).setLevel(logging.WARNING)
    args = sys.argv[1:] if argv is None else list(argv)
    if args[:1] == [DRIVER_CHILD]:
        return driver_child(args[1])
    settings = Settings.from_args(args)
    # SIGTERM -> SystemExit in the main thread: `finally` still removes what the run created.
    signal.signal(signal.SIGTERM, lambda signum, _frame: sys.exit(128 + signum))
    results = run(settings)
    written = bench_results.write(settings.out_dir, results, render_markdown(results), began=run_start)
    print(render_markdown(results))
    print(f"wrote {written} and {written.with_suffix('.md')}")
    return 1 if results.get("error") else 0


if __name__ == "__main__":
    raise SystemExit(main())
