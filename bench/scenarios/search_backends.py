"""Benchmark (issue 21): a search backfill of real Debezium Avro changes into each search backend, side
by side in one run, and commit->searchable latency.

`python -m bench run search_backends` with the stack env sourced and OpenSearch up (`STACK_OPENSEARCH=1
devstack up`); results in bench/results/search_backends/latest.{json,md}. Phases, in order:
1. Records (cdc_formats' phases 1-2, format `avro` only): a products table of `--rows` rows
   (1,000,000) in Postgres, snapshotted by a connector of the committed spec in the default record
   format, Avro (Apicurio's AvroConverter, Confluent framing, writer schemas in the registry), into a
   pre-created 2-partition topic; then row updates (50k per transaction) until the topic holds
   `--records` (2,000,000) change records. The connector and its slot are dropped; the topic stays.
2. Backfill: each writer reads the whole topic from offset 0 into an index of its own, one after
   the other (`--backends`, default all three; Spark's in one `local[*]` session, each at the job's
   default batch size (`job.batch_cap`: on a local master the driver-written Tantivy index takes
   `--small-batch-rows` records a batch, OpenSearch, written from the executors, all available);
   the first Spark writer also pays the session's warm-up: JIT, Python workers):
   - `tantivy`: the products materializer, search view alone, the embedded index written from the driver;
   - `opensearch`: the same with `--search-backend opensearch`, written from the executors (bulk
     requests of `opensearch_bulk.CHUNK` documents, external versions);
   - `hand_written_loop`: what a user writes without Spark: a confluent-kafka consumer, the Confluent
     framing stripped, the writer schema fetched by id from the registry's ccompat API (once per id),
     `fastavro.schemaless_reader`, `opensearch-py`'s `helpers.bulk` per consumed batch (up to 500)
     at version = the change's position (LSN then a digit, as materializers/decode/positions.py), into an
     index OpenSearch creates on the first write (its default settings and dynamic mapping).
   After each: its live documents (must equal the table's rows); rows/s; the load averages; the
   OpenSearch process's CPU seconds and the machine's busy cores during the writer (where the time
   goes). Each index is deleted before the next writer starts (no merges left running behind it).
3. Latency: a `--latency-rows` products table captured by a latency-tuned Avro connector; per Spark
   backend, ONE driver started as a user would (`materializers start products --views search`, the
   backend chosen by MATERIALIZERS_SEARCH_BACKEND), and at each of `--rates` (2,000 rows/s) paced
   updates (`--latency-warmup` s, then `--latency-seconds` measured). A row counts as searchable when
   a search finds its new stamp: OpenSearch through `OpenSearchIndex.searchable` (refreshed
   documents only; the index's refresh interval is read from its settings), Tantivy from its index.
Targets: `opensearch` >= 2x the hand-written loop's rows/s; commit->searchable p99 <= 2,000 ms at
2,000 rows/s. Everything the run creates (tables, connectors, slots, publications, topics, registry
subjects, indices, the loop's consumer group, Redis keys, the Spark work dir) is named with the run id
and removed in `finally`, also on SIGTERM/Ctrl-C. On a shared 2-core machine the numbers are noisy:
read the ratios and the load averages.
"""

from __future__ import annotations

import argparse
import io
import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

import httpx
from confluent_kafka.admin import AdminClient

from bench.harness import results as bench_results
from bench.harness.probes import Phase, StackPids, pid_of, process_cpu_s, stack_environment
from bench.harness.stack import STACK_DIR
from bench.scenarios.cdc import BenchConfig, register
from bench.scenarios.cdc_formats import (
    Context,
    FormatsCleanup,
    Settings,
    _fmt,
    _verdict,
    create_topic,
    measure_snapshot,
    one_rate,
    reset_stamps,
    snapshot_spec,
    stream_updates,
)
from bench.scenarios.materializers import (
    Prober,
    _caught_up,
    _wait_until,
    backfill,
    captured_table,
    consumed,
    load_table,
    prober,
    start_job,
)
from cdc.connect_client import ConnectClient
from cdc.registry_client import ccompat_url
from kafkakit.clients import make_admin
from kafkakit.settings import Endpoints
from materializers import catalog
from materializers.config import ENV_OPENSEARCH_URL, ENV_SEARCH_BACKEND, RunConfig
from materializers.runtime.job import JobPlan
from materializers.spark import session as spark_session
from materializers.views.search.opensearch import OpenSearchIndex
from materializers.views.search.opensearch_bulk import CHUNK

