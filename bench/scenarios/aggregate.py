"""Benchmark (issue 25): a windowed aggregate view kept by the streaming job vs recomputed each minute.

Side by side in one run, per number of distinct groups G (`--groups`, default 10k, 100k, 1M), on
`local[2]` (results in bench/results/aggregate/latest.{json,md}):
1. Data: `order.line_added` events shaped as the event store writes them (Confluent-framed Avro with
   the shop's schema registered under `<topic>-order.line_added`, envelope `timestamp` header in epoch
   ms), G per simulated minute (every SKU once, shuffled, times spread over the minute), into a fresh
   2-partition topic, one minute at a time, `--minutes` minutes (default 5) of event time.
2. Streaming: the real `AggregateJob` on the shop's `SKU_PER_MINUTE_VIEW` (count, two sums and an
   approximate distinct count per SKU per minute, 2 minutes of lateness) on that topic, driven once
   per simulated minute with availableNow (a driver run per minute: query start, the state store
   loaded from the checkpoint, the minute's batch, the Delta MERGE, any no-data batch that evicts
   closed windows). Per run: its wall time and, per batch, Spark's progress: input rows, trigger
   time, state memory (`stateOperators[].memoryUsedBytes`). The state's rows are counted once, after
   the last minute, with Spark's state reader (`format("statestore")` on the checkpoint): the job's
   store does not count them (spark_session.STATE_STORE), and counting between minutes slowed the
   next runs (thread dumps showed them replaying the store's changelog at start, which runs one right
   after the other did not).
3. Recompute: after each minute, the same aggregate as ONE Spark batch job over everything so far
   (`spark.read.format("kafka")` from offset 0 -> aggregate_plan.events / window_of / aggregations /
   output -> overwrite a Delta table), as a user's "recompute every minute" job would; its wall time.
   The last minute checks that both tables hold the same rows and totals.
4. Latency: the streaming job runs on with a `--trigger` (default 1 second); `--probes` single events
   are produced, one at a time, with an event time in the simulated current minute (so the state
   stays as large as the stream keeps it; a probe at the wall-clock time would move the watermark
   past every simulated window and evict them). Commit = the producer's flush returned (acked);
   visible = the first new Delta version whose table has the probe's row (the log directory is
   polled every 50 ms; the row is checked only when a version appears).
Cost per minute: streaming = the driver run's wall time for that minute; recompute = the batch job's
wall time after that minute. The recompute grows with the history it re-reads (minute k reads k
minutes), the streaming run with the state it keeps (about 3 windows: 1 minute + 2 of lateness).
`--budget-s` stops a size after the minute that went past it: the minutes run are reported as such.
Needs a running stack (`source .stack/env`). Timing on a shared 2-core machine is noisy: load
averages are recorded; read the ratios, not the absolute numbers.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import random
import shutil
import tempfile
import time
import uuid
from collections.abc import Sequence
from functools import partial
from importlib.resources import files
from pathlib import Path
from typing import Any

import httpx
from confluent_kafka import Producer
from confluent_kafka.admin import NewTopic  # type: ignore[attr-defined]

from bench.harness import results as bench_results
from bench.harness.percentiles import summarize_ms
from bench.harness.streaming import run_available_now
from devstack.event_records import EventRecords
from kafkakit.clients import make_admin, make_producer
from kafkakit.positions import parse_start
from materializers.aggregates.declaration import materializer
from materializers.aggregates.job import AggregateJob, table_path
from materializers.aggregates.plan import aggregations, events, output, refusal, window_of
from materializers.config import RunConfig
from materializers.decode.avro_events import WriterSchemas, learn_topic_schemas
from materializers.plan import JobPlan
from materializers.spark import session as spark_session
from materializers.views.warehouse.delta import query
from shop.sku_per_minute import SKU_PER_MINUTE_VIEW

OUT = bench_results.RESULTS / "aggregate"
EVENT_TYPE = "order.line_added"
MINUTE_MS = 60_000
PARTITIONS = 2
TARGET_RATIO = 0.1  # issue 25: streaming cost per minute <= 1/10 of the recomputation at 1M groups


# ------------------------------------------------------------------------------------------ data


def register(registry_url: str, topic: str) -> tuple[EventRecords, str]:
    """The shop's line_added schema under `<topic>-<type>` (the topic's own subject) and that subject."""
    text = (files("shop") / "schemas" / f"{EVENT_TYPE}.avsc").read_text()
    return EventRecords(registry_url, topic, {EVENT_TYPE: text}), f"{topic}-{EVENT_TYPE}"


@dataclasses.dataclass
class Lines:
    """Produces `order.line_added` events in the event store's shape to one topic."""

    producer: Producer
    topic: str
    records: EventRecords
    sent: int = 0

    def add(self, at_ms: int, sku: str, order_id: str, quantity: int, price: int) -> None:
        key, value, headers = self.records.record(
            order_id, 1, EVENT_TYPE, at_ms=at_ms, order_id=order_id, sku=sku, quantity=quantity,
            unit_price_cents=price,
        )  # fmt: skip
        while True:
            try:
                self.producer.produce(self.topic, key=key, value=value, headers=headers)
                break
            except BufferError:
                self.producer.poll(0.05)
        self.sent += 1
        if self.sent % 10_000 == 0:
            self.producer.poll(0)

    def flush(self) -> None:
        if self.producer.flush(300):
            raise RuntimeError(f"events to {self.topic} were not all acknowledged (flush timed out)")

    def minute(self, start_ms: int, minute: int, groups: int) -> float:
        """Every SKU once, in a shuffled order, times spread over the minute; seconds taken."""
        began = time.monotonic()
        rng = random.Random(minute)
        order = list(range(groups))
        rng.shuffle(order)
        for n, sku in enumerate(order):
            at = start_ms + n * MINUTE_MS // groups
            self.add(at, f"sku-{sku:07d}", f"o-{minute}-{n}", 1 + sku % 5, 100 + sku % 900)
        self.flush()
        return time.monotonic() - began


