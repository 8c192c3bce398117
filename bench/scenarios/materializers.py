"""Benchmark: materializer backfill into each view, and commit→view latency at a steady row rate.

Side by side in one run (results in bench/results/materializers/latest.{json,md}):
1. Backfill: `--records` (default 2,000,000) Debezium-shaped product rows (JsonConverter envelope WITH
   its schema, as Debezium writes them; produced by this script so the run does not wait 3 minutes
   for a snapshot) on a 2-partition topic, read from offset 0 by the products materializer with ONE
   view at a time (`--views cache|search|warehouse`) on `local[2]`, in micro-batches of
   `records / 8` so the driver's memory can be watched as the input grows. Baselines on the same
   topic: a hand-written confluent-kafka consumer loop applying the same Redis view (the same Lua
   script, so the same position check) one round trip per record, and the same loop pipelined per
   consumed batch.
2. Latency: a real Postgres table captured by a real Debezium connector, updated at `--rate` rows/s
   (default 2,000) for `--seconds` after `--warmup` seconds of the same load (the connector spec's and
   the job's defaults), while the products materializer runs, each group of views in its
   own driver process (the `materializers` CLI with `--views`, optionally its own `--trigger`); one
   run per `--drivers` layout, one after the other (DEFAULT_LAYOUTS: the cache alone; the search index
   alone; a driver per view at once, as a 2-core machine would host all three). A row's commit→view
   latency is the time from its commit until a poller sees the new value in the view (5 rows of every
   commit are followed; cache polled every 50 ms, search and warehouse every 100 ms (250 ms before
   2026-11-29): that interval bounds the resolution).
Needs a running stack (`make up`, `source .stack/env`). Timing on a shared 2-core machine is noisy:
read the ratios, and re-run before drawing conclusions.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any

import psycopg
import pyarrow as pa
import redis
from confluent_kafka.admin import NewTopic  # type: ignore[attr-defined]

from bench.harness import results as bench_results
from bench.harness.percentiles import summarize_ms
from bench.harness.streaming import run_available_now
from cdc.connect_client import ConnectClient
from cdc.connector_spec import ConnectorSpec, DatabaseSpec, HeartbeatSpec, RegistrySpec
from cdc.preflight import run_preflight
from cdc.slots import drop_slot
from kafkakit.clients import make_admin, make_consumer, make_producer
from materializers.config import VIEWS, RunConfig, parse_views
from materializers.ops import lag
from materializers.runtime import checkpoint
from materializers.runtime.job import Job, JobPlan
from materializers.spark import session as spark_session
from materializers.views.redis_cache import APPLY_LUA, RedisCache
from materializers.views.warehouse.delta import query
from shop.products import PRODUCTS, TABLE_DDL

OUT = bench_results.RESULTS / "materializers"
# The cache alone, the search index alone, then all three views at once as a 2-core machine would host
# them: a driver per view, the warehouse on a longer trigger (Delta costs seconds per commit whatever
# the batch's size, so a short trigger only spends the cores the other views need).
DEFAULT_LAYOUTS = ("cache", "search", "cache/search/warehouse@30s")
SAMPLED_PER_COMMIT = 5
DESCRIPTION = "A sturdy everyday product, built to last; ships in recycled packaging. " * 3

# Debezium's JsonConverter (schemas.enable=true) envelope schema for the products table, as the
# connector writes it on every record: parsing it is part of the real cost of decoding CDC JSON.
_ROW_FIELDS = [
    {"type": "int32", "optional": False, "field": "id"},
    {"type": "string", "optional": False, "field": "name"},
    {"type": "string", "optional": True, "field": "description"},
    {"type": "string", "optional": False, "field": "price"},
    {"type": "int32", "optional": False, "default": 0, "field": "stock"},
]
_SOURCE_FIELDS = [
    {"type": t, "optional": o, "field": f}
    for t, o, f in (
        ("string", False, "version"),
        ("string", False, "connector"),
        ("string", False, "name"),
        ("int64", False, "ts_ms"),
        ("string", True, "snapshot"),
        ("string", False, "db"),
        ("string", True, "sequence"),
        ("int64", True, "ts_us"),
        ("int64", True, "ts_ns"),
        ("string", False, "schema"),
        ("string", False, "table"),
        ("int64", True, "txId"),
        ("int64", True, "lsn"),
        ("int64", True, "xmin"),
    )
]
VALUE_SCHEMA = {
    "type": "struct",
    "fields": [
        {"type": "struct", "fields": _ROW_FIELDS, "optional": True, "name": "bench.Value", "field": "before"},
        {"type": "struct", "fields": _ROW_FIELDS, "optional": True, "name": "bench.Value", "field": "after"},
        {
            "type": "struct",
            "fields": _SOURCE_FIELDS,
            "optional": False,
            "name": "io.debezium.connector.postgresql.Source",
            "field": "source",
        },
        {"type": "string", "optional": False, "field": "op"},
        {"type": "int64", "optional": True, "field": "ts_ms"},
    ],
    "optional": False,
    "name": "bench.Envelope",
    "version": 2,
}
KEY_SCHEMA = {
    "type": "struct",
    "fields": [{"type": "int32", "optional": False, "field": "id"}],
    "optional": False,
    "name": "bench.Key",
}


def snapshot_record(entity: int, lsn: int, schemas: bool = True) -> tuple[bytes, bytes]:
    """One snapshot read (op "r") of product `entity`, as Debezium's JsonConverter writes it (with
    or without inline schemas)."""
    ts = 1_764_000_000_000 + entity // 1000
    after = {
        "id": entity,
        "name": f"Product {entity}",
        "description": DESCRIPTION,
        "price": f"{entity % 10_000 / 100:.2f}",
        "stock": entity % 97,
    }
    source = {
        "version": "3.6.1.Final",
        "connector": "postgresql",
        "name": "bench",
        "ts_ms": ts,
        "snapshot": "true",
        "db": "postgres",
        "sequence": None,
        "ts_us": ts * 1000,
        "ts_ns": ts * 1_000_000,
        "schema": "public",
        "table": "products",
        "txId": 700,
        "lsn": lsn,
        "xmin": None,
    }
    payload = {"before": None, "after": after, "source": source, "op": "r", "ts_ms": ts}
    if not schemas:
        return json.dumps({"id": entity}).encode(), json.dumps(payload).encode()
    key = {"schema": KEY_SCHEMA, "payload": {"id": entity}}
    return json.dumps(key).encode(), json.dumps({"schema": VALUE_SCHEMA, "payload": payload}).encode()


def produce_snapshot(bootstrap: str, topic: str, records: int, schemas: bool = True) -> float:
    """Produce `records` snapshot reads (entities 1..records); return seconds taken."""
    began = time.monotonic()
    producer = make_producer(
        {"bootstrap.servers": bootstrap, "linger.ms": 50, "batch.size": 1_000_000, "compression.type": "lz4"}
    )
    for entity in range(1, records + 1):
        key, value = snapshot_record(entity, 50_000_000, schemas)
        while True:
            try:
                producer.produce(topic, key=key, value=value)
                break
            except BufferError:
                producer.poll(0.05)
        producer.poll(0)
    if producer.flush(120):
        raise RuntimeError("the benchmark topic could not be filled (flush timed out)")
    return time.monotonic() - began


# ------------------------------------------------------------------------------ memory sampling


def rss_bytes(pid: int) -> tuple[int, int]:
    """(anonymous, file-backed) resident bytes: memory-mapped index files are file-backed pages the
    kernel may drop at will, so only the anonymous part says whether the driver itself grows."""
    found = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("RssAnon", "RssFile", "RssShmem"):
                found[key] = int(value.split()[0]) * 1024
    return found["RssAnon"], found["RssFile"] + found["RssShmem"]


@dataclass
class MemorySampler:
    """RSS of the Python driver and the Spark driver JVM (which, in local mode, runs the executors)."""

    jvm_pid: int
    every_s: float = 0.5
    samples: list[tuple[float, dict[str, int]]] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)

    @contextmanager
    def running(self) -> Iterator[MemorySampler]:
        thread = threading.Thread(target=self._loop, daemon=True)
        thread.start()
        try:
            yield self
        finally:
            self._stop.set()
            thread.join()

    def _loop(self) -> None:
        began = time.monotonic()
        while not self._stop.wait(self.every_s):
            (py_anon, py_file), (jvm_anon, jvm_file) = rss_bytes(os.getpid()), rss_bytes(self.jvm_pid)
            self.samples.append((
                time.monotonic() - began,
                {"python_driver_mib": py_anon + py_file, "python_driver_anon_mib": py_anon,
                 "jvm_driver_mib": jvm_anon + jvm_file, "jvm_driver_anon_mib": jvm_anon},
            ))  # fmt: skip

    def by_quarter(self) -> dict[str, list[float]]:
        """Max RSS (MiB) per quarter of the run: flat memory = the last quarter near the second."""
        if not self.samples:
            return {}
        end = self.samples[-1][0] or 1.0
        quarters: dict[str, list[float]] = {name: [0.0] * 4 for name in self.samples[0][1]}
        for at, sizes in self.samples:
            q = min(int(4 * at / end), 3)
            for name, size in sizes.items():
                quarters[name][q] = max(quarters[name][q], size / 2**20)
        return {k: [round(v, 1) for v in vs] for k, vs in quarters.items()}


# ------------------------------------------------------------------------------------ backfill


def backfill(spark: Any, plan: JobPlan, records: int) -> dict[str, Any]:
    """Run the job over the whole topic (availableNow); rows/s over the query's wall time."""
    jvm_pid = int(spark.sparkContext._jvm.ProcessHandle.current().pid())
    sampler = MemorySampler(jvm_pid)
    with sampler.running():
        run = run_available_now(partial(Job, spark, plan), f"backfill of {plan.config.views}")
    seconds = run.seconds
    batches = run.batches_reading(records, "backfill")
    return {
        "seconds": round(seconds, 2),
        "rows_per_s": round(records / seconds),
        "rows_per_s_per_core": round(records / seconds / 2),
        "batches": len(batches),
        "batch_seconds": [round(p["batchDuration"] / 1000, 2) for p in batches],
        "driver_rss_by_quarter": sampler.by_quarter(),
    }