log = logging.getLogger("bench.search_backends")

SPARK_BACKENDS = ("tantivy", "opensearch")  # run in this order: the two OpenSearch writers back to back
BACKENDS = (*SPARK_BACKENDS, "hand_written_loop")
COLUMNS = ("name", "description", "price", "stock")
RATIO_TARGET, P99_TARGET_MS, P99_TARGET_RATE = 2.0, 2000.0, 2000


# ---- configuration ----------------------------------------------------------------------------------
def parse(argv: Sequence[str] | None = None) -> tuple[Settings, tuple[str, ...], Path]:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rows", type=int, default=1_000_000, help="products table rows (1,000,000)")
    p.add_argument("--records", type=int, default=2_000_000, help="change records in the topic (2,000,000)")
    p.add_argument("--backends", default=",".join(BACKENDS), help=f"comma-separated of {', '.join(BACKENDS)}")
    p.add_argument("--rates", default="2000", help="latency rates, rows/s, comma-separated (2000)")
    p.add_argument("--latency-rows", type=int, default=20_000, help="latency table rows (20,000)")
    p.add_argument("--latency-warmup", type=float, default=30.0, help="seconds of load before measuring (30)")
    p.add_argument("--latency-seconds", type=float, default=60.0, help="measured seconds per rate (60)")
    p.add_argument("--trigger", default="500ms", help="the latency driver's trigger (500ms)")
    p.add_argument("--snapshot-timeout", type=float, default=1800.0, help="seconds for the snapshot")
    p.add_argument(
        "--partitions",
        type=int,
        default=2,
        help="partitions of the snapshot topic (2: the backfill reads it with two tasks)",
    )
    p.add_argument(
        "--out", type=Path, default=bench_results.RESULTS / "search_backends", help="the results' folder"
    )
    p.add_argument("--stack-dir", type=Path, default=STACK_DIR, help="the stack's pid files")
    a = p.parse_args(argv)
    backends = tuple(b for b in BACKENDS if b in {x.strip() for x in a.backends.split(",")})
    if not backends or len(backends) != len({x for x in a.backends.split(",") if x.strip()}):
        p.error(f"--backends {a.backends!r}: choose from {', '.join(BACKENDS)}")
    if a.records < a.rows:
        p.error(f"--records {a.records} must be >= --rows {a.rows}: the topic holds a snapshot read per row")
    settings = Settings(
        endpoints=Endpoints.from_env(),
        quick=False,
        rows=a.rows,
        records=a.records,
        latency_rows=a.latency_rows,
        rates=tuple(int(r) for r in a.rates.split(",") if r.strip()),
        latency_warmup_s=a.latency_warmup,
        latency_seconds=a.latency_seconds,
        trigger=a.trigger,
        formats=("avro",),
        partitions=a.partitions,
        backfill_rounds=1,  # each backend's backfill runs once (cdc_formats alternates its two jobs)
        snapshot_timeout_s=a.snapshot_timeout,
        out_dir=a.out,
        stack_dir=a.stack_dir,
    )
    return settings, backends, a.out


@dataclass
class SearchCleanup(FormatsCleanup):
    """cdc_formats' cleanup plus the run's OpenSearch indices and consumer groups (`<run_prefix>*`)."""

    opensearch_url: str = ""
    run_prefix: str = ""

    def all(self) -> None:
        super().all()
        self._step(
            f"delete indices {self.run_prefix}*",
            partial(delete_indices, self.opensearch_url, self.run_prefix),
        )
        self._step(
            f"delete consumer groups {self.run_prefix}*", partial(delete_groups, self.admin, self.run_prefix)
        )