# ------------------------------------------------------------------------------------ streaming


def jvm_memory(spark: Any) -> dict[str, float]:
    """The driver JVM's (it runs the executors in local mode) resident and peak memory, MiB."""
    pid = int(spark.sparkContext._jvm.ProcessHandle.current().pid())
    found: dict[str, float] = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                found[f"jvm_{key.lower()}_mib"] = round(int(value.split()[0]) / 1024, 1)
    return found


def batch_record(progress: dict[str, Any]) -> dict[str, Any]:
    ops = progress.get("stateOperators") or []
    return {
        "batch": int(progress["batchId"]),
        "rows_in": int(progress.get("numInputRows") or 0),
        "trigger_ms": int(progress.get("durationMs", {}).get("triggerExecution", 0)),
        "add_batch_ms": int(progress.get("durationMs", {}).get("addBatch", 0)),
        "state_rows_updated": sum(int(op.get("numRowsUpdated") or 0) for op in ops),
        "state_memory_mib": round(sum(int(op.get("memoryUsedBytes") or 0) for op in ops) / 2**20, 1),
        "late_rows_dropped": sum(int(op.get("numRowsDroppedByWatermark") or 0) for op in ops),
    }


def stream_minute(spark: Any, plan: JobPlan) -> dict[str, Any]:
    """One driver run of the real job over what the topic holds (availableNow)."""
    run = run_available_now(partial(AggregateJob, spark, plan), "the aggregate job")
    return {"wall_s": round(run.seconds, 2), "batches": [batch_record(p) for p in run.progress]}


# ------------------------------------------------------------------------------------ recompute


def recompute(spark: Any, plan: JobPlan, path: Path) -> dict[str, Any]:
    """The whole aggregate as one batch job over the topic from offset 0, overwriting a Delta table."""
    from pyspark.sql import functions as F

    began = time.monotonic()
    view = plan.spec.aggregate
    assert view is not None
    schemas = WriterSchemas(plan.config.endpoints.schema_registry_url)
    learn_topic_schemas(schemas, plan.topic)
    raw = (
        spark.read.format("kafka")
        .option("kafka.bootstrap.servers", plan.config.endpoints.kafka_bootstrap_servers)
        .option("subscribe", plan.topic)
        .option("includeHeaders", "true")
        .option("startingOffsets", "earliest")
        .option("endingOffsets", "latest")
        .load()
    )
    decoded = events(raw, view, schemas.trusting_cache())
    kept = decoded.where(~refusal(view, F.current_timestamp()))
    grouped = kept.groupBy(window_of(view), *[F.col(f"`{g}`") for g in view.group_by]).agg(
        *aggregations(view)
    )
    output(grouped, view).write.format("delta").mode("overwrite").save(str(path))
    return {"wall_s": round(time.monotonic() - began, 2)}