def count_keys(url: str, prefix: str) -> int:
    return sum(1 for _ in redis.Redis.from_url(url).scan_iter(match=f"{prefix}:*", count=5000))


def view_size(plan: JobPlan, view: str) -> int:
    if view == "cache":
        return count_keys(plan.config.endpoints.redis_url, plan.redis_prefix)
    if view == "search":
        index = plan.search()
        assert index is not None
        searcher = index.index().searcher()
        return int(searcher.num_docs) - 1  # the batch marker document
    rows = query(plan.warehouse().current_path, "SELECT count(*) AS n FROM t")
    return int(rows[0]["n"])  # type: ignore[call-overload]


def unlink_prefix(url: str, prefix: str) -> None:
    client = redis.Redis.from_url(url)
    batch: list[bytes] = []
    for key in client.scan_iter(match=f"{prefix}:*", count=5000):
        batch.append(key)
        if len(batch) >= 5000:
            client.unlink(*batch)
            batch = []
    if batch:
        client.unlink(*batch)


def consumed(config: RunConfig, topic: str, records: int, group: str = "") -> Iterator[list[Any]]:
    """The hand-written loops' read: `topic` from its start in batches of up to 500 records, until
    `records` have been consumed (what a user's confluent-kafka loop does); as consumer group `group`
    ("": a new bench-loop-* one)."""
    consumer = make_consumer(
        {
            "bootstrap.servers": config.endpoints.kafka_bootstrap_servers,
            "group.id": group or f"bench-loop-{uuid.uuid4().hex[:8]}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": True,
        }
    )
    consumer.subscribe([topic])
    seen = 0
    try:
        while seen < records:
            msgs = [m for m in consumer.consume(500, 1.0) if m.error() is None and m.value() is not None]
            yield msgs
            seen += len(msgs)
    finally:
        consumer.close()


