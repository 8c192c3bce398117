"""Benchmark (not a test): Debezium CDC throughput and latency on the real stack.

Postgres 15 -> Debezium Postgres connector in Kafka Connect -> Kafka, measured from Python with
confluent-kafka. Run `python -m bench run cdc [--size quick]`; it writes bench/results/cdc/latest.json
(everything) and latest.md (a summary) through the harness's writer (`--out` names another folder).

Variants (`VARIANTS`): `default` = the committed `ConnectorSpec.to_config()`, i.e. Debezium/Connect
batching defaults (the baseline, shorter latency runs); `tuned` = default + `_TUNED` (the candidate,
full runs); `tuned-noschema` = tuned without converter schemas (diagnostic, snapshot only: it prices
the JSON schema envelope, which `cdc.change_event` needs, so it is not deployable as is).
Per variant, each with its own connector so a slow snapshot cannot block the latency runs:
1. Initial snapshot: one table of N rows (1,000,000) loaded with generate_series; the clock starts
   just before the connector is registered and stops at the broker append time of the N-th record.
   The count is the topic's high watermark (`--snapshot-count consume` reads every record instead,
   at ~40 us of this process's CPU per 5 KB record); the first and last records are read back and
   decoded with `cdc.change_event` (Debezium's `last` marker, schema share of the bytes).
2. Streaming latency at steady rates on a `no_data` connector: an unmeasured warm-up, then a paced
   writer commits rate/100 rows every 10 ms; each event's commit time is Debezium's `source.ts_us`
   (the Postgres commit timestamp); the consumer stamps arrival. commit->consumer is the headline,
   split into commit->Debezium event (`payload.ts_us`), event->broker append, append->consumer.

Assumptions and choices (all recorded in the JSON):
- Table topics are pre-created by the bench with 1 partition, `message.timestamp.type=LogAppendTime`
  (a record's timestamp is its arrival in Kafka, independent of how fast Python consumes) and
  `cleanup.policy=delete` (the spec's `compact` would start the log cleaner on ~GBs mid-run).
- Heartbeats are off (no idle periods here; they would only add a topic and a shared-table row).
- The writer sets `synchronous_commit=on` for its own session (the stack's own setting too since
  2026-11-29; before, the server ran with `off` and a 200 ms wal_writer_delay, and a logical walsender
  only ships flushed WAL, so async commits added the WAL writer's delay to every latency sample).
  `--synchronous-commit server` keeps the server's.
- CPU per process (Connect per thread group, Kafka, Postgres, this process) and the whole machine's
  busy time are read from /proc around each phase: other engineers share the two cores, so every
  phase says how much CPU others took, and what the measured CPU per row would allow on idle cores.
Every table, connector, slot, publication and topic is named with a run id and removed in `finally`.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from contextlib import suppress
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any, Literal

import httpx
import psycopg
from confluent_kafka import TIMESTAMP_LOG_APPEND_TIME, Consumer, KafkaException, Message, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]
from psycopg import sql

from bench.harness import results as bench_results
from bench.harness.percentiles import percentile, summarize_ms
from bench.harness.probes import Phase, StackPids, stack_environment
from bench.harness.stack import STACK_DIR
from cdc.change_event import decode_record
from cdc.connect_client import ConnectClient
from cdc.connector_spec import ConnectorSpec, DatabaseSpec, HeartbeatSpec, TopicSpec
from cdc.errors import ConnectorConfigInvalid, ConnectorFailed, ConnectorNotFound
from cdc.preflight import run_preflight
from cdc.slots import drop_slot
from kafkakit.clients import make_admin, make_consumer
from kafkakit.errors import ConfigError, ToolkitError
from kafkakit.logs import configure_cli_logging
from kafkakit.settings import Endpoints

log = logging.getLogger("bench.cdc")

SNAPSHOT_TARGET_ROWS_PER_S = 50_000
LATENCY_TARGET_P99_MS = 500.0
_PAD = "x" * 64

# The throughput/latency knobs tried on top of the committed spec. Why each:
_TUNED = {
    # Debezium's ChangeEventQueue.poll() returns only when max.batch.size records are queued or
    # poll.interval.ms has passed: with 500 ms / 2048, a 5k rows/s stream waits ~400 ms per batch.
    "poll.interval.ms": "25",
    # Bigger batches and queue for the snapshot: the reader blocks less often on a full queue.
    "max.batch.size": "8192",
    "max.queue.size": "32768",
    "snapshot.fetch.size": "20000",
    # Debezium 3.6 splits one table into PK chunks read by this many threads.
    "snapshot.max.threads": "2",
    # Producer: fewer, larger, compressed requests (JSON-with-schema records repeat the schema).
    "producer.override.linger.ms": "10",
    "producer.override.batch.size": "524288",
    "producer.override.compression.type": "lz4",
}
_NO_SCHEMAS = {"key.converter.schemas.enable": "false", "value.converter.schemas.enable": "false"}


@dataclass(frozen=True, slots=True, kw_only=True)
class Variant:
    name: str
    extra: Mapping[str, str]
    note: str
    # candidate: full latency runs; baseline: shorter latency runs (the comparison); diagnostic:
    # snapshot only. Keeps a full default run near six minutes.
    role: Literal["candidate", "baseline", "diagnostic"]
    # topics.oversize: "fail" leaves the OversizeRouter transform out (prices its per-record walk).
    oversize: str = "route"


VARIANTS: dict[str, Variant] = {
    v.name: v
    for v in (
        Variant(
            name="default",
            extra={},
            note="ConnectorSpec as committed; Debezium/Connect batching defaults",
            role="baseline",
        ),
        Variant(
            name="tuned",
            extra=_TUNED,
            note="default + batching, poll interval and producer overrides",
            role="candidate",
        ),
        Variant(
            name="default-no-router",
            extra={},
            note="default without the OversizeRouter transform (topics.oversize: fail): its cost",
            role="baseline",
            oversize="fail",
        ),
        Variant(
            name="tuned-noschema",
            extra={**_TUNED, **_NO_SCHEMAS},
            note="diagnostic only: JsonConverter without schemas (cdc.change_event needs them)",
            role="diagnostic",
        ),
    )
}


# ---- configuration ------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True, kw_only=True)
class BenchConfig:
    endpoints: Endpoints
    quick: bool = False
    snapshot_rows: int = 1_000_000
    rates: tuple[int, ...] = (5_000, 10_000)
    rate_seconds: float = 60.0
    baseline_rate_seconds: float = 10.0
    warmup_seconds: float = 5.0
    tick_ms: int = 10
    variants: tuple[str, ...] = ("default", "tuned")
    synchronous_commit: str = "on"
    snapshot_count: str = "offsets"
    drain_timeout_s: float = 15.0
    snapshot_timeout_s: float = 180.0  # the candidate's; others stop at baseline_snapshot_timeout_s
    baseline_snapshot_timeout_s: float = 60.0
    out_dir: Path = bench_results.RESULTS / "cdc"
    stack_dir: Path = STACK_DIR

    @classmethod
    def from_args(cls, argv: Sequence[str] | None = None) -> BenchConfig:
        p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
        p.add_argument("--quick", action="store_true", help="10 s per rate instead of 60 s")
        p.add_argument("--rows", type=int, default=None, help="snapshot table rows (default 1,000,000)")
        p.add_argument("--rates", default="5000,10000", help="comma-separated rows/s (default 5000,10000)")
        p.add_argument("--rate-seconds", type=float, default=None, help="seconds per rate (60; --quick 10)")
        p.add_argument(
            "--variants",
            default="default,tuned",
            help=f"comma-separated of {', '.join(VARIANTS)}",
        )
        p.add_argument(
            "--warmup-seconds", type=float, default=None, help="unmeasured streaming (10; --quick 3)"
        )
        p.add_argument(
            "--baseline-seconds", type=float, default=None, help="per rate, baseline (20; quick 5)"
        )
        p.add_argument(
            "--snapshot-count",
            choices=("offsets", "consume"),
            default="offsets",
            help="offsets: poll the high watermark (default); consume: read every record in Python",
        )
        p.add_argument(
            "--snapshot-timeout",
            type=float,
            default=180.0,
            help="candidate variant: seconds, then a partial result",
        )
        p.add_argument(
            "--baseline-snapshot-timeout",
            type=float,
            default=60.0,
            help="other variants: seconds (partial rate)",
        )
        p.add_argument("--synchronous-commit", choices=("on", "off", "server"), default="on")
        p.add_argument("--out", type=Path, default=None, help="the results' folder (bench/results/cdc)")
        p.add_argument("--stack-dir", type=Path, default=None, help="where the stack's pid files are")
        p.add_argument("--bootstrap-servers", default=None)
        p.add_argument("--connect-url", default=None)
        p.add_argument("--pg-dsn", default=None)
        a = p.parse_args(argv)
        variants = tuple(v.strip() for v in a.variants.split(",") if v.strip())
        unknown = [v for v in variants if v not in VARIANTS]
        if unknown or not variants:
            raise ConfigError(
                f"--variants {a.variants!r}: unknown {unknown}; choose from {', '.join(VARIANTS)}"
            )
        try:
            rates = tuple(int(r) for r in a.rates.split(","))
        except ValueError as exc:
            raise ConfigError(
                f"--rates {a.rates!r} must be comma-separated integers like 5000,10000"
            ) from exc
        if any(r < 100 for r in rates) or (a.rows is not None and a.rows < 1):
            raise ConfigError("--rates must each be >= 100 rows/s and --rows >= 1")
        endpoints = Endpoints.from_env().with_overrides(
            kafka_bootstrap_servers=a.bootstrap_servers, kafka_connect_url=a.connect_url, pg_dsn=a.pg_dsn
        )
        defaults = cls(endpoints=endpoints)
        return cls(
            endpoints=endpoints,
            quick=a.quick,
            snapshot_rows=a.rows or defaults.snapshot_rows,
            rates=rates,
            rate_seconds=a.rate_seconds or (10.0 if a.quick else 60.0),
            baseline_rate_seconds=a.baseline_seconds or (5.0 if a.quick else 10.0),
            warmup_seconds=a.warmup_seconds if a.warmup_seconds is not None else (3.0 if a.quick else 5.0),
            variants=variants,
            synchronous_commit=a.synchronous_commit,
            snapshot_timeout_s=a.snapshot_timeout,
            baseline_snapshot_timeout_s=a.baseline_snapshot_timeout,
            snapshot_count=a.snapshot_count,
            out_dir=a.out or defaults.out_dir,
            stack_dir=a.stack_dir or defaults.stack_dir,
        )


def tick_plan(rate: int, tick_ms: int) -> tuple[int, float]:
    """Rows per transaction and the interval between commits that together give `rate` rows/s."""
    rows = max(1, round(rate * tick_ms / 1000))
    return rows, rows / rate


@dataclass(frozen=True, slots=True)
class StreamedRow:
    row_id: int
    commit_us: int  # Postgres commit timestamp (Debezium source.ts_us)
    emitted_us: int  # when Debezium built the event (payload.ts_us)


_PAYLOAD_KEY = b',"payload":'


def parse_streamed(value: bytes) -> StreamedRow:
    """The timing fields of one streamed insert (JSON with or without the schema envelope).

    JsonConverter writes `{"schema":...,"payload":...}` in that order and the schema is ~90% of the
    bytes, so only the payload is parsed: parsing all of it cost this process ~40% of a core at
    10k rows/s, CPU the pipeline under test then lacked.
    """
    cut = value.find(_PAYLOAD_KEY) if value.startswith(b'{"schema":') else -1
    try:
        payload = json.loads(value[cut + len(_PAYLOAD_KEY) : -1]) if cut >= 0 else None
    except json.JSONDecodeError:
        payload = None  # a schema that happens to contain the marker: parse it all
    if payload is None:
        doc = json.loads(value)
        payload = doc["payload"] if "schema" in doc and "payload" in doc else doc
    return StreamedRow(
        row_id=int(payload["after"]["id"]),
        commit_us=int(payload["source"]["ts_us"]),
        emitted_us=int(payload["ts_us"]),
    )


def variant_spec(
    run_id: str, variant: Variant, purpose: Literal["snap", "lat"], pg_dsn: str, table: str
) -> ConnectorSpec:
    """One connector per variant and purpose: the snapshot and the latency runs never share a task."""
    name = f"bench-cdc-{run_id}-{variant.name}-{purpose}"
    return ConnectorSpec(
        name=name,
        database=DatabaseSpec.from_dsn(pg_dsn),
        topic_prefix=name.replace("-", "_"),
        tables=(f"public.{table}",),
        # The latency table is empty at start: no snapshot, stream at once.
        snapshot_mode="initial" if purpose == "snap" else "no_data",
        heartbeat=HeartbeatSpec(enabled=False),
        topics=TopicSpec(oversize=variant.oversize),
        # This bench compares batching settings on JSON records (its decoder reads their inline
        # schemas); the formats are compared in cdc_formats.py.
        format="json",
        extra=dict(variant.extra),
    )


def redacted(config: Mapping[str, str]) -> dict[str, str]:
    return {k: ("***" if "password" in k else v) for k, v in sorted(config.items())}


# ---- Kafka / Postgres / Connect shell ---------------------------------------------------------------
def _consumer(bootstrap: str, topic: str) -> Consumer:
    c = make_consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"bench-cdc-{uuid.uuid4().hex[:8]}",  # never committed: we assign()
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 50,
            "fetch.max.bytes": 64 * 1024 * 1024,
            "max.partition.fetch.bytes": 16 * 1024 * 1024,
        }
    )
    c.assign([TopicPartition(topic, 0, -2)])  # -2 = beginning; topics have one partition
    return c


def _ok(msg: Message) -> bool:
    err = msg.error()
    if err is None:
        return True
    if err.retriable() or "UNKNOWN_TOPIC" in str(err):
        return False
    raise KafkaException(err)


def topic_bytes_on_disk(stack_dir: Path, topic: str) -> int | None:
    """Size of the topic's log segments in the local broker's log.dirs (shows the producer compression)."""
    with suppress(OSError, StopIteration):
        props = (stack_dir / "kafka" / "server.properties").read_text().splitlines()
        log_dirs = next(line.split("=", 1)[1] for line in props if line.startswith("log.dirs="))
        return sum(f.stat().st_size for d in log_dirs.split(",") for f in Path(d, f"{topic}-0").glob("*.log"))
    return None


def create_topics(admin: AdminClient, names: Sequence[str]) -> None:
    config = {"message.timestamp.type": "LogAppendTime", "cleanup.policy": "delete"}
    futures = admin.create_topics(
        [NewTopic(n, num_partitions=1, replication_factor=1, config=config) for n in names]
    )
    for f in futures.values():
        f.result(timeout=30)


def delete_topics(admin: AdminClient, prefix: str) -> list[str]:
    names = [t for t in admin.list_topics(timeout=15).topics if t.startswith(prefix)]
    if names:
        for f in admin.delete_topics(names, operation_timeout=30).values():
            with suppress(KafkaException):
                f.result(timeout=30)
    return names


def load_snapshot_table(pg_dsn: str, table: str, rows: int) -> float:
    """Create and fill `table` (key added after the load, the fast way); return seconds taken."""
    t0 = time.monotonic()
    ident = sql.Identifier("public", table)
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(
            sql.SQL(
                "CREATE TABLE {} (id bigint NOT NULL, customer text NOT NULL, amount numeric(12,2) NOT NULL, "
                "qty integer NOT NULL, created_at timestamptz NOT NULL)"
            ).format(ident)
        )
        conn.execute(
            sql.SQL(
                "INSERT INTO {} SELECT g, 'customer-' || (g %% 10000), (g %% 100000) / 100.0, g %% 7 + 1, "
                "now() - make_interval(secs => g %% 86400) FROM generate_series(1, %s::bigint) AS g"
            ).format(ident),
            (rows,),
        )
        conn.execute(sql.SQL("ALTER TABLE {} ADD PRIMARY KEY (id)").format(ident))
        conn.execute(sql.SQL("ANALYZE {}").format(ident))
    return time.monotonic() - t0


def create_latency_table(pg_dsn: str, table: str) -> None:
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(
            sql.SQL(
                "CREATE TABLE {} (id bigint PRIMARY KEY, pad text NOT NULL, "
                "written_at timestamptz NOT NULL DEFAULT clock_timestamp())"
            ).format(sql.Identifier("public", table))
        )


def drop_tables(pg_dsn: str, tables: Sequence[str]) -> None:
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        for t in tables:
            conn.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(sql.Identifier("public", t)))


def register(connect: ConnectClient, spec: ConnectorSpec) -> dict[str, Any]:
    """Apply the spec; if the worker refuses producer overrides, say so and apply without them."""
    run_preflight(spec, create_heartbeat_table=False)
    config = spec.to_config()
    try:
        connect.apply(spec.name, config)
        return {"applied": redacted(config), "refused": []}
    except ConnectorConfigInvalid as exc:
        refused = [(k, m) for k, m in exc.field_errors if k.startswith("producer.override.")]
        if not refused or len(refused) != len(exc.field_errors):
            raise
        log.warning("worker refused producer overrides %s; applying without them", refused)
        config = {k: v for k, v in config.items() if not k.startswith("producer.override.")}
        connect.apply(spec.name, config)
        return {"applied": redacted(config), "refused": [f"{k}: {m}" for k, m in refused]}


class ConnectorWatch:
    """Fail fast (with Connect's trace) if the connector dies while we wait on Kafka."""

    def __init__(self, connect: ConnectClient, name: str, every_s: float = 2.0) -> None:
        self._connect, self._name, self._every, self._next = connect, name, every_s, 0.0

    def check(self) -> None:
        if time.monotonic() < self._next:
            return
        self._next = time.monotonic() + self._every
        with suppress(ConnectorNotFound):
            status = self._connect.status(self._name)
            if status.failed:
                raise ConnectorFailed(self._name, status.failure_trace)


def record_anatomy(topic: str, msg: Message) -> dict[str, Any]:
    """Snapshot marker and how much of the value is the inline schema (decoded by cdc.change_event)."""
    value = msg.value() or b""
    doc = json.loads(value)
    if "schema" not in doc:  # converter without schemas: not a cdc.change_event record
        return {"snapshot_marker": doc["source"]["snapshot"], "schema_share_of_value": 0.0}
    event = decode_record(topic=topic, partition=0, offset=msg.offset() or 0, key=msg.key(), value=value)
    schema_bytes = len(json.dumps(doc["schema"], separators=(",", ":")))
    return {
        "snapshot_marker": getattr(getattr(event, "source", None), "snapshot", None),
        "schema_share_of_value": round(schema_bytes / max(len(value), 1), 3),
    }


def _count_by_offsets(
    consumer: Consumer, topic: str, rows: int, deadline: float, watch: ConnectorWatch
) -> tuple[int, int | None]:
    """Poll the high watermark: on a fresh one-partition topic only this connector writes to, it is
    the record count. Costs one ListOffsets request per 250 ms instead of ~40 us of this process's
    CPU per 5 KB record, which would compete with the pipeline for the same two cores."""
    high = 0
    while high < rows and time.monotonic() < deadline:
        watch.check()
        high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10, cached=False)[1]
        if high < rows:
            time.sleep(0.25)
    return high, None