def same_tables(spark: Any, streamed: Path, recomputed: Path) -> dict[str, Any]:
    """Rows and totals of both tables (equal when no record was late or refused)."""
    sql = "SELECT count(*) AS rows, sum(lines) AS lines, sum(units) AS units, sum(line_cents) AS cents FROM delta.`{}`"
    a = spark.sql(sql.format(streamed)).collect()[0].asDict()
    b = spark.sql(sql.format(recomputed)).collect()[0].asDict()
    return {"streamed": a, "recomputed": b, "equal": a == b}


# -------------------------------------------------------------------------------------- latency


def versions(table: Path) -> int:
    return len(list((table / "_delta_log").glob("*.json")))


def latency(spark: Any, plan: JobPlan, lines: Lines, at_ms: int, probes: int) -> dict[str, Any]:
    """Commit->visible of single events while the job runs with the plan's trigger (module doc, 4)."""
    table = table_path(plan)
    query_ = AggregateJob(spark, plan).start(parse_start("earliest"), available_now=False)
    samples: list[float] = []
    unseen = 0
    try:
        rng = random.Random(7)
        # Probe 0 is a warm-up, not counted: the query's first batch loads the state from the checkpoint.
        for i in range(probes + 1):
            sku = f"probe-{i}"
            before = versions(table)
            lines.add(at_ms + i * 1000, sku, f"probe-{i}", 1, 100)
            lines.flush()
            committed = time.monotonic()
            seen = wait_visible(table, sku, before, committed + 300)
            if seen is None:
                unseen += 1
            elif i:
                samples.append((seen - committed) * 1000)
            time.sleep(rng.uniform(0.3, 1.5))  # not in step with the trigger
        last = [batch_record(p) for p in query_.recentProgress if int(p.get("numInputRows") or 0)]
    finally:
        query_.stop()
    return {
        "trigger": plan.config.trigger,
        **summarize_ms(samples),
        "unseen": unseen,
        "poll_s": 0.05,
        "batches": last,
    }


def wait_visible(table: Path, sku: str, before: int, deadline: float) -> float | None:
    """When the first Delta version holding `sku` appeared (None: not before `deadline`)."""
    known = before
    while time.monotonic() < deadline:
        now = versions(table)
        if now > known:
            appeared = time.monotonic()
            known = now
            if query(str(table), f"SELECT count(*) AS n FROM t WHERE sku = '{sku}'")[0]["n"]:
                return appeared
        time.sleep(0.05)
    return None


# ---------------------------------------------------------------------------------------- a size


