"""Benchmark: recovery of a materializer driver after `kill -9`, the defaults against the old defaults.

A real Postgres table captured by a real Debezium connector is updated at `--rate` rows/s (default
50, the demo's live rate) while one driver keeps the products materializer's three views (cache,
search, warehouse). After `--warmup` seconds the driver is killed with SIGKILL (its JVM too) and
started again at once, from its checkpoint. Measured per round, from the kill:
- `recovery_s`: until the cache shows a row committed AFTER the kill (only the new driver wrote it);
- `caught_up_s`: until the checkpoint has committed every record written before the restart;
- the restart's phases from the driver's timeline (`materializers.runtime.timeline`): process start, Spark
  session, query started, first batch committed, and the first batch's steps.
Variants, interleaved round by round on the same table and load:
- `defaults`: what a user gets (the JVM class archive, small batches applied from the driver, the
  driver's `quick` profile: C1 only, G1);
- `old_defaults`: the JVM class archive off (`MATERIALIZERS_JVM_CACHE=off`) and every batch through
  the executors (`--small-batch-rows 0`), as before issue 18;
- with `--with live_jit`: the defaults but the `live` profile (C2 too), the shorter warm batches
  it buys against the restart it costs.
Targets (issue 18, 2 cores, stack running): recovery <= 15 s, caught up <= 20 s.
Results: bench/results/materializers_recovery/latest.{json,md}. Needs a running stack (`make up`).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any

import psycopg

from bench.harness import results as bench_results
from bench.scenarios.materializers import (
    PacedUpdates,
    Prober,
    _wait_until,
    cache_stamps,
    captured_table,
    unlink_prefix,
)
from cdc.connect_client import ConnectClient
from cdc.connector_spec import DEFAULT_FORMAT
from cdc.preflight import run_preflight
from cdc.slots import drop_slot
from materializers.config import RunConfig
from materializers.ops import lag
from materializers.runtime import checkpoint, timeline
from materializers.runtime.job import JobPlan
from shop.products import PRODUCTS

OUT = bench_results.RESULTS / "materializers_recovery"
RECOVERY_TARGET_S, CAUGHT_UP_TARGET_S = 15.0, 20.0


@dataclass(frozen=True)
class Variant:
    name: str
    env: dict[str, str]
    flags: tuple[str, ...]


VARIANTS = (
    Variant("defaults", {}, ()),
    Variant(
        "old_defaults",
        {"MATERIALIZERS_JVM_CACHE": "off", "MATERIALIZERS_DRIVER_JIT": "live"},
        ("--small-batch-rows", "0"),
    ),
)
# Experiments (--with NAME): settings tried against the defaults before one becomes a default.
EXPERIMENTS = (Variant("live_jit", {"MATERIALIZERS_DRIVER_JIT": "live"}, ()),)


def start_driver(plan: JobPlan, variant: Variant, log: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    c = plan.config
    args = [sys.executable, "-m", "materializers.cli", "--home", str(c.home), "start", "products",
            "--from", "earliest", "--topic", c.topic, "--table", c.table,
            "--redis-prefix", c.redis_prefix, *variant.flags]  # fmt: skip
    with log.open("ab") as out:
        return subprocess.Popen(
            args, stdout=out, stderr=subprocess.STDOUT, env={**os.environ, **env, **variant.env},
            start_new_session=True,  # its own process group: the kill takes the JVM with it
        )  # fmt: skip


def reached(plan: JobPlan, offsets: checkpoint.Offsets) -> bool:
    """Whether the job's checkpoint has committed everything up to `offsets` (a moving topic's end
    offsets as of a moment: under load the live end is never reached exactly)."""
    return not checkpoint.lag(checkpoint.committed(plan.checkpoint).offsets, offsets)


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(90)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def one_round(plan: JobPlan, variant: Variant, prober: Prober, warmup: float, work: Path,
              env: dict[str, str]) -> dict[str, Any]:  # fmt: skip
    """Start (from the variant's checkpoint), run `warmup` s under load, kill -9, restart, measure."""
    log = work / f"{variant.name}.log"
    backlog = lag.end_offsets(plan.config.endpoints.kafka_bootstrap_servers, plan.topic)
    proc = start_driver(plan, variant, log, env)
    killed = 0.0
    recovered: float | None = None
    caught_up: float | None = None
    try:
        _wait_until(partial(reached, plan, backlog), 300, proc, "the driver never caught up before the kill")
        time.sleep(warmup)
        killed = time.time()
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        proc = start_driver(plan, variant, log, env)
        backlog = lag.end_offsets(plan.config.endpoints.kafka_bootstrap_servers, plan.topic)
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline and (recovered is None or caught_up is None):
            if proc.poll() is not None:
                raise RuntimeError(f"the restarted driver exited ({proc.returncode}); see {log}")
            seen_after = [seen for committed, seen in list(prober.sighted) if committed > killed]
            if recovered is None and seen_after:
                recovered = min(seen_after)
            if caught_up is None and reached(plan, backlog):
                caught_up = time.time()
            time.sleep(0.1)
    finally:
        stop(proc)  # its last progress reaches the timeline as it stops
    entries = timeline.read(plan.job_dir)
    phases = timeline.startup(entries, after=killed)
    steady = timeline.batch_medians(entries, since=killed - warmup / 2, until=killed)  # warm, before the kill
    return {
        "recovery_s": None if recovered is None else round(recovered - killed, 2),
        "caught_up_s": None if caught_up is None else round(caught_up - killed, 2),
        "phases_s": {k: round(v, 2) for k, v in phases.items()},
        "steady_batch_ms": steady.get("total"),
    }


def run(
    base: RunConfig, rows: int, rate: int, rounds: int, warmup: float, work: Path, variants: Sequence[Variant]
) -> dict[str, Any]:

    tag = uuid.uuid4().hex[:6]
    schema = f"bench_rec_{tag}"
    table, spec = captured_table(base, schema, rows, DEFAULT_FORMAT)  # the demo's record format
    connect = ConnectClient(base.endpoints.kafka_connect_url)
    prefix = f"bench-rec-{tag}"
    plans = {
        v.name: JobPlan.of(
            PRODUCTS,
            replace(base, topic=spec.topic_for(table), table=table, home=work / v.name, redis_prefix=f"{prefix}-{v.name}"),
        )
        for v in variants
    }  # fmt: skip
    env = base.endpoints.as_env()
    results: dict[str, list[dict[str, Any]]] = {v.name: [] for v in variants}
    writer = None
    probers: dict[str, Prober] = {}
    try:
        run_preflight(spec)
        connect.apply(spec.name, spec.to_config())
        connect.wait_running(spec.name, timeout=120)
        connect.wait_snapshot_complete(spec.name, timeout=300)
        probers = {name: Prober(name, 0.05, cache_stamps(plan.cache())) for name, plan in plans.items()}
        for p in probers.values():
            threading.Thread(target=p.loop, daemon=True).start()
        writer = PacedUpdates(base.endpoints.pg_dsn, table, rows, rate, list(probers.values()))
        writer.start()
        for n in range(rounds):
            for variant in variants if n % 2 == 0 else reversed(variants):
                outcome = one_round(plans[variant.name], variant, probers[variant.name], warmup, work, env)
                print(f"round {n + 1} {variant.name}: {json.dumps(outcome)}", flush=True)
                results[variant.name].append(outcome)
    finally:
        if writer is not None:
            writer.stop.set()
            writer.join()
        for p in probers.values():
            p.stop.set()
        connect.delete(spec.name)
        drop_slot(base.endpoints.pg_dsn, spec.resolved_slot_name, spec.resolved_publication_name)
        connect.close()
        unlink_prefix(base.endpoints.redis_url, prefix)
        with psycopg.connect(base.endpoints.pg_dsn, autocommit=True) as conn:
            conn.execute(f"drop schema if exists {schema} cascade".encode())
    return {"rounds": results, "medians": {name: medians(runs) for name, runs in results.items()}}


def medians(runs: list[dict[str, Any]]) -> dict[str, float | None]:
    out: dict[str, float | None] = {}
    for key in ("recovery_s", "caught_up_s", "steady_batch_ms"):
        values = [r[key] for r in runs if r[key] is not None]
        out[key] = round(statistics.median(values), 2) if len(values) == len(runs) and values else None
    phases = {k for r in runs for k in r["phases_s"]}
    for key in sorted(phases):
        values = [r["phases_s"][key] for r in runs if key in r["phases_s"]]
        out[f"phase.{key}"] = round(statistics.median(values), 2)
    return out


def render_markdown(res: dict[str, Any]) -> str:
    d, old = res["medians"]["defaults"], res["medians"].get("old_defaults", {})
    lines = ["# Materializer recovery after kill -9", "", f"Measured {res['measured_at']} on {res['machine']}: "
             f"{res['rounds_per_variant']} interleaved rounds per variant, {res['rate']} rows/s of updates, "
             f"kill after {res['warmup_s']:g} s of load; medians.", "",
             "| variant | kill → first view update s | kill → caught up s | session ready s | query started s | first batch committed s | steady batch ms |",
             "|---|---:|---:|---:|---:|---:|---:|"]  # fmt: skip
    for name, m in res["medians"].items():
        lines.append(
            f"| {name} | {m['recovery_s']} | {m['caught_up_s']} | {m.get('phase.session_s')} "
            f"| {m.get('phase.query_s')} | {m.get('phase.batch_s')} | {m.get('steady_batch_ms')} |"
        )
    ratios = (f"old defaults / defaults: recovery {_ratio(old, d, 'recovery_s')}x, caught up "
              f"{_ratio(old, d, 'caught_up_s')}x. ") if old else "The defaults alone (no comparison). "  # fmt: skip
    lines += ["", ratios + f"Targets: recovery ≤ {RECOVERY_TARGET_S:g} s "
              f"({'met' if (d['recovery_s'] or 1e9) <= RECOVERY_TARGET_S else 'MISSED'}), caught up ≤ "
              f"{CAUGHT_UP_TARGET_S:g} s ({'met' if (d['caught_up_s'] or 1e9) <= CAUGHT_UP_TARGET_S else 'MISSED'}).", "",
              "First batch after the restart, median seconds per step (defaults): "
              + ", ".join(f"{k.removeprefix('phase.first_batch.').removesuffix('_s')} {v}" for k, v in d.items()
                          if k.startswith("phase.first_batch.") and k != "phase.first_batch_rows"), ""]  # fmt: skip
    return "\n".join(lines)


def _ratio(old: dict[str, Any], new: dict[str, Any], key: str) -> float | None:
    return round(old[key] / new[key], 2) if new.get(key) and old.get(key) else None


def parse(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--rate", type=int, default=50, help="row updates per second (default 50, the demo's)"
    )
    parser.add_argument("--table-rows", type=int, default=5_000)
    parser.add_argument("--rounds", type=int, default=3, help="rounds per variant, interleaved")
    parser.add_argument("--warmup", type=float, default=20.0, help="seconds of load before the kill")
    parser.add_argument(
        "--with",
        dest="extra",
        action="append",
        default=[],
        choices=[v.name for v in EXPERIMENTS],
        help="also run this experimental variant",
    )
    parser.add_argument(
        "--without",
        action="append",
        default=[],
        choices=[v.name for v in VARIANTS if v.name != "defaults"],
        help="leave out this comparison variant (a quick run measures the defaults alone)",
    )
    parser.add_argument("--out", type=Path, default=OUT, help="the results' folder")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    run_start = bench_results.Began()
    args = parse(argv)
    # A stopped bench still removes its connector, slot and schema (the `finally` in `run`).
    signal.signal(signal.SIGTERM, lambda signum, _frame: sys.exit(128 + signum))
    base = RunConfig.from_env()
    with tempfile.TemporaryDirectory(prefix="bench-recovery-") as work:
        kept = [v for v in VARIANTS if v.name not in args.without]
        variants = [*kept, *(v for v in EXPERIMENTS if v.name in args.extra)]
        res = run(base, args.table_rows, args.rate, args.rounds, args.warmup, Path(work), variants)
    res |= {
        "measured_at": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores",
        "rate": args.rate,
        "warmup_s": args.warmup,
        "rounds_per_variant": args.rounds,
    }
    bench_results.write(args.out, res, render_markdown(res), began=run_start)
    print(render_markdown(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