def _count_by_consuming(
    consumer: Consumer, topic: str, rows: int, deadline: float, watch: ConnectorWatch
) -> tuple[int, int | None]:
    count = nbytes = 0
    while count < rows and time.monotonic() < deadline:
        watch.check()
        for msg in consumer.consume(10_000, 0.5):
            if _ok(msg):
                count += 1
                nbytes += len(msg.value() or b"") + len(msg.key() or b"")
    return count, nbytes


def _read_at(consumer: Consumer, topic: str, offset: int, timeout: float = 30.0) -> Message:
    consumer.assign([TopicPartition(topic, 0, offset)])
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for msg in consumer.consume(1, 1.0):
            if _ok(msg) and msg.offset() == offset:
                return msg
    raise TimeoutError(f"could not read {topic}[0]@{offset} within {timeout:.0f}s; is the broker healthy?")


def measure_snapshot(
    cfg: BenchConfig,
    connect: ConnectClient,
    spec: ConnectorSpec,
    topic: str,
    timeout_s: float,
    pids: StackPids,
) -> dict[str, Any]:
    """Register, wait until the table topic holds every row (or the timeout), then read the first and
    last records back for their broker append times and Debezium's `last` snapshot marker."""
    consumer = _consumer(cfg.endpoints.kafka_bootstrap_servers, topic)
    count_rows = _count_by_consuming if cfg.snapshot_count == "consume" else _count_by_offsets
    phase = Phase(pids)
    try:
        with phase.measure():
            t_register = time.time()
            settings = register(connect, spec)
            watch, deadline = ConnectorWatch(connect, spec.name), time.monotonic() + timeout_s
            # On timeout the partial rate is still a result.
            count, consumed_bytes = count_rows(consumer, topic, cfg.snapshot_rows, deadline, watch)
            t_seen = time.time()
        first = _read_at(consumer, topic, 0) if count else None
        last = _read_at(consumer, topic, count - 1) if count else None
    finally:
        consumer.close()
    append_times = first is not None and last is not None and last.timestamp()[0] == TIMESTAMP_LOG_APPEND_TIME
    first_ms = first.timestamp()[1] if first is not None else 0
    last_ms = last.timestamp()[1] if last is not None else 0
    complete = count >= cfg.snapshot_rows
    seconds = (last_ms / 1000 if append_times and complete else t_seen) - t_register
    rate = count / seconds
    sampled = [len(m.value() or b"") + len(m.key() or b"") for m in (first, last) if m is not None]
    avg_bytes = (
        consumed_bytes / max(count, 1) if consumed_bytes is not None else sum(sampled) / max(len(sampled), 1)
    )
    on_disk = topic_bytes_on_disk(cfg.stack_dir, topic)
    return {
        "rows": count,
        "complete": complete,
        "counted_by": cfg.snapshot_count,
        "seconds_register_to_last_record": round(seconds, 2),
        "rows_per_s": round(rate),
        "target_rows_per_s": SNAPSHOT_TARGET_ROWS_PER_S,
        "met": complete and rate >= SNAPSHOT_TARGET_ROWS_PER_S,
        "seconds_register_to_first_record": round(first_ms / 1000 - t_register, 2) if append_times else None,
        "rows_per_s_first_to_last_record": round(count / max(1e-3, (last_ms - first_ms) / 1000))
        if append_times
        else None,
        "seen_complete_after_s": round(t_seen - t_register, 2),
        "avg_record_bytes": round(avg_bytes),
        "mb_per_s_uncompressed": round(avg_bytes * count / seconds / 1e6, 1),
        "first_record": record_anatomy(topic, first) if first is not None else None,
        "last_record": record_anatomy(topic, last) if last is not None else None,
        "topic_bytes_on_disk": on_disk,
        "compression_ratio": round(avg_bytes * count / on_disk, 1) if on_disk else None,
        "arrival_clock": "broker LogAppendTime" if append_times else "bench wall clock",
        "connector": settings,
        "resources": phase.as_json(count),
    }