def delete_indices(url: str, prefix: str) -> None:
    """By name: a cluster may refuse deletes by wildcard (`action.destructive_requires_name`)."""
    with httpx.Client(base_url=url, timeout=60) as http:
        found = http.get(
            f"/_cat/indices/{prefix}*", params={"format": "json", "h": "index"}
        ).raise_for_status()
        for name in (i["index"] for i in found.json()):
            http.delete(f"/{name}").raise_for_status()


def delete_groups(admin: AdminClient, prefix: str) -> None:
    listed = admin.list_consumer_groups().result(timeout=30).valid
    names = [g.group_id for g in listed if g.group_id.startswith(prefix)]
    for done in admin.delete_consumer_groups(names).values() if names else ():
        done.result(timeout=30)


@contextmanager
def bench_context(settings: Settings) -> Iterator[Context]:
    """A Context for one run; when the block ends, however it ends, what the run created is removed."""
    run_id, work = uuid.uuid4().hex[:6], Path(tempfile.mkdtemp(prefix="bench-search-"))
    cfg = BenchConfig(endpoints=settings.endpoints, stack_dir=settings.stack_dir)
    admin = make_admin({"bootstrap.servers": settings.endpoints.kafka_bootstrap_servers})
    with ConnectClient(settings.endpoints.kafka_connect_url) as connect:
        cleanup = SearchCleanup(
            cfg, connect, admin, registry_url=settings.endpoints.schema_registry_url,
            opensearch_url=RunConfig.from_env().opensearch_url, run_prefix=f"{prefix(run_id)}-",
        )  # fmt: skip
        try:
            pids = StackPids.discover(settings.stack_dir)
            yield Context(settings, run_id, work, catalog.lookup("products"), connect, pids, cleanup)
        finally:
            cleanup.all()
            shutil.rmtree(work, ignore_errors=True)


def prefix(run_id: str) -> str:
    """What this run's indices, Redis keys and latency table are named from."""
    return f"bench-search-{run_id}"


# ---- phase 1: the Avro topic ----------------------------------------------------------------------
def avro_topic(ctx: Context, table: str) -> tuple[str, dict[str, Any]]:
    """Snapshot `table` into a pre-created topic of `--partitions` (2), then stream updates up to `records`."""
    spec = snapshot_spec(ctx, "avro", table, "search")
    ctx.cleanup.specs.append(spec)
    topic = spec.topic_for(table)
    create_topic(ctx.bootstrap, topic, ctx.settings.partitions)
    log.info("snapshot of %d rows into %s", ctx.settings.rows, topic)
    snapshot = measure_snapshot(ctx, spec, topic)
    log.info("streaming %d updates", ctx.settings.records - ctx.settings.rows)
    updates = stream_updates(ctx, table, {"avro": spec})
    ctx.cleanup.release(spec)
    kept = ("rows", "seconds", "rows_per_s", "bytes_per_record", "connector")
    return topic, {"topic": topic, "snapshot": {k: snapshot[k] for k in kept}, "updates": updates}