def hand_written_loop(
    config: RunConfig, topic: str, records: int, prefix: str, pipelined: bool, schemas: bool = True
) -> dict[str, Any]:
    """What a user writes without Spark: consume, decode, apply the view's Lua script per record."""
    client = redis.Redis.from_url(config.endpoints.redis_url)
    script = client.register_script(APPLY_LUA)
    began = time.monotonic()
    for msgs in consumed(config, topic, records):
        target = client.pipeline(transaction=False) if pipelined else client
        for msg in msgs:
            doc = json.loads(msg.value())
            payload = doc["payload"] if schemas else doc
            after = payload["after"]
            # position, op, fields set, fields kept (none: a snapshot carries every column)
            args = [f"{payload['source']['lsn']:020d}0", "upsert", "4", "0"]
            for name in ("name", "description", "price", "stock"):
                args += [name, str(after[name])]
            script(keys=[f"{prefix}:{after['id']}"], args=args, client=target)
        if pipelined and msgs:
            target.execute()  # type: ignore[union-attr]
    seconds = time.monotonic() - began
    return {"seconds": round(seconds, 2), "rows_per_s": round(records / seconds)}


def run_backfill(
    base: RunConfig,
    records: int,
    views: tuple[str, ...],
    work: Path,
    tag: str,
    baselines: bool = True,
    schemas: bool = True,
) -> dict[str, Any]:
    bootstrap = base.endpoints.kafka_bootstrap_servers
    topic = f"bench-mat-backfill-{tag}"
    admin = make_admin({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(timeout=30)
    results: dict[str, Any] = {
        "records": records,
        "topic_partitions": 2,
        "master": base.master,
        "json_schemas": schemas,
    }
    try:
        print(f"producing {records} Debezium-shaped records to {topic} ...", flush=True)
        results["produce_seconds"] = round(produce_snapshot(bootstrap, topic, records, schemas), 2)
        spark = spark_session.build(base.master, "bench-materializers-backfill")
        try:
            for view in views:
                plan = JobPlan.of(
                    PRODUCTS,
                    replace(
                        base,
                        topic=topic,
                        home=work / view,
                        redis_prefix=f"bench-{tag}-{view}",
                        views=(view,),
                        max_offsets_per_trigger=max(records // 8, 1),
                    ),
                )
                print(f"backfill -> {view} ...", flush=True)
                results[view] = backfill(spark, plan, records)
                results[view]["view_rows"] = view_size(plan, view)
                print(f"  {results[view]['rows_per_s']} rows/s", flush=True)
                if view == "cache":
                    unlink_prefix(base.endpoints.redis_url, plan.redis_prefix)
                shutil.rmtree(work / view, ignore_errors=True)
        finally:
            spark.stop()
        loops = (("hand_written_loop", False), ("hand_written_loop_pipelined", True)) if baselines else ()
        for name, pipelined in loops:
            prefix = f"bench-{tag}-{name}"
            print(f"baseline {name} ...", flush=True)
            results[name] = hand_written_loop(base, topic, records, prefix, pipelined, schemas)
            print(f"  {results[name]['rows_per_s']} rows/s", flush=True)
            results[name]["view_rows"] = count_keys(base.endpoints.redis_url, prefix)
            unlink_prefix(base.endpoints.redis_url, prefix)
    finally:
        admin.delete_topics([topic, f"{topic}.dlq"])
    return results


# ------------------------------------------------------------------------------------- latency


@dataclass
class Pending:
    entity: int
    stamp: int
    committed_at: float


@dataclass
class Prober:
    """Polls one view for the rows the writer committed; records commit→visible latency (ms).

    `commits`, where a view has one: a cheap token that moves when the view commits (a file's
    identity, a log's newest version). The prober then checks it every `every_s` and reads the rows
    only when it moved, so a row is seen within `every_s` of its commit without a read per tick: read
    every 100 ms instead, a row was seen up to 100 ms (50 on average) after it became visible."""

    name: str
    every_s: float
    seen_stamp: Callable[[list[int]], dict[int, int]]
    commits: Callable[[], object] | None = None
    pending: list[Pending] = field(default_factory=list)
    latencies_ms: list[float] = field(default_factory=list)
    sighted: list[tuple[float, float]] = field(default_factory=list)  # (committed_at, seen_at), all rows
    lock: threading.Lock = field(default_factory=threading.Lock)
    stop: threading.Event = field(default_factory=threading.Event)
    measuring: threading.Event = field(default_factory=threading.Event)
    errors: list[str] = field(default_factory=list)

    def add(self, rows: list[Pending]) -> None:
        with self.lock:
            self.pending.extend(rows)

    def loop(self) -> None:
        held: object = None
        while not self.stop.wait(self.every_s):
            if self.commits is not None:
                token = self.commits()
                if token == held:
                    continue
                held = token
            with self.lock:
                todo, self.pending = self.pending, []
            if not todo:
                continue
            try:
                stamps = self.seen_stamp(sorted({p.entity for p in todo}))
            except Exception as exc:  # a view mid-commit: try again next round
                self.errors.append(str(exc))
                stamps = {}
            now = time.time()
            left = []
            for p in todo:
                if stamps.get(p.entity, -1) >= p.stamp:
                    self.sighted.append((p.committed_at, now))
                    if self.measuring.is_set():
                        self.latencies_ms.append((now - p.committed_at) * 1000)
                else:
                    left.append(p)
            self.add(left)


def cache_stamps(cache: RedisCache) -> Callable[[list[int]], dict[int, int]]:
    client = cache.client()

    def read(entities: list[int]) -> dict[int, int]:
        pipe = client.pipeline(transaction=False)
        for e in entities:
            pipe.hget(cache.key(str(e)), "stock")
        return {e: int(v) for e, v in zip(entities, pipe.execute(), strict=True) if v is not None}

    return read


def warehouse_stamps(plan: JobPlan) -> Callable[[list[int]], dict[int, int]]:
    """Reads the current table through one kept handle, brought up to date per poll (reading its whole
    log on every poll cost more than the query)."""
    from deltalake import DeltaTable, QueryBuilder

    path = plan.warehouse().current_path
    held: list[DeltaTable] = []

    def read(entities: list[int]) -> dict[int, int]:
        if not held:
            held.append(DeltaTable(path))
        table = held[0]
        table.update_incremental()
        wanted = ",".join(f"'{e}'" for e in entities)
        found = (
            QueryBuilder()
            .register("t", table)
            .execute(f"SELECT entity, stock FROM t WHERE entity IN ({wanted})")
        )
        rows = pa.table(found.read_all()).to_pylist()
        return {int(str(r["entity"])): int(str(r["stock"])) for r in rows}

    return read


def delta_commits(path: str) -> Callable[[], object]:
    """The newest version of the Delta table at `path`: the log's next commit file is looked for on
    each call (a stat), the log listed once."""
    log_dir = Path(path) / "_delta_log"
    newest = -1

    def version() -> object:
        nonlocal newest
        if newest < 0:
            newest = max(
                (int(f.name[:20]) for f in log_dir.glob("*.json") if f.name[:20].isdigit()), default=-1
            )
        while (log_dir / f"{newest + 1:020}.json").exists():
            newest += 1
        return newest

    return version


def file_commits(path: Path) -> Callable[[], object]:
    """The identity of the file at `path` (None while absent): Tantivy replaces its `meta.json` (a new
    file, renamed into place) on every commit."""

    def identity() -> object:
        try:
            found = path.stat()
        except FileNotFoundError:
            return None
        return (found.st_ino, found.st_mtime_ns, found.st_size)

    return identity


def search_stamps(plan: JobPlan) -> Callable[[list[int]], dict[int, int]]:
    import tantivy

    def read(entities: list[int]) -> dict[int, int]:
        index = plan.search()
        assert index is not None
        opened = tantivy.Index.open(str(index.path))
        searcher = opened.searcher()
        found = {}
        for e in entities:
            hits = searcher.search(tantivy.Query.term_query(opened.schema, "key", str(e)), 1).hits
            if hits:
                name = searcher.doc(hits[0][1]).to_dict().get("name", [""])[0]
                found[e] = int(name.rsplit(" ", 1)[-1]) if " rev " in name else 0
        return found

    return read


class PacedUpdates(threading.Thread):
    """Updates `rate` rows/s in 20 commits/s; each row's new stock (and name) is a rising stamp."""

    def __init__(self, dsn: str, table: str, rows: int, rate: int, probers: list[Prober]) -> None:
        super().__init__(daemon=True)
        self.dsn, self.table, self.rows, self.rate, self.probers = dsn, table, rows, rate, probers
        self.stop = threading.Event()
        self.updated = 0
        self.behind_s = 0.0
        self.error: BaseException | None = None

    def run(self) -> None:
        per_commit, interval = max(1, self.rate // 20), 1 / 20
        rng = random.Random(7)
        stamp = 1
        try:
            with psycopg.connect(self.dsn) as conn:
                began = time.perf_counter()
                while not self.stop.is_set():
                    due = began + (stamp - 1) * interval
                    now = time.perf_counter()
                    if due > now:
                        time.sleep(due - now)
                    else:
                        self.behind_s = max(self.behind_s, now - due)
                    ids = rng.sample(range(1, self.rows + 1), per_commit)
                    conn.execute(
                        f"update {self.table} set stock = %s, name = 'Product ' || id || ' rev ' || %s "
                        "where id = any(%s)".encode(),
                        (stamp, stamp, ids),
                    )
                    conn.commit()
                    committed = time.time()
                    self.updated += per_commit
                    # A sample of each commit (100 rows/s at 20 commits/s): polling every row
                    # would make the poller the machine's biggest CPU user once the views lag.
                    for prober in self.probers:
                        prober.add([Pending(e, stamp, committed) for e in ids[:SAMPLED_PER_COMMIT]])
                    stamp += 1
        except BaseException as exc:  # handed to the main thread
            self.error = exc


def load_table(dsn: str, schema: str, rows: int) -> str:
    table = f"{schema}.products"
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"create schema {schema}".encode())
        conn.execute(f"create table {table} ({TABLE_DDL})".encode())
        conn.execute(
            f"insert into {table} (id, name, description, price, stock) "
            "select g, 'Product ' || g, %s, (g %% 10000) / 100.0, 0 from generate_series(1, %s) g".encode(),
            (DESCRIPTION, rows),
        )
    return table


def captured_table(base: RunConfig, schema: str, rows: int, record_format: str) -> tuple[str, ConnectorSpec]:
    """A products table of `rows` rows in its own schema, and the connector spec for it (the spec's
    defaults, as a user's), its records in `record_format` (avro: in the stack's registry)."""
    table = load_table(base.endpoints.pg_dsn, schema, rows)
    name = schema.replace("_", "-")
    spec = ConnectorSpec(
        name=name,
        database=DatabaseSpec.from_dsn(base.endpoints.pg_dsn),
        topic_prefix=name.replace("-", ""),
        tables=(table,),
        heartbeat=HeartbeatSpec(enabled=False),
        format=record_format,
        registry=RegistrySpec.from_url(base.endpoints.schema_registry_url)
        if record_format == "avro"
        else None,
    )
    return table, spec


@dataclass(frozen=True)
class Driver:
    """One driver process of a latency layout: the views it keeps and, when set, its own trigger."""

    views: tuple[str, ...]
    trigger: str | None = None

    @classmethod
    def parse(cls, text: str) -> Driver:
        views, _, trigger = text.partition("@")
        return cls(parse_views(views), trigger or None)

    def __str__(self) -> str:
        return ",".join(self.views) + (f"@{self.trigger}" if self.trigger else "")


def start_job(plan: JobPlan, trigger: str, log_path: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    """One materializer driver through the CLI, keeping the plan's views only."""
    c = plan.config
    args = [sys.executable, "-m", "materializers.cli", "--home", str(c.home), "start", "products",
            "--from", "earliest", "--trigger", trigger, "--topic", c.topic, "--table", c.table,
            "--redis-prefix", c.redis_prefix, "--views", ",".join(c.views)]  # fmt: skip
    with log_path.open("wb") as out:
        return subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, env={**os.environ, **env})


def prober(view: str, plan: JobPlan) -> Prober:
    """The view's prober: the cache read every 50 ms (it has no commit to watch: each key is written
    on its own), the others read when their commit token moves, looked at every 10 ms."""
    if view == "cache":
        return Prober(view, 0.05, cache_stamps(plan.cache()))
    if view == "search":
        index = plan.search()
        assert index is not None
        return Prober(view, 0.01, search_stamps(plan), file_commits(index.path / "meta.json"))
    return Prober(view, 0.01, warehouse_stamps(plan), delta_commits(str(plan.warehouse().current_path)))


def run_latency(
    base: RunConfig,
    rows: int,
    rate: int,
    seconds: float,
    warmup: float,
    trigger: str,
    layout: tuple[Driver, ...],
    work: Path,
    tag: str,
    schemas: bool = True,
) -> dict[str, Any]:
    schema = f"bench_mat_{tag}"
    table, spec = captured_table(base, schema, rows, "json" if schemas else "json-schemaless")
    connect = ConnectClient(base.endpoints.kafka_connect_url)
    # One driver per group of views: the plan of the driver that keeps a view is where it lives.
    plans = [
        JobPlan.of(
            PRODUCTS,
            replace(
                base,
                topic=spec.topic_for(table),
                table=table,
                home=work / f"latency-{tag}-{'-'.join(driver.views)}",
                redis_prefix=f"bench-{tag}-lat",
                views=driver.views,
            ),
        )
        for driver in layout
    ]
    owner = {view: plan for plan in plans for view in plan.config.views}
    procs: list[subprocess.Popen[bytes]] = []
    try:
        run_preflight(spec)
        connect.apply(spec.name, spec.to_config())
        connect.wait_running(spec.name, timeout=120)
        connect.wait_snapshot_complete(spec.name, timeout=300)
        for plan, driver in zip(plans, layout, strict=True):
            log_path = work / f"latency-{tag}-{'-'.join(plan.config.views)}.log"
            procs.append(start_job(plan, driver.trigger or trigger, log_path, base.endpoints.as_env()))
        for plan, proc in zip(plans, procs, strict=True):
            _wait_until(partial(_caught_up, plan), 600, proc, "the job never caught up with the snapshot")
        probers = [prober(view, owner[view]) for view in VIEWS if view in owner]
        threads = [threading.Thread(target=p.loop, daemon=True) for p in probers]
        for t in threads:
            t.start()
        writer = PacedUpdates(base.endpoints.pg_dsn, table, rows, rate, probers)
        writer.start()
        # Steady state: the driver's JIT still compiles Catalyst's per-batch planning code for the first
        # minute or so (C2 compiler threads were 39% of the driver's CPU after 100 s), and Delta writes
        # its first files.
        time.sleep(warmup)
        for p in probers:
            p.measuring.set()
        measured_from, updated_before = time.monotonic(), writer.updated
        time.sleep(seconds)
        writer.stop.set()
        writer.join()
        achieved = (writer.updated - updated_before) / (time.monotonic() - measured_from)
        time.sleep(10)  # let the last rows arrive before the pollers stop
        for p in probers:
            p.stop.set()
        for t in threads:
            t.join()
        if writer.error is not None:
            raise writer.error
        result: dict[str, Any] = {
            "table_rows": rows,
            "target_rows_per_s": rate,
            "achieved_rows_per_s": round(achieved),
            "writer_max_behind_s": round(writer.behind_s, 3),
            "trigger": trigger,
            "drivers": [str(driver) for driver in layout],
            "measured_seconds": seconds,
            "warmup_seconds": warmup,
            "json_schemas": schemas,
        }
        for p in probers:
            result[p.name] = {
                **summarize_ms(p.latencies_ms),
                "unseen_at_end": len(p.pending),
                "poll_s": p.every_s,
                "poll_errors": len(p.errors),
                "first_poll_error": p.errors[0] if p.errors else None,
            }
        return result
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(60)
                except subprocess.TimeoutExpired:
                    proc.kill()
        connect.delete(spec.name)
        drop_slot(base.endpoints.pg_dsn, spec.resolved_slot_name, spec.resolved_publication_name)
        connect.close()
        unlink_prefix(base.endpoints.redis_url, f"bench-{tag}-lat")
        with psycopg.connect(base.endpoints.pg_dsn, autocommit=True) as conn:
            conn.execute(f"drop schema if exists {schema} cascade".encode())


def _caught_up(plan: JobPlan) -> bool:
    ends = lag.end_offsets(plan.config.endpoints.kafka_bootstrap_servers, plan.topic)
    return not checkpoint.lag(checkpoint.committed(plan.checkpoint).offsets, ends)


def _wait_until(check: Callable[[], bool], timeout: float, proc: subprocess.Popen[bytes], why: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the materializer exited ({proc.returncode}); see its log")
        try:
            if check():
                return
        except (OSError, ValueError, KeyError):
            pass  # the checkpoint is not written yet
        time.sleep(1)
    raise RuntimeError(why)


# ------------------------------------------------------------------------------------- report


def verdicts(res: dict[str, Any]) -> dict[str, Any]:
    b, lat = res.get("backfill"), res.get("latency")
    out: dict[str, Any] = {}
    if b and "warehouse" in b:
        out["warehouse_rows_per_s_per_core"] = b["warehouse"]["rows_per_s_per_core"]
        out["warehouse_target_170k_per_core_met"] = b["warehouse"]["rows_per_s_per_core"] >= 170_000
    if b and "hand_written_loop" in b:  # left out with --no-baselines
        loop = b["hand_written_loop"]["rows_per_s"]
        if "cache" in b:
            out["cache_vs_hand_written_loop"] = round(b["cache"]["rows_per_s"] / loop, 2)
            out["cache_vs_pipelined_loop"] = round(
                b["cache"]["rows_per_s"] / b["hand_written_loop_pipelined"]["rows_per_s"], 2
            )
            out["cache_target_3x_met"] = b["cache"]["rows_per_s"] >= 3 * loop
        if "search" in b:
            out["search_vs_hand_written_loop"] = round(b["search"]["rows_per_s"] / loop, 2)
    for run in lat or ():
        drivers = " / ".join(run["drivers"])
        out.setdefault("p99_ms_by_drivers", {})[drivers] = {v: run[v].get("p99") for v in VIEWS if v in run}
        out.setdefault("p99_target_2s_met_by_drivers", {})[drivers] = {
            v: (run[v].get("p99") or float("inf")) <= 2000 for v in VIEWS if v in run
        }
    return out


def _form(run: dict[str, Any]) -> str:
    return "" if run.get("json_schemas", True) else " without inline JSON schemas"


def render_markdown(res: dict[str, Any]) -> str:
    lines = ["# Materializers benchmark", "", f"Measured {res['measured_at']} on {res['machine']}.", ""]
    b = res.get("backfill")
    if b:
        lines += [f"## Backfill of {b['records']:,} Debezium records{_form(b)} (local[2], 2 partitions)", "",
                  "| run | rows/s | rows/s/core | seconds | view rows | driver RSS by quarter, MiB: py / jvm | of which anonymous: py / jvm |",
                  "|---|---:|---:|---:|---:|---|---|"]  # fmt: skip
        runs = ("cache", "search", "warehouse", "hand_written_loop", "hand_written_loop_pipelined")
        for name in (name for name in runs if name in b):
            r = b[name]
            mem = r.get("driver_rss_by_quarter", {})
            lines.append(
                f"| {name} | {r['rows_per_s']:,} | {r.get('rows_per_s_per_core', r['rows_per_s']):,} | {r['seconds']} "
                f"| {r['view_rows']:,} | {mem.get('python_driver_mib', '')} / {mem.get('jvm_driver_mib', '')} "
                f"| {mem.get('python_driver_anon_mib', '')} / {mem.get('jvm_driver_anon_mib', '')} |"
            )
        lines.append("")
    for lat in res.get("latency") or ():
        drivers = " / ".join(lat["drivers"])
        lines += [f"## Commit→view latency at {lat['achieved_rows_per_s']:,} rows/s (target {lat['target_rows_per_s']:,}){_form(lat)}, drivers: {drivers}", "",
                  f"Measured for {lat['measured_seconds']:g} s after {lat.get('warmup_seconds', 20):g} s of the same load (warm-up); trigger {lat['trigger']}.", "",
                  "| view | p50 ms | p90 ms | p99 ms | max ms | rows measured | poll interval s |",
                  "|---|---:|---:|---:|---:|---:|---:|"]  # fmt: skip
        for v in (v for v in VIEWS if v in lat):
            r = lat[v]
            lines.append(
                f"| {v} | {r.get('p50')} | {r.get('p90')} | {r.get('p99')} | {r.get('max')} | {r['count']} | {r['poll_s']} |"
            )
        lines.append("")
    lines += ["## Verdicts", "", "```json", json.dumps(res["verdicts"], indent=2), "```", ""]
    lines += ["Where the time goes (step by step, per batch) and what was removed: the README's "
              "Benchmarks section, paragraph \"Where the materializers' time goes\".", ""]  # fmt: skip
    return "\n".join(lines)


def parse(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--records", type=int, default=2_000_000, help="backfill records (default 2,000,000)")
    parser.add_argument("--rate", type=int, default=2_000, help="latency phase: row updates per second")
    parser.add_argument("--seconds", type=float, default=60.0, help="latency phase: measured seconds")
    parser.add_argument(
        "--warmup", type=float, default=60.0, help="latency phase: seconds of load before measuring"
    )
    parser.add_argument("--table-rows", type=int, default=20_000, help="latency phase: rows in the table")
    parser.add_argument(
        "--trigger",
        default=RunConfig().trigger,
        help="latency phase: the job's trigger (its default: %(default)s)",
    )
    parser.add_argument(
        "--drivers",
        action="append",
        help="latency phase: views per driver process, drivers separated by /, a driver's own trigger "
        "after @ (cache/search/warehouse@30s); repeat for runs one after the other (default: "
        f"{' then '.join(DEFAULT_LAYOUTS)})",
    )
    parser.add_argument(
        "--skip",
        choices=("backfill", "latency"),
        action="append",
        default=[],
        help="leave a phase out; its results already in --out are kept",
    )
    parser.add_argument(
        "--backfill-views",
        type=parse_views,
        default=VIEWS,
        help="backfill phase: the views to backfill, one run each (default: cache,search,warehouse)",
    )
    parser.add_argument(
        "--baselines",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="backfill phase: also run the hand-written loops (the baseline of the cache's ratio)",
    )
    parser.add_argument(
        "--json-schemas",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="Debezium JSON with inline schemas (the cdc package's default) or without (~8x smaller)",
    )
    parser.add_argument("--out", type=Path, default=OUT, help="the results' folder")
    args = parser.parse_args(argv)
    args.layouts = [
        tuple(Driver.parse(group) for group in drivers.split("/"))
        for drivers in args.drivers or DEFAULT_LAYOUTS
    ]
    for layout in args.layouts:
        named = [v for driver in layout for v in driver.views]
        if len(named) != len(set(named)):
            parser.error(f"--drivers {'/'.join(map(str, layout))!r} names a view twice")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    run_start = bench_results.Began()
    args = parse(argv)
    base, layouts = RunConfig.from_env(), args.layouts
    tag = uuid.uuid4().hex[:6]
    work = Path(tempfile.mkdtemp(prefix="bench-mat-"))
    results: dict[str, Any] = {
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": {
            "cpus": os.cpu_count(),
            "load_1m_at_start": round(os.getloadavg()[0], 2),
            "python": platform.python_version(),
        },
    }
    if args.skip:  # a phase left out keeps its earlier results
        earlier = bench_results.previous(args.out)
        results.update({k: earlier[k] for k in ("backfill", "latency") if k in args.skip and k in earlier})
        if isinstance(results.get("latency"), dict):  # written before runs per layout
            results["latency"] = [results["latency"]]
    try:
        if "backfill" not in args.skip:
            results["backfill"] = run_backfill(
                base, args.records, args.backfill_views, work, tag, args.baselines, args.json_schemas
            )
            save(args.out, results, run_start)  # a later phase failing keeps this one
        if "latency" not in args.skip:
            results["latency"] = [
                run_latency(
                    base,
                    args.table_rows,
                    args.rate,
                    args.seconds,
                    args.warmup,
                    args.trigger,
                    layout,
                    work,
                    f"{tag}{i}",
                    args.json_schemas,
                )
                for i, layout in enumerate(layouts)
            ]
    finally:
        shutil.rmtree(work, ignore_errors=True)
    results["machine"]["load_1m_at_end"] = round(os.getloadavg()[0], 2)
    save(args.out, results, run_start)
    print(render_markdown(results))
    return 0


def save(out: Path, results: dict[str, Any], began: bench_results.Began) -> None:
    results["verdicts"] = verdicts(results)
    bench_results.write(out, results, render_markdown(results), began=began)


if __name__ == "__main__":
    raise SystemExit(main())