class PacedWriter(threading.Thread):
    """Commits `rows_per_tick` rows every tick on an absolute schedule (late ticks run at once)."""

    def __init__(self, cfg: BenchConfig, table: str, first_id: int, rate: int, seconds: float) -> None:
        super().__init__(name=f"paced-writer-{rate}", daemon=True)
        self.cfg, self.table, self.first_id, self.rate, self.seconds = cfg, table, first_id, rate, seconds
        self.rows_per_tick, self.interval_s = tick_plan(rate, cfg.tick_ms)
        self.rows = 0
        self.commits = 0
        self.elapsed_s = 0.0
        self.max_behind_s = 0.0
        self.commit_ms: list[float] = []
        self.error: BaseException | None = None
        self.stop = threading.Event()

    def run(self) -> None:
        stmt = sql.SQL(
            "INSERT INTO {} (id, pad) SELECT g, %s FROM generate_series(%s::bigint, %s::bigint) AS g"
        ).format(sql.Identifier("public", self.table))
        try:
            with psycopg.connect(self.cfg.endpoints.pg_dsn) as conn:
                if self.cfg.synchronous_commit != "server":
                    conn.execute(
                        sql.SQL("SET synchronous_commit = {}").format(
                            sql.Literal(self.cfg.synchronous_commit)
                        )
                    )
                    conn.commit()
                next_id, start = self.first_id, time.perf_counter()
                while not self.stop.is_set():
                    due = start + self.commits * self.interval_s
                    if due - start >= self.seconds:
                        break
                    now = time.perf_counter()
                    if due > now:
                        time.sleep(due - now)
                    else:
                        self.max_behind_s = max(self.max_behind_s, now - due)
                    t0 = time.perf_counter()
                    conn.execute(stmt, (_PAD, next_id, next_id + self.rows_per_tick - 1), prepare=True)
                    conn.commit()
                    self.commit_ms.append((time.perf_counter() - t0) * 1000)
                    next_id += self.rows_per_tick
                    self.commits += 1
                    self.rows = next_id - self.first_id
                self.elapsed_s = time.perf_counter() - start
        except BaseException as exc:  # handed to the main thread, which re-raises it
            self.error = exc