# ---- phase 2: backfill ----------------------------------------------------------------------------
def measured(ctx: Context, write: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """`write()` and, around it, the load averages, the machine's busy cores and OpenSearch's CPU."""
    rows = ctx.settings.records
    search_pid = pid_of(ctx.settings.stack_dir, "opensearch", "toolkit.service=opensearch")
    phase, cpu_before = Phase(ctx.pids), process_cpu_s(search_pid)
    with phase.measure():
        out = write()
    search_cpu, seen = process_cpu_s(search_pid) - cpu_before, phase.as_json(rows)
    return {
        **out,
        "opensearch_cpu_s": round(search_cpu, 2),
        "opensearch_cpu_us_per_row": round(1e6 * search_cpu / rows, 1),
        "opensearch_cores": round(search_cpu / seen["wall_s"], 2),
        "kafka_cpu_s": seen["cpu_s"].get("kafka"),
        "machine_busy_cores": seen["machine_busy_cores"],
        "load_before": phase.load_before,
        "load_after": phase.load_after,
    }


def spark_plan(ctx: Context, topic: str, backend: str) -> JobPlan:
    """The products materializer on the Avro topic (registry from the env, as cdc_formats' backfill),
    the search view alone on `backend`."""
    config = replace(
        ctx.base(backend), topic=topic, views=("search",), search_backend=backend,
        redis_prefix=f"{prefix(ctx.run_id)}-{backend}",
    )  # fmt: skip
    return JobPlan.of(ctx.products, config)


def opensearch_facts(index: OpenSearchIndex, live: Mapping[str, Any]) -> dict[str, Any]:
    """The index's documents matching `live` once refreshed, and its refresh interval."""
    index.refresh()
    found = index.client().count(index=index.index, body={"query": live})["count"]
    return {"documents": int(found), "refresh_interval": refresh_interval(index)}


def index_facts(plan: JobPlan) -> dict[str, Any]:
    """Live (not deleted) documents of the plan's search index, whichever backend holds it."""
    import tantivy

    remote, local = plan.opensearch(), plan.search()
    if remote is not None:
        return opensearch_facts(remote, {"term": {"deleted": False}})
    assert local is not None
    index = local.index()
    index.reload()
    query = tantivy.Query.term_query(index.schema, "live", "true")
    return {"documents": int(index.searcher().search(query, 1, count=True).count or 0)}


def drop_index(plan: JobPlan) -> None:
    remote = plan.opensearch()
    if remote is not None:
        remote.drop()
    shutil.rmtree(plan.config.home, ignore_errors=True)


def spark_backfills(ctx: Context, topic: str, backends: Sequence[str]) -> dict[str, dict[str, Any]]:
    # the JIT `materializers start` picks for a driver this far behind (MATERIALIZERS_DRIVER_JIT)
    jit = spark_session.driver_jit(backlog=ctx.settings.records)
    spark = spark_session.build(RunConfig.from_env().master, "bench-search-backends", jit=jit)
    out: dict[str, dict[str, Any]] = {}
    try:
        for backend in backends:
            plan = spark_plan(ctx, topic, backend)
            log.info("backfill -> %s", backend)
            out[backend] = measured(ctx, partial(backfill, spark, plan, ctx.settings.records))
            out[backend] |= index_facts(plan)
            log.info("  %s rows/s, %s documents", out[backend]["rows_per_s"], out[backend]["documents"])
            drop_index(plan)
    finally:  # on SIGTERM/Ctrl-C too, when the session may be half gone: never mask the first error
        with suppress(Exception):
            spark.stop()
    return out


def hand_written_loop(config: RunConfig, topic: str, records: int, index: str) -> dict[str, Any]:
    """The job a user writes without Spark (module docstring, phase 2)."""
    import fastavro
    from opensearchpy import OpenSearch, helpers

    client = OpenSearch(hosts=[config.opensearch_url], timeout=60)
    registry, schemas = ccompat_url(config.endpoints.schema_registry_url), {}

    def decode(value: bytes) -> Any:
        assert value[0] == 0, "not Confluent-framed"
        schema_id = int.from_bytes(value[1:5], "big")
        if schema_id not in schemas:
            reply = httpx.get(f"{registry}/schemas/ids/{schema_id}", timeout=10).raise_for_status()
            schemas[schema_id] = fastavro.parse_schema(json.loads(reply.json()["schema"]))
        return fastavro.schemaless_reader(io.BytesIO(value[5:]), schemas[schema_id])

    def action(change: dict[str, Any]) -> dict[str, Any]:
        row = change["after"] or change["before"]
        meta = {"_index": index, "_id": str(row["id"]), "version_type": "external",
                "version": change["source"]["lsn"] * 10 + (change["op"] != "r")}  # fmt: skip
        if change["op"] == "d":
            return {**meta, "_op_type": "delete"}
        return {**meta, "_source": {k: str(row[k]) for k in COLUMNS if row[k] is not None}}

    began, failed = time.monotonic(), 0
    for msgs in consumed(config, topic, records, group=index):
        _, errors = helpers.bulk(
            client, [action(decode(m.value())) for m in msgs], stats_only=True, raise_on_error=False
        )
        failed += errors
    seconds = time.monotonic() - began
    return {"seconds": round(seconds, 2), "rows_per_s": round(records / seconds), "failed_actions": failed}


def loop_backfill(ctx: Context, topic: str) -> dict[str, Any]:
    config, index = ctx.base("loop"), f"{prefix(ctx.run_id)}-loop"  # also its consumer group
    log.info("backfill -> hand_written_loop")
    out = measured(ctx, partial(hand_written_loop, config, topic, ctx.settings.records, index))
    written = OpenSearchIndex(
        url=config.opensearch_url, alias=index, index=index, search_fields=(), data_columns=()
    )
    out |= opensearch_facts(written, {"match_all": {}})  # a deleted row's document is gone
    log.info("  %s rows/s, %s documents", out["rows_per_s"], out["documents"])
    written.drop()
    return out


def backfills(ctx: Context, topic: str, backends: Sequence[str]) -> dict[str, Any]:
    out: dict[str, Any] = {
        "records": ctx.settings.records,
        "bulk_documents_per_request": CHUNK,
    }
    out |= spark_backfills(ctx, topic, [b for b in SPARK_BACKENDS if b in backends])
    if "hand_written_loop" in backends:
        out["hand_written_loop"] = loop_backfill(ctx, topic)
    for writer in (b for b in BACKENDS if b in out):
        out[writer]["documents_match_rows"] = out[writer]["documents"] == ctx.settings.rows
    return out


# ---- phase 3: commit -> searchable latency ---------------------------------------------------------
def searchable_stamps(index: OpenSearchIndex) -> Callable[[list[int]], dict[int, int]]:
    """Each entity's stamp as a search finds it now (refreshed), parsed from "Product N rev S"."""

    def read(entities: list[int]) -> dict[int, int]:
        found = index.searchable([str(e) for e in entities])
        return {
            int(e): int(doc["name"].rsplit(" ", 1)[-1]) if " rev " in doc.get("name", "") else 0
            for e, doc in found.items()
        }

    return read


def search_prober(plan: JobPlan) -> Prober:
    remote = plan.opensearch()
    return prober("search", plan) if remote is None else Prober("search", 0.25, searchable_stamps(remote))


def refresh_interval(index: OpenSearchIndex) -> dict[str, Any]:
    """The index's refresh interval and whether the index sets it (else OpenSearch's default)."""
    reply = index.client().indices.get_settings(
        index=index.alias, name="index.refresh_interval", include_defaults=True
    )
    found = next(iter(reply.values()))
    own = found.get("settings", {}).get("index", {}).get("refresh_interval")
    return {"value": own or found["defaults"]["index"]["refresh_interval"], "set_on_index": own is not None}


def at_rate(
    ctx: Context, plan: JobPlan, table: str, rate: int, proc: subprocess.Popen[bytes]
) -> dict[str, Any]:
    """cdc_formats' measurement at `rate`, of the search view alone, its numbers at the top level."""
    probe = search_prober(plan)
    measured = one_rate(ctx, plan, table, rate, proc, [probe])
    return {**{k: v for k, v in measured.items() if k != probe.name}, **measured[probe.name]}


def one_driver(ctx: Context, topic: str, table: str, backend: str) -> dict[str, Any]:
    """A `materializers start` driver keeping the search view on `backend`, measured at each rate."""
    s = ctx.settings
    redis_prefix = f"{prefix(ctx.run_id)}-lat-{backend}"
    ctx.cleanup.redis_prefixes.append(redis_prefix)
    config = replace(
        ctx.base(f"latency-{backend}"), topic=topic, table=table, redis_prefix=redis_prefix,
        views=("search",), search_backend=backend,
    )  # fmt: skip
    plan = JobPlan.of(ctx.products, config)
    env = {**s.endpoints.as_env(), ENV_SEARCH_BACKEND: backend, ENV_OPENSEARCH_URL: config.opensearch_url}
    proc = start_job(plan, s.trigger, ctx.work / f"latency-{backend}.log", env)
    out: dict[str, Any] = {"rates": []}
    try:
        for rate in s.rates:
            reset_stamps(s.endpoints.pg_dsn, table)  # stamps restart at 1 with every writer
            time.sleep(2)  # the reset's changes reach the topic, then the driver applies them
            _wait_until(partial(_caught_up, plan), 600, proc, f"the {backend} latency driver never caught up")
            log.info("latency: %s at %d rows/s", backend, rate)
            out["rates"].append(at_rate(ctx, plan, table, rate, proc))  # raises if the driver exited
        remote = plan.opensearch()
        out["refresh_interval"] = None if remote is None else refresh_interval(remote)
    finally:
        stop(proc)
    return out


def stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(90)
    except subprocess.TimeoutExpired:
        proc.kill()


def latencies(ctx: Context, backends: Sequence[str]) -> dict[str, Any]:
    s, schema = ctx.settings, f"bench_search_lat_{ctx.run_id}"
    ctx.cleanup.schemas.append(schema)
    table, spec = captured_table(ctx.base("latency"), schema, s.latency_rows, "avro")
    ctx.cleanup.specs.append(spec)
    ctx.cleanup.topic_prefixes.append(spec.topic_prefix + ".")  # its registry subjects, at the end
    register(ctx.connect, spec)
    ctx.connect.wait_running(spec.name, timeout=120)
    ctx.connect.wait_snapshot_complete(spec.name, timeout=300)
    out: dict[str, Any] = {"table_rows": s.latency_rows, "trigger": s.trigger}
    for backend in backends:
        out[backend] = one_driver(ctx, spec.topic_for(table), table, backend)
    return out


# ---- the run ----------------------------------------------------------------------------------------
def phases(ctx: Context, backends: Sequence[str], results: dict[str, Any]) -> None:
    schema = f"bench_search_{ctx.run_id}"
    ctx.cleanup.schemas.append(schema)
    log.info("loading %d rows into %s.products", ctx.settings.rows, schema)
    table = load_table(ctx.settings.endpoints.pg_dsn, schema, ctx.settings.rows)
    topic, results["records"] = avro_topic(ctx, table)
    results["backfill"] = backfills(ctx, topic, backends)
    with_drivers = [b for b in SPARK_BACKENDS if b in backends]
    results["latency"] = latencies(ctx, with_drivers) if with_drivers else {}


def run(settings: Settings, backends: tuple[str, ...]) -> dict[str, Any]:
    began = time.monotonic()
    results: dict[str, Any] = {
        "started_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "settings": {"rows": settings.rows, "records": settings.records, "backends": backends,
                     "rates": settings.rates, "latency_rows": settings.latency_rows, "trigger": settings.trigger,
                     "latency_warmup_s": settings.latency_warmup_s, "latency_seconds": settings.latency_seconds,
                     "master": RunConfig.from_env().master, "format": "avro"},
        "environment": {**stack_environment(settings.endpoints, StackPids.discover(settings.stack_dir)),
                        "driver_jit": spark_session.driver_jit(backlog=settings.records)},
    }  # fmt: skip
    try:
        with bench_context(settings) as ctx:
            results["run_id"], results["cleanup"] = ctx.run_id, ctx.cleanup.log  # filled as it cleans up
            phases(ctx, backends, results)
    except (Exception, KeyboardInterrupt, SystemExit) as exc:
        results["error"] = f"{type(exc).__name__}: {exc}"
        log.exception("run failed")
    results["loadavg_end"] = tuple(round(x, 2) for x in os.getloadavg())
    results["duration_s"] = round(time.monotonic() - began, 1)
    derive(results)
    return results


