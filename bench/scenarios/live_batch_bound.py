"""Benchmark: a live CDC stream at a steady rate, by the bound under which a batch is applied from the driver.

A micro-batch of at most `small_batch_rows` records is decoded into the driver by ONE Spark job and
every view is written from there; a larger one takes the executors' path (the decoded batch
persisted, then a Spark job per view, the cache through Python workers). On one machine the
executors' path costs several seconds more per batch, so a driver whose batches once pass the bound
(a burst, or a slow batch on a cold JVM) takes longer over its next batch, which is then larger
still. This bench runs the same stream against both bounds in one run: 10,000 (the default before
2026-11-28) and 50,000 (`materializers.config.DRIVER_ROWS`: the default then, the floor of `auto` now).

Per bound, one after the other: a `--rows` products table in Postgres captured by a latency-tuned
Debezium connector (Avro, the cdc package's default format), ONE driver (`materializers start
products`, cache + search + warehouse, trigger `--trigger`) started from the snapshot, then
`--warmup` s of `--rate` row updates per second and `--seconds` s measured (bench/scenarios/cdc_formats.py's
latency phase: `bench.scenarios.materializers.PacedUpdates` and `Prober`). Reported: commit->view p50/p99 per
view, rows not seen at the end, and each batch's size and time from the driver's timeline.
Results: bench/results/live_batch_bound/latest.{json,md}. Needs `make up`; ~7 minutes.
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import statistics
import tempfile
import time
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from bench.harness import results as bench_results
from bench.harness.probes import StackPids
from bench.scenarios import cdc_formats
from bench.scenarios.cdc import BenchConfig
from cdc.connect_client import ConnectClient
from kafkakit.clients import make_admin
from materializers import catalog
from materializers.config import DRIVER_ROWS, ENV_SMALL_BATCH_ROWS
from materializers.runtime import timeline

OUT = bench_results.RESULTS / "live_batch_bound"
BEFORE = 10_000
VIEWS = ("cache", "search", "warehouse")


def batches(job_dir: Path) -> list[dict[str, Any]]:
    """Each batch the driver committed: id, records, ms, and the path it took."""
    return [
        {
            "batch_id": e["batch_id"],
            "rows": e["rows"],
            "ms": e["total_ms"],
            "path": "driver" if "decode_to_driver" in e["steps"] else "executors",
        }
        for e in timeline.read(job_dir)
        if e["event"] == "batch"
    ]


def one_bound(ctx: cdc_formats.Context, bound: int) -> dict[str, Any]:
    """The latency phase with the driver's small-batch bound set to `bound` (through its env)."""
    os.environ[ENV_SMALL_BATCH_ROWS] = str(bound)
    try:
        measured = cdc_formats.measure_latency(ctx, "avro")
    finally:
        os.environ.pop(ENV_SMALL_BATCH_ROWS, None)
    job_dir = next(p.parent for p in ctx.work.glob("latency-avro/**/timeline.jsonl"))
    done = batches(job_dir)
    shutil.rmtree(ctx.work / "latency-avro", ignore_errors=True)  # the next bound starts clean
    (rate,) = measured["rates"]
    live = done[1:]  # batch 0 is the snapshot
    return {
        "small_batch_rows": bound,
        "rate": rate,
        "batches": done,
        "live_batches": len(live),
        "largest_live_batch_rows": max((b["rows"] for b in live), default=0),
        "median_live_batch_rows": statistics.median(b["rows"] for b in live) if live else 0,
        "live_batches_on_executors": sum(b["path"] == "executors" for b in live),
    }