def measure_rate(
    cfg: BenchConfig,
    consumer: Consumer,
    connect: ConnectClient,
    spec: ConnectorSpec,
    table: str,
    rate: int,
    first_id: int,
    seconds: float,
    pids: StackPids,
) -> dict[str, Any]:
    writer = PacedWriter(cfg, table, first_id, rate, seconds)
    total, to_kafka, to_event, event_to_kafka, kafka_to_consumer = [], [], [], [], []
    seen: set[int] = set()
    watch = ConnectorWatch(connect, spec.name)
    phase = Phase(pids)
    drain_deadline: float | None = None
    try:
        with phase.measure():
            writer.start()
            while True:
                msgs = consumer.consume(1000, 0.05)
                arrival_ms = time.time() * 1000
                for msg in msgs:
                    if not _ok(msg) or msg.value() is None:
                        continue
                    row = parse_streamed(msg.value() or b"")
                    if row.row_id < first_id or row.row_id in seen:
                        continue
                    seen.add(row.row_id)
                    commit_ms, event_ms = row.commit_us / 1000, row.emitted_us / 1000
                    append_ms = float(msg.timestamp()[1])
                    total.append(arrival_ms - commit_ms)
                    to_kafka.append(append_ms - commit_ms)
                    to_event.append(event_ms - commit_ms)
                    event_to_kafka.append(append_ms - event_ms)
                    kafka_to_consumer.append(arrival_ms - append_ms)
                watch.check()
                if writer.is_alive():
                    continue
                if writer.error is not None:
                    raise writer.error
                if len(seen) >= writer.rows:
                    break
                if drain_deadline is None:
                    drain_deadline = time.monotonic() + cfg.drain_timeout_s
                elif time.monotonic() > drain_deadline:
                    break
    finally:
        writer.stop.set()
        writer.join(timeout=10)
    achieved = writer.rows / max(writer.elapsed_s, 1e-9)
    p99 = summarize_ms(total).get("p99", float("nan"))
    commit_sorted = sorted(writer.commit_ms)
    return {
        "target_rows_per_s": rate,
        "seconds": seconds,
        "rows_per_commit": writer.rows_per_tick,
        "commit_interval_ms": round(writer.interval_s * 1000, 2),
        "rows_written": writer.rows,
        "achieved_rows_per_s": round(achieved),
        "writer_kept_rate": achieved >= 0.97 * rate,
        "writer_max_behind_schedule_ms": round(writer.max_behind_s * 1000, 1),
        "writer_insert_commit_ms_p50_p99": [
            round(percentile(commit_sorted, 50), 2),
            round(percentile(commit_sorted, 99), 2),
        ],
        "rows_received": len(seen),
        "rows_missing": writer.rows - len(seen),
        "latency_ms_commit_to_consumer": summarize_ms(total),
        "latency_ms_commit_to_kafka": summarize_ms(to_kafka),
        "breakdown_ms": {
            "commit_to_debezium_event": summarize_ms(to_event),
            "debezium_event_to_kafka_append": summarize_ms(event_to_kafka),
            "kafka_append_to_consumer": summarize_ms(kafka_to_consumer),
        },
        "target_p99_ms": LATENCY_TARGET_P99_MS,
        "met": p99 <= LATENCY_TARGET_P99_MS and writer.rows == len(seen),
        "resources": phase.as_json(writer.rows),
    }