# ---- report -------------------------------------------------------------------------------------------
def p99_at(latency: Mapping[str, Any], backend: str, rate: int) -> float | None:
    runs = (latency.get(backend) or {}).get("rates", ())
    return next((r.get("p99") for r in runs if r["target_rows_per_s"] == rate), None)


def derive(results: dict[str, Any]) -> None:
    """The ratio opensearch / hand-written loop and the verdicts (pure over the measured numbers)."""
    b, lat = results.get("backfill") or {}, results.get("latency") or {}
    ratio = (
        round(b["opensearch"]["rows_per_s"] / b["hand_written_loop"]["rows_per_s"], 2)
        if "opensearch" in b and "hand_written_loop" in b
        else None
    )
    p99 = {backend: p99_at(lat, backend, P99_TARGET_RATE) for backend in SPARK_BACKENDS if backend in lat}
    results["opensearch_vs_hand_written"] = ratio
    results["targets"] = {
        "backfill_2x_hand_written": None if ratio is None else ratio >= RATIO_TARGET,
        "p99_2s_at_2k": {k: None if v is None else v <= P99_TARGET_MS for k, v in p99.items()},
        "documents_match_rows": {w: b[w]["documents_match_rows"] for w in BACKENDS if w in b},
    }


def table(header: Sequence[str], rows: Iterable[Sequence[Any]]) -> list[str]:
    """A markdown table, numbers right-aligned; then a blank line."""
    rows = [[_fmt(v) for v in row] for row in rows]
    lines = [f"| {' | '.join(header)} |", "|---|" + "---:|" * (len(header) - 1)]
    return [*lines, *(f"| {' | '.join(row)} |" for row in rows), ""]