def run_size(
    spark: Any,
    base: RunConfig,
    groups: int,
    minutes: int,
    probes: int,
    budget_s: float,
    work: Path,
    recompute_at: set[int] | None = None,
) -> dict[str, Any]:
    """One size; the recompute after every minute, or only after the minutes in `recompute_at` and
    the last (the recompute of k minutes costs about k times the first: skipping lets a run reach a
    longer history)."""
    tag = uuid.uuid4().hex[:6]
    topic = f"bench-agg-{groups}-{tag}"
    bootstrap = base.endpoints.kafka_bootstrap_servers
    registry = base.endpoints.schema_registry_url
    admin = make_admin({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(timeout=30)
    subject = ""
    began = time.monotonic()
    result: dict[str, Any] = {
        "groups": groups,
        "events_per_minute": groups,
        "minutes_planned": minutes,
        "topic_partitions": PARTITIONS,
        "load_at_start": [round(x, 2) for x in os.getloadavg()],
    }
    try:
        records, subject = register(registry, topic)
        producer = make_producer(
            {
                "bootstrap.servers": bootstrap,
                "linger.ms": 50,
                "batch.size": 1_000_000,
                "compression.type": "lz4",
            }
        )
        lines = Lines(producer, topic, records)
        source = dataclasses.replace(SKU_PER_MINUTE_VIEW.source, topic=topic)
        spec = materializer(dataclasses.replace(SKU_PER_MINUTE_VIEW, source=source))
        plan = JobPlan.of(spec, dataclasses.replace(base, topic=topic, home=work / f"g{groups}"))
        recomputed = work / f"g{groups}" / "recomputed"
        now = int(time.time() * 1000)
        t0 = now - now % MINUTE_MS - (minutes + 30) * MINUTE_MS  # the past: never beyond max_ahead
        per_minute: list[dict[str, Any]] = []
        for m in range(minutes):
            print(f"G={groups:,} minute {m + 1}/{minutes}: producing ...", flush=True)
            produced_s = lines.minute(t0 + m * MINUTE_MS, m, groups)
            stream = stream_minute(spark, plan)
            print(f"  streamed in {stream['wall_s']} s", flush=True)
            due = recompute_at is None or m + 1 in recompute_at or m + 1 == minutes
            again = recompute(spark, plan, recomputed) if due else None
            row = {
                "minute": m + 1,
                "events_so_far": groups * (m + 1),
                "produce_s": round(produced_s, 2),
                "stream": stream,
                "recompute": again,
                "stream_events_per_s": round(groups / stream["wall_s"]),
                "jvm": jvm_memory(spark),
                "load_1m": round(os.getloadavg()[0], 2),
            }
            if again is not None:
                row["ratio_stream_to_recompute"] = round(stream["wall_s"] / again["wall_s"], 3)
                row["recompute_events_per_s"] = round(groups * (m + 1) / again["wall_s"])
                print(
                    f"  recomputed in {again['wall_s']} s: ratio {row['ratio_stream_to_recompute']}",
                    flush=True,
                )
            per_minute.append(row)
            if time.monotonic() - began > budget_s and m + 1 < minutes:
                result["stopped_early"] = f"past --budget-s {budget_s:g} after minute {m + 1}"
                break
        result["minutes"] = per_minute
        result["state_rows_at_end"] = spark.read.format("statestore").load(str(plan.checkpoint)).count()
        result["tables"] = same_tables(spark, table_path(plan), recomputed)
        print(f"G={groups:,}: latency probes ...", flush=True)
        result["latency"] = latency(spark, plan, lines, t0 + len(per_minute) * MINUTE_MS + 5_000, probes)
        result["summary"] = summarize(per_minute)
    finally:
        admin.delete_topics([topic, f"{topic}.dlq"])
        if subject:
            for permanent in ("false", "true"):
                httpx.delete(f"{registry}/subjects/{subject}?permanent={permanent}", timeout=30)
        shutil.rmtree(work / f"g{groups}", ignore_errors=True)
    result["seconds"] = round(time.monotonic() - began, 1)
    result["load_at_end"] = [round(x, 2) for x in os.getloadavg()]
    return result


def summarize(per_minute: list[dict[str, Any]]) -> dict[str, Any]:
    recomputed = [m for m in per_minute if m["recompute"]]
    last = recomputed[-1]
    data = [b for m in per_minute for b in m["stream"]["batches"] if b["rows_in"]]
    stream_s = [m["stream"]["wall_s"] for m in per_minute]
    return {
        "minutes_run": len(per_minute),
        "stream_wall_s_per_minute": stream_s,
        "recompute_wall_s_per_minute": [
            m["recompute"]["wall_s"] if m["recompute"] else None for m in per_minute
        ],
        "ratio_last_minute": last["ratio_stream_to_recompute"],
        "ratio_mean": round(
            sum(m["stream"]["wall_s"] for m in recomputed)
            / sum(m["recompute"]["wall_s"] for m in recomputed),
            3,
        ),
        "stream_events_per_s_last": per_minute[-1]["stream_events_per_s"],
        "recompute_events_per_s_last": last["recompute_events_per_s"],
        "data_batch_ms": [b["trigger_ms"] for b in data],
        "state_memory_mib": [
            max((b["state_memory_mib"] for b in m["stream"]["batches"]), default=0) for m in per_minute
        ],
    }


# --------------------------------------------------------------------------------------- report


HEADER = (
    "| groups | minutes run | stream s/min (last) | of which the data batch s | recompute s/min (last) "
    "| ratio last | ratio mean | stream events/s | recompute events/s | state rows "
    "| state MiB (per minute) | latency p50 / p99 ms | tables equal | load 1-min during |",
    "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|---|---|---|",
)


def _state_rows(r: dict[str, Any]) -> str:
    """After the last minute (Spark's state reader); runs before it reported Spark's numRowsTotal per minute."""
    if "state_rows_at_end" in r:
        return f"{r['state_rows_at_end']:,} after the last minute"
    return " → ".join(f"{x:,}" for x in r["summary"]["state_rows"]) + " (per minute)"


def _row(r: dict[str, Any]) -> str:
    if "summary" not in r:
        return f"| {r['groups']:,} | — | failed: {r.get('error', '?')} ||||||||||||"
    s, lat = r["summary"], r["latency"]
    loads = [m["load_1m"] for m in r["minutes"]]
    return (
        f"| {r['groups']:,} | {s['minutes_run']}{' (stopped)' if 'stopped_early' in r else ''} "
        f"| {s['stream_wall_s_per_minute'][-1]} | {round(s['data_batch_ms'][-1] / 1000, 1)} "
        f"| {s['recompute_wall_s_per_minute'][-1]} "
        f"| {s['ratio_last_minute']} | {s['ratio_mean']} | {s['stream_events_per_s_last']:,} "
        f"| {s['recompute_events_per_s_last']:,} | {_state_rows(r)} "
        f"| {' → '.join(str(x) for x in s['state_memory_mib'])} | {lat.get('p50')} / {lat.get('p99')} "
        f"(n={lat['count']}) | {r['tables']['equal']} | {min(loads)} to {max(loads)} |"
    )


def _per_minute(r: dict[str, Any]) -> str:
    pairs = zip(
        r["summary"]["stream_wall_s_per_minute"], r["summary"]["recompute_wall_s_per_minute"], strict=True
    )
    return f"- {r['groups']:,} groups: " + ", ".join(f"{a} / {'—' if b is None else b}" for a, b in pairs)


def render_markdown(res: dict[str, Any]) -> str:
    m = res["machine"]
    lines = [
        "# Aggregate view benchmark (issue 25): streaming vs recompute every minute",
        "",
        f"Measured {res['measured_at']} on {m['cpus']} CPUs (shared), `{res['master']}`, driver memory "
        f"{res['driver_memory']}; load average (1/5/15 min) before {m['load_at_start']}, after "
        f"{m.get('load_at_end')}. View: the shop's `sku_per_minute` (count, 2 sums, approx distinct; 1-minute "
        f"tumbling windows, 2 minutes of lateness). G events per simulated minute (every SKU once).",
        "",
        *[
            f"Earlier run kept: {e['measured_at']}, groups {e['groups']}, driver memory {e['driver_memory']}, "
            f"load before {e['machine']['load_at_start']}, after {e['machine'].get('load_at_end')}."
            for e in res.get("earlier_runs", [])
        ],
        "",
        *HEADER,
        *[_row(r) for r in res["sizes"]],
        "",
        "Per minute: streaming driver-run wall s / recompute wall s (the recompute re-reads minutes 1..k).",
        "",
        *[_per_minute(r) for r in res["sizes"] if "summary" in r],
    ]
    reruns = res.get("reruns", [])
    if reruns:
        lines += ["", "## Re-runs (not in the verdict)", ""]
        lines += [f"- {r['why']}" for r in reruns]
        lines += ["", *HEADER, *[_row(r) for r in reruns], "", *[_per_minute(r) for r in reruns]]
    lines += ["", "## Verdict", "", "```json", json.dumps(res["verdict"], indent=2), "```", ""]
    if res.get("notes"):
        lines += ["## Notes", "", *[f"- {n}" for n in res["notes"]], ""]
    return "\n".join(lines) + "\n"


def verdict(res: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"target": f"stream cost per minute <= {TARGET_RATIO} x recompute at 1M groups"}
    for r in res["sizes"]:
        if "summary" in r:
            out[f"ratio_last_minute_{r['groups']}"] = r["summary"]["ratio_last_minute"]
    big = [r for r in res["sizes"] if r["groups"] >= 1_000_000 and "summary" in r]
    out["target_met_at_1M"] = (
        big[0]["summary"]["ratio_last_minute"] <= TARGET_RATIO if big else "not measured"
    )
    return out


def save(out: Path, res: dict[str, Any], began: bench_results.Began) -> None:
    res["verdict"] = verdict(res)
    bench_results.write(out, res, render_markdown(res), began=began)


def _run_meta(res: dict[str, Any]) -> dict[str, Any]:
    return {
        "measured_at": res["measured_at"],
        "groups": [r["groups"] for r in res["sizes"]],
        "driver_memory": res["driver_memory"],
        "machine": res["machine"],
    }


def parse(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--groups", type=int, action="append", help="distinct SKUs (repeat; default 10000, 100000, 1000000)"
    )
    parser.add_argument("--minutes", type=int, default=5, help="simulated minutes of event time (default 5)")
    parser.add_argument("--probes", type=int, default=10, help="latency samples per size (default 10)")
    parser.add_argument("--trigger", default="1 second", help="the streaming job's trigger while probing")
    parser.add_argument(
        "--budget-s", type=float, default=900.0, help="stop a size after the minute past this"
    )
    # Spark's default 1g heap cannot hold the state at 1M groups: ~3 windows x 1M rows, each with an
    # approximate-distinct sketch (~1 KiB per state row as measured at 10k/100k).
    parser.add_argument(
        "--driver-memory", default="6g", help="spark.driver.memory (default 6g; '' = Spark's 1g)"
    )
    parser.add_argument(
        "--recompute-at", type=int, action="append",
        help="recompute only after this minute (repeat; the last minute always; default: every minute)",
    )  # fmt: skip
    parser.add_argument("--note", action="append", default=[], help="a note for the results (repeat)")
    parser.add_argument(
        "--keep", action="store_true", help="keep the other sizes' results already in --out (a run per size)"
    )
    parser.add_argument("--out", type=Path, default=OUT, help="the results' folder")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    run_start = bench_results.Began()
    args = parse(argv)
    if args.driver_memory:  # the driver JVM is launched by build(): only the submit arguments reach it
        os.environ["PYSPARK_SUBMIT_ARGS"] = f"--driver-memory {args.driver_memory} pyspark-shell"
    base = dataclasses.replace(RunConfig.from_env(), master="local[2]", trigger=args.trigger)
    res: dict[str, Any] = {
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "master": base.master,
        "driver_memory": args.driver_memory or "1g (Spark's default)",
        "machine": {
            "cpus": os.cpu_count(),
            "load_at_start": [round(x, 2) for x in os.getloadavg()],
            "python": platform.python_version(),
        },
        "sizes": [],
        "notes": args.note,
    }
    sizes = args.groups or [10_000, 100_000, 1_000_000]
    earlier = bench_results.previous(args.out) if args.keep else {}
    if earlier:  # sizes run before (a run per size keeps each under ~20 min)
        res["sizes"] = [r for r in earlier["sizes"] if r["groups"] not in sizes]
        res["earlier_runs"] = [*earlier.get("earlier_runs", []), _run_meta(earlier)]
        res["notes"] = [*earlier.get("notes", []), *args.note]
    work = Path(tempfile.mkdtemp(prefix="bench-agg-"))
    spark = spark_session.build(base.master, "bench-aggregate")
    try:
        for groups in sizes:
            try:
                res["sizes"].append(
                    run_size(
                        spark,
                        base,
                        groups,
                        args.minutes,
                        args.probes,
                        args.budget_s,
                        work,
                        set(args.recompute_at) if args.recompute_at else None,
                    )
                )
            except Exception as exc:  # a size that does not fit is reported, the others still run
                res["sizes"].append({"groups": groups, "error": f"{type(exc).__name__}: {str(exc)[:500]}"})
            res["sizes"].sort(key=lambda r: int(r["groups"]))
            save(args.out, res, run_start)
    finally:
        spark.stop()
        shutil.rmtree(work, ignore_errors=True)
    res["machine"]["load_at_end"] = [round(x, 2) for x in os.getloadavg()]
    save(args.out, res, run_start)
    print(render_markdown(res))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