def wait_streaming(
    cfg: BenchConfig, consumer: Consumer, connect: ConnectClient, spec: ConnectorSpec, table: str
) -> float:
    """Insert marker rows (ids 0, -1, ...) until one arrives: proves the slot exists and streaming runs.

    Connect reports RUNNING before Debezium has created its slot, and a change committed before
    that is never streamed, so one marker is not enough.
    """
    t0, watch, marker = time.monotonic(), ConnectorWatch(connect, spec.name), 1
    stmt = sql.SQL("INSERT INTO {} (id, pad) VALUES (%s, %s)").format(sql.Identifier("public", table))
    with psycopg.connect(cfg.endpoints.pg_dsn, autocommit=True) as conn:
        while time.monotonic() - t0 < 120:
            marker -= 1
            conn.execute(stmt, (marker, _PAD))
            next_marker = time.monotonic() + 2.0
            while time.monotonic() < next_marker:
                watch.check()
                for msg in consumer.consume(100, 0.2):
                    if (
                        _ok(msg)
                        and msg.value() is not None
                        and parse_streamed(msg.value() or b"").row_id <= 0
                    ):
                        return time.monotonic() - t0
    raise TimeoutError(f"no marker row of {table} reached Kafka in 120s; is connector {spec.name} streaming?")