def _interval(facts: Mapping[str, Any] | None) -> str:
    if not facts:
        return "-"
    return f"{facts['value']} ({'set on the index' if facts['set_on_index'] else 'OpenSearch default'})"


def _records_section(res: Mapping[str, Any]) -> list[str]:
    r = res.get("records")
    if not r:
        return []
    snap, up = r["snapshot"], r["updates"]
    header = ("table rows", "change records", "snapshot rows/s", "bytes per record (key + value)", "updates",
              "updates streamed, s")  # fmt: skip
    row = (snap["rows"], res["settings"]["records"], snap["rows_per_s"], snap["bytes_per_record"]["total"],
           up["updates"], up["all_streamed_s"])  # fmt: skip
    return ["## Records", "", *table(header, [row])]


BACKFILL_COLUMNS = {
    "rows/s": "rows_per_s",
    "seconds": "seconds",
    "Spark batches": "batches",
    "live documents": "documents",
    "= table rows": "documents_match_rows",
    "OpenSearch CPU s": "opensearch_cpu_s",
    "OpenSearch µs CPU/row": "opensearch_cpu_us_per_row",
    "OpenSearch cores": "opensearch_cores",
    "machine busy cores": "machine_busy_cores",
}


def _backfill_section(res: Mapping[str, Any]) -> list[str]:
    b = res.get("backfill")
    if not b:
        return []
    header = ("writer", *BACKFILL_COLUMNS, "load (1 min) before → after", "refresh interval")
    rows = [
        (w, *(b[w].get(k, "-") for k in BACKFILL_COLUMNS.values()),
         f"{b[w]['load_before'][0]} → {b[w]['load_after'][0]}", _interval(b[w].get("refresh_interval")))
        for w in BACKENDS if w in b
    ]  # fmt: skip
    met = res.get("targets", {}).get("backfill_2x_hand_written")
    return [
        "## Backfill: each writer from offset 0, one after the other", "", *table(header, rows),
        f"OpenSearch from the executors / the hand-written `helpers.bulk` loop: "
        f"**{_fmt(res.get('opensearch_vs_hand_written'))}x**; target at least {RATIO_TARGET:g}x: "
        f"**{_verdict(met)}**. Spark at the job's default batch sizes (batches: the table); bulk requests of "
        f"{b['bulk_documents_per_request']:,} documents from the view, one consumed batch (up to 500 records) "
        "from the loop.", "",
    ]  # fmt: skip