def run(args: argparse.Namespace) -> dict[str, Any]:
    settings = cdc_formats.Settings.from_args(
        ["--latency-rows", str(args.rows), "--rates", str(args.rate), "--latency-warmup", str(args.warmup),
         "--latency-seconds", str(args.seconds), "--formats", "avro", "--trigger", args.trigger]
    )  # fmt: skip
    run_id, work = uuid.uuid4().hex[:6], Path(tempfile.mkdtemp(prefix="bench-bound-"))
    results: dict[str, Any] = {
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "settings": {k: getattr(args, k) for k in ("rows", "rate", "warmup", "seconds", "trigger")},
        "cpus": os.cpu_count(),
        "load_at_start": os.getloadavg(),
        "bounds": [],
    }
    admin = make_admin({"bootstrap.servers": settings.endpoints.kafka_bootstrap_servers})
    config = BenchConfig(endpoints=settings.endpoints, stack_dir=settings.stack_dir)
    with ConnectClient(settings.endpoints.kafka_connect_url) as connect:
        cleanup = cdc_formats.FormatsCleanup(
            config, connect, admin, registry_url=settings.endpoints.schema_registry_url
        )
        pids = StackPids.discover(settings.stack_dir)
        try:
            for bound in (BEFORE, DRIVER_ROWS):
                ctx = cdc_formats.Context(
                    settings, f"{run_id}{len(results['bounds'])}", work, catalog.lookup("products"),
                    connect, pids, cleanup,
                )  # fmt: skip
                logging.info("small-batch bound %d", bound)
                results["bounds"].append(one_bound(ctx, bound))
        finally:
            cleanup.all()
            shutil.rmtree(work, ignore_errors=True)
    results["load_at_end"] = os.getloadavg()
    return results


def render(results: Mapping[str, Any]) -> str:
    s = results["settings"]
    lines = [
        "# A live CDC stream by the bound under which a batch is applied from the driver",
        "",
        f"Run {results['measured_at']}: a {s['rows']:,}-row products table, Avro records, "
        f"{s['rate']:,} row updates/s ({s['warmup']:g} s warm-up, then {s['seconds']:g} s measured), "
        f"ONE driver keeping cache + search + warehouse, trigger {s['trigger']}, `local[2]` on "
        f"{results['cpus']} cores shared with the stack; load {results['load_at_start'][0]:.2f} -> "
        f"{results['load_at_end'][0]:.2f}. `bench/scenarios/live_batch_bound.py`.",
        "",
        "| small-batch bound | view | p50 ms | p99 ms | rows unseen at the end | live batches | on the executors' path "
        "| largest live batch (records) | median live batch |",
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for b in results["bounds"]:
        for view in VIEWS:
            lat = b["rate"][view]
            lines.append(
                f"| {b['small_batch_rows']:,} | {view} | {lat['p50']:,.0f} | {lat['p99']:,.0f} | "
                f"{lat['unseen_at_end']:,} | {b['live_batches']} | {b['live_batches_on_executors']} | "
                f"{b['largest_live_batch_rows']:,} | {b['median_live_batch_rows']:,.0f} |"
            )
    before, after = results["bounds"]
    worst = {b["small_batch_rows"]: max(b["rate"][v]["p99"] for v in VIEWS) for b in (before, after)}
    lines += [
        "",
        f"Worst view p99: {worst[before['small_batch_rows']]:,.0f} ms with the bound at "
        f"{before['small_batch_rows']:,}, {worst[after['small_batch_rows']]:,.0f} ms at "
        f"{after['small_batch_rows']:,} "
        f"(**{worst[before['small_batch_rows']] / worst[after['small_batch_rows']]:.2f}x**). Each batch "
        "(records, ms, path) is in the JSON file.",
        "",
    ]
    return "\n".join(lines)


def parse(argv: Sequence[str] | None = None) -> argparse.Namespace:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    for noisy in ("httpx", "py4j"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rows", type=int, default=20_000, help="rows in the captured table (20,000)")
    parser.add_argument("--rate", type=int, default=2_000, help="row updates per second (2,000)")
    parser.add_argument("--warmup", type=float, default=30.0, help="seconds of load before measuring (30)")
    parser.add_argument("--seconds", type=float, default=60.0, help="seconds measured (60)")
    parser.add_argument("--trigger", default="500ms", help="the driver's trigger (500ms)")
    parser.add_argument("--out", type=Path, default=OUT, help="the results' folder")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    run_start = bench_results.Began()
    args = parse(argv)
    results = run(args)
    bench_results.write(args.out, results, render(results), began=run_start)
    print(render(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