# ---- orchestration ------------------------------------------------------------------------------------
def _delete_connector(connect: ConnectClient, name: str) -> None:
    with suppress(ConnectorNotFound):
        connect.delete(name)


@dataclass
class Cleanup:
    """Everything the run created, removed in reverse order; each step's failure is recorded, not raised."""

    cfg: BenchConfig
    connect: ConnectClient
    admin: AdminClient
    specs: list[ConnectorSpec] = field(default_factory=list)
    tables: list[str] = field(default_factory=list)
    log: list[str] = field(default_factory=list)

    def _step(self, what: str, fn: Callable[[], object]) -> None:
        try:
            fn()
            self.log.append(f"ok: {what}")
        except Exception as exc:  # cleanup must go on; the failure is reported in the JSON
            self.log.append(f"FAILED: {what}: {exc}")
            log.error("cleanup step failed: %s: %s", what, exc)

    def connectors(self) -> None:
        dsn = self.cfg.endpoints.pg_dsn
        while self.specs:
            spec = self.specs.pop()
            self._step(f"delete connector {spec.name}", partial(_delete_connector, self.connect, spec.name))
            self._step(
                f"drop slot {spec.resolved_slot_name} + publication {spec.resolved_publication_name}",
                partial(drop_slot, dsn, spec.resolved_slot_name, spec.resolved_publication_name),
            )
            self._step(
                f"delete topics {spec.topic_prefix}.*",
                partial(delete_topics, self.admin, spec.topic_prefix + "."),
            )

    def all(self) -> None:
        self.connectors()
        tables, self.tables = self.tables, []
        self._step(f"drop tables {tables}", lambda: drop_tables(self.cfg.endpoints.pg_dsn, tables))


def run_variant(
    cfg: BenchConfig,
    run_id: str,
    variant: Variant,
    snap_table: str,
    connect: ConnectClient,
    admin: AdminClient,
    cleanup: Cleanup,
    pids: StackPids,
    out: dict[str, Any],
) -> None:
    spec = variant_spec(run_id, variant, "snap", cfg.endpoints.pg_dsn, snap_table)
    cleanup.specs.append(spec)
    snap_topic = spec.topic_for(f"public.{snap_table}")
    create_topics(admin, [snap_topic])
    log.info("[%s] snapshot of %d rows", variant.name, cfg.snapshot_rows)
    try:
        timeout_s = cfg.snapshot_timeout_s if variant.role == "candidate" else cfg.baseline_snapshot_timeout_s
        out["snapshot"] = measure_snapshot(cfg, connect, spec, snap_topic, timeout_s, pids)
    finally:
        cleanup.connectors()  # free the slot, task and disk before the next measurement
    log.info("[%s] snapshot: %s rows/s", variant.name, out["snapshot"]["rows_per_s"])
    if variant.role == "diagnostic":
        out["latency_skipped"] = "snapshot-only variant"
        return
    out["latency"] = []
    measure_latencies(cfg, run_id, variant, connect, admin, cleanup, pids, out["latency"])