LATENCY_COLUMNS = ("p50", "p95", "p99", "max", "count", "unseen_at_end")


def _latency_section(res: Mapping[str, Any]) -> list[str]:
    lat, s = res.get("latency"), res["settings"]
    if not lat:
        return []
    header = ("backend", "target rows/s", "achieved", "p50 ms", "p95 ms", "p99 ms", "max ms", "rows measured",
              "unseen at the end", "refresh interval", "batch median ms")  # fmt: skip
    rows = [
        (backend, r["target_rows_per_s"], r["achieved_rows_per_s"], *(r.get(k) for k in LATENCY_COLUMNS),
         _interval(lat[backend].get("refresh_interval")), r["batch_median_ms"].get("total"))
        for backend in SPARK_BACKENDS if backend in lat for r in lat[backend]["rates"]
    ]  # fmt: skip
    met = res.get("targets", {}).get("p99_2s_at_2k", {})
    verdicts = ", ".join(f"{k} **{_verdict(v)}**" for k, v in met.items())
    return [
        "## Commit→searchable latency", "",
        f"One driver per backend (`materializers start products --views search`, trigger {lat['trigger']}) on a "
        f"{lat['table_rows']:,}-row table captured by a latency-tuned Avro connector; {s['latency_warmup_s']:g} s "
        f"of load, then {s['latency_seconds']:g} s measured per rate. A row counts once a search finds its new "
        "value (OpenSearch: refreshed documents only).", "",
        *table(header, rows),
        f"Target p99 <= {P99_TARGET_MS:,.0f} ms at {P99_TARGET_RATE:,} rows/s: {verdicts}.", "",
    ]  # fmt: skip


def where_the_time_goes(res: Mapping[str, Any]) -> list[str]:
    b = res.get("backfill") or {}
    notes = []
    for w in (w for w in BACKENDS if w in b):
        r = b[w]
        rest = round(r["machine_busy_cores"] - r["opensearch_cores"], 2)
        notes.append(
            f"- {w}: {r['seconds']} s wall, the machine {r['machine_busy_cores']} cores busy: OpenSearch "
            f"{r['opensearch_cores']} ({r['opensearch_cpu_us_per_row']} µs CPU per row), everything else "
            f"{rest} (the writer itself, Kafka {_fmt(r['kafka_cpu_s'])} s CPU, other processes)"
        )
    why = ("OpenSearch's CPU is its whole process's: another user of the cluster counts too (`tantivy`, "
           "when run, writes nothing there and shows how much).")  # fmt: skip
    return ["## Where the time goes", "", why, "", *notes, ""] if notes else []


def render_markdown(res: Mapping[str, Any]) -> str:
    s, env = res["settings"], res["environment"]
    lines = [
        "# Search backends: a backfill of real Debezium Avro changes, and commit→searchable latency (issue 21)",
        "",
        f"Run `{res.get('run_id')}` at {res['started_at']} ({res['duration_s']} s): a {s['rows']:,}-row products "
        f"table, {s['records']:,} change records (Avro, Confluent framing, writer schemas in Apicurio) on 2 "
        f"partitions; Spark `{s['master']}`, the backfills' driver JIT `{env.get('driver_jit', 'quick')}` (what `materializers start` "
        f"picks for a driver that far behind); {env['cpus']} cores shared by the stack, Spark and the bench; load "
        f"average {env['loadavg_start']} → {res['loadavg_end']}. Read the ratios; re-run before drawing conclusions.",
        "",
        *_records_section(res),
        *_backfill_section(res),
        *_latency_section(res),
        *where_the_time_goes(res),
    ]
    if res.get("error"):
        lines += [f"**Run failed:** {res['error']}", ""]
    return "\n".join(
        [*lines, "Per-batch seconds, driver memory, connector config, cleanup log: the JSON file.", ""]
    )


def main(argv: Sequence[str] | None = None) -> int:
    run_start = bench_results.Began()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    for noisy in ("httpx", "py4j", "opensearch"):  # a line per request drowns the progress
        logging.getLogger(noisy).setLevel(logging.WARNING)
    settings, backends, out = parse(argv)
    # SIGTERM -> SystemExit in the main thread: `finally` still removes what the run created.
    signal.signal(signal.SIGTERM, lambda signum, _frame: sys.exit(128 + signum))
    results = run(settings, backends)
    bench_results.write(out, results, render_markdown(results), began=run_start)
    print(render_markdown(results))
    matched = all(results["targets"]["documents_match_rows"].values())
    return 1 if results.get("error") or not matched else 0


if __name__ == "__main__":
    sys.exit(main())