def measure_latencies(
    cfg: BenchConfig,
    run_id: str,
    variant: Variant,
    connect: ConnectClient,
    admin: AdminClient,
    cleanup: Cleanup,
    pids: StackPids,
    results: list[dict[str, Any]],
) -> None:
    """Warm up (unmeasured, so the JIT compiles the streaming path), then one run per rate."""
    lat_table = f"bench_cdc_lat_{run_id}_{variant.name.replace('-', '_')}"
    cleanup.tables.append(lat_table)
    create_latency_table(cfg.endpoints.pg_dsn, lat_table)
    spec = variant_spec(run_id, variant, "lat", cfg.endpoints.pg_dsn, lat_table)
    cleanup.specs.append(spec)
    topic = spec.topic_for(f"public.{lat_table}")
    create_topics(admin, [topic])
    consumer = _consumer(cfg.endpoints.kafka_bootstrap_servers, topic)
    try:
        register(connect, spec)
        connect.wait_running(spec.name, timeout=120)
        ready_s = wait_streaming(cfg, consumer, connect, spec, lat_table)
        log.info("[%s] streaming after %.1fs; warm-up %gs", variant.name, ready_s, cfg.warmup_seconds)
        warm = measure_rate(
            cfg, consumer, connect, spec, lat_table, cfg.rates[0], 1, cfg.warmup_seconds, pids
        )
        first_id = 1 + warm["rows_written"]
        seconds = cfg.rate_seconds if variant.role == "candidate" else cfg.baseline_rate_seconds
        for rate in cfg.rates:
            log.info("[%s] latency at %d rows/s for %gs", variant.name, rate, seconds)
            result = measure_rate(cfg, consumer, connect, spec, lat_table, rate, first_id, seconds, pids)
            first_id += result["rows_written"]
            results.append(result)
            tot = result["latency_ms_commit_to_consumer"]
            log.info(
                "[%s] %d rows/s: achieved %d, p50 %s ms, p99 %s ms, missing %d",
                variant.name,
                rate,
                result["achieved_rows_per_s"],
                tot.get("p50"),
                tot.get("p99"),
                result["rows_missing"],
            )
    finally:
        consumer.close()
        cleanup.connectors()


_CONNECT_PRODUCER_BATCH_BYTES = 16_384  # Kafka producer default; Connect also pins max.in.flight=1


def producer_batching(snapshot: Mapping[str, Any]) -> str | None:
    """Explain a snapshot capped by the producer: records per batch at the applied batch.size."""
    applied = snapshot["connector"]["applied"]
    batch = int(applied.get("producer.override.batch.size", _CONNECT_PRODUCER_BATCH_BYTES))
    compression = applied.get("producer.override.compression.type", "none")
    size = max(int(snapshot["avg_record_bytes"]), 1)
    per_batch = batch // size
    if compression != "none" or per_batch > 100:
        return None
    return (
        f"producer batch.size {batch} B holds only {per_batch} records of {size} B (uncompressed), and "
        "Connect's source producers send one request at a time (max.in.flight.requests.per.connection=1): "
        "each broker round trip moves a handful of rows"
    )


def _contention(resources: Mapping[str, Any]) -> str:
    per_row = dict(resources.get("cpu_us_per_row") or {})
    top = ", ".join(f"{k} {v:.0f}" for k, v in sorted(per_row.items(), key=lambda kv: -kv[1])[:5])
    cap = resources.get("capacity_if_idle") or {}
    return (
        f"CPU us/row: {top}; machine busy {resources.get('machine_busy_cores')} of {os.cpu_count()} cores, "
        f"others ~{resources.get('other_processes_cores_approx')}; on idle cores ~{cap.get('estimate_rows_per_s')} rows/s "
        f"(task-thread ceiling {cap.get('task_thread_ceiling_rows_per_s')}, all-cores ceiling "
        f"{cap.get('all_cores_ceiling_rows_per_s')})"
    )


def findings(results: Mapping[str, Any]) -> list[str]:
    """Plain-language notes on targets met or missed and where the time went (pure over the results)."""
    notes: list[str] = []
    for v in results.get("variants", ()):
        name, snap = v["variant"], v.get("snapshot") or {}
        if snap:
            verdict = "meets" if snap["met"] else "MISSES"
            partial = "" if snap["complete"] else f" (PARTIAL: {snap['rows']:,} rows before the timeout)"
            share = (snap.get("last_record") or {}).get("schema_share_of_value", 0.0)
            notes.append(
                f"[{name}] snapshot {snap['rows_per_s']:,} rows/s{partial} {verdict} the "
                f"{SNAPSHOT_TARGET_ROWS_PER_S:,} target; {snap['avg_record_bytes']} B/record, "
                f"{share:.0%} of each value is the inline schema; {_contention(snap['resources'])}"
            )
            batching = producer_batching(snap)
            if batching:
                notes.append(f"[{name}] {batching}")
            if snap["connector"]["refused"]:
                notes.append(f"[{name}] the worker refused: {snap['connector']['refused']}")
        if v.get("latency_skipped"):
            notes.append(f"[{name}] latency not measured: {v['latency_skipped']}")
        for lat in v.get("latency", ()):
            tot = lat["latency_ms_commit_to_consumer"]
            parts = ", ".join(f"{k} {s.get('p99')}" for k, s in lat["breakdown_ms"].items())
            kept = "" if lat["writer_kept_rate"] else f", writer reached only {lat['achieved_rows_per_s']:,}"
            verdict = "meets" if lat["met"] else "MISSES"
            notes.append(
                f"[{name}] {lat['target_rows_per_s']:,} rows/s{kept}: p50 {tot.get('p50')} / p99 {tot.get('p99')} ms "
                f"{verdict} p99 <= {LATENCY_TARGET_P99_MS:.0f} ms (p99 ms: {parts}); missing "
                f"{lat['rows_missing']}; {_contention(lat['resources'])}"
            )
    return notes


def render_markdown(results: Mapping[str, Any]) -> str:
    env = results.get("environment", {})
    lines = [
        "# CDC benchmark: Postgres -> Debezium -> Kafka",
        "",
        f"Run `{results['run_id']}` at {results['started_at']} ({results['duration_s']} s, quick={results['quick']}); "
        f"Kafka Connect {env.get('connect')}, Debezium {env.get('debezium')}, {env.get('cpus')} CPUs shared with "
        f"other engineers; load average {env.get('loadavg_start')} -> {results.get('loadavg_end')}. "
        "Numbers are noisy: each phase's `resources` in the JSON says how busy the machine was.",
        "",
        f"Targets: snapshot >= {SNAPSHOT_TARGET_ROWS_PER_S:,} rows/s; commit->consumer p99 <= "
        f"{LATENCY_TARGET_P99_MS:.0f} ms at each rate.",
        "",
        "| variant | snapshot rows/s | rows | B/record | machine busy (cores) |",
        "|---|---|---|---|---|",
    ]
    for v in results.get("variants", ()):
        snap = v.get("snapshot")
        if snap:
            lines.append(
                f"| {v['variant']} | {snap['rows_per_s']:,} | {snap['rows']:,}{'' if snap['complete'] else ' (partial)'} "
                f"| {snap['avg_record_bytes']} | {snap['resources'].get('machine_busy_cores')} |"
            )
    lines += [
        "",
        "| variant | rate | achieved | p50 ms | p99 ms | p99 commit->Kafka | p99 commit->event | p99 event->Kafka | missing |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for v in results.get("variants", ()):
        for lat in v.get("latency", ()):
            tot, kaf, br = (
                lat["latency_ms_commit_to_consumer"],
                lat["latency_ms_commit_to_kafka"],
                lat["breakdown_ms"],
            )
            lines.append(
                f"| {v['variant']} | {lat['target_rows_per_s']} | {lat['achieved_rows_per_s']} | {tot.get('p50')} "
                f"| {tot.get('p99')} | {kaf.get('p99')} | {br['commit_to_debezium_event'].get('p99')} "
                f"| {br['debezium_event_to_kafka_append'].get('p99')} | {lat['rows_missing']} |"
            )
    lines += ["", "## Findings", "", *(f"- {n}" for n in results.get("findings", ()))]
    if results.get("error"):
        lines += ["", f"**Run failed:** {results['error']}"]
    lines += ["", "## Tuned options (on top of the committed ConnectorSpec)", ""]
    lines += [f"- `{k}={v}`" for k, v in _TUNED.items()]
    lines += ["", "Full connector configs, per-process CPU, breakdowns and cleanup log: the JSON file.", ""]
    return "\n".join(lines)


def run(cfg: BenchConfig) -> dict[str, Any]:
    run_id = uuid.uuid4().hex[:8]
    started, t0 = datetime.now(UTC), time.monotonic()
    pids = StackPids.discover(cfg.stack_dir)
    results: dict[str, Any] = {
        "run_id": run_id,
        "started_at": started.isoformat(timespec="seconds"),
        "quick": cfg.quick,
        "parameters": {
            "snapshot_rows": cfg.snapshot_rows,
            "rates": cfg.rates,
            "rate_seconds": cfg.rate_seconds,
            "baseline_rate_seconds": cfg.baseline_rate_seconds,
            "warmup_seconds": cfg.warmup_seconds,
            "snapshot_timeout_s": {
                "candidate": cfg.snapshot_timeout_s,
                "others": cfg.baseline_snapshot_timeout_s,
            },
            "drain_timeout_s": cfg.drain_timeout_s,
            "snapshot_count": cfg.snapshot_count,
            "tick_ms": cfg.tick_ms,
            "writer_synchronous_commit": cfg.synchronous_commit,
            "variants": {
                n: {"extra": dict(VARIANTS[n].extra), "note": VARIANTS[n].note} for n in cfg.variants
            },
            "topics": "pre-created: 1 partition, LogAppendTime, cleanup.policy=delete",
        },
        "environment": stack_environment(cfg.endpoints, pids),
        "variants": [],
    }
    snap_table = f"bench_cdc_snap_{run_id}"
    admin = make_admin({"bootstrap.servers": cfg.endpoints.kafka_bootstrap_servers})
    with ConnectClient(cfg.endpoints.kafka_connect_url) as connect:
        cleanup = Cleanup(cfg, connect, admin)
        try:
            cleanup.tables.append(snap_table)
            log.info("loading %d rows into %s", cfg.snapshot_rows, snap_table)
            results["load_seconds"] = round(
                load_snapshot_table(cfg.endpoints.pg_dsn, snap_table, cfg.snapshot_rows), 2
            )
            for name in cfg.variants:
                out: dict[str, Any] = {"variant": name, "note": VARIANTS[name].note}
                results["variants"].append(out)  # filled in place: a failure keeps what was measured
                run_variant(cfg, run_id, VARIANTS[name], snap_table, connect, admin, cleanup, pids, out)
        except (
            ToolkitError,
            KafkaException,
            psycopg.Error,
            httpx.HTTPError,
            TimeoutError,
            KeyboardInterrupt,
            SystemExit,
        ) as exc:
            results["error"] = f"{type(exc).__name__}: {exc}"
            log.error("run failed: %s", results["error"])
        finally:
            cleanup.all()
            results["cleanup"] = cleanup.log
    results["findings"] = findings(results)
    results["loadavg_end"] = tuple(round(x, 2) for x in os.getloadavg())
    results["duration_s"] = round(time.monotonic() - t0, 1)
    return results


def parse(argv: Sequence[str] | None = None) -> BenchConfig:
    return BenchConfig.from_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    run_start = bench_results.Began()
    configure_cli_logging(logging.INFO, fmt="%(asctime)s %(levelname)s %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)  # one line per REST poll drowns the progress
    try:
        cfg = BenchConfig.from_args(argv)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    # SIGTERM -> SystemExit in the main thread, so `finally` still cleans up.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    results = run(cfg)
    written = bench_results.write(cfg.out_dir, results, render_markdown(results), began=run_start)
    print("\n".join(results["findings"]) or "no results")
    print(f"wrote {written} and {written.with_suffix('.md')}")
    return 1 if results.get("error") else 0


if __name__ == "__main__":
    raise SystemExit(main())
