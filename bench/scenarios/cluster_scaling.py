"""Benchmark: the same two workloads on the single-node stack and on the cluster topology, in one run.

`python -m bench run cluster_scaling [--size quick]` with both stacks running (`make up`, `make up-cluster`); it
reads their endpoints from `.stack/env` and `.stack-cluster/env` itself (`--single-env`,
`--cluster-env`). Results: bench/results/cluster_scaling/latest.{json,md} (`--quick`: small
sizes, a smoke run, not numbers to quote).

Measured per side, single first, then cluster, one workload after the other:
1. Event store appends (bench/scenarios/eventstore.py's machinery): a store of `Plan.partitions` partitions
   created on the side's brokers with the brokers' default replication factor (RF 1 on one broker; RF 3
   with min.insync 2 on the cluster: the processor's transactions wait for acks=all from two replicas),
   one processor process, then per round one synchronous client (p50/p99 `execute` latency) and
   `Plan.clients` pipelined clients (commands/s). The shop's Order commands decide one event each.
2. Materializer backfill of the products cache (bench/scenarios/materializers.py's machinery): `--records`
   Debezium-shaped JSON records produced to a 2-partition topic (default RF again), then read from
   offset 0 by the products materializer keeping the Redis `cache` view; Spark `local[*]` on the single
   side, the cluster's standalone master (2 workers of 1 core, executors in the workers' venv) on the
   other.

Assumptions: both stacks share this machine's cores, so the ratios measure what the cluster's layout
costs (replication, network hops, task scheduling, executor Python start-up), not a speed-up. Only one
SparkSession can live in a Python process and each side needs its own PYSPARK_PYTHON, so every
(side, workload) pair runs in its own child process (`--side`, `--workload`), which prints one JSON line
the parent collects. Each child deletes the topics, consumer group, Redis keys and temp dirs it made.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from contextlib import suppress
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from bench.harness import results as bench_results
from bench.harness.stack import CLUSTER_ENV, REPO, STACK_DIR

SIDES = ("single", "cluster")
WORKLOADS = ("eventstore", "backfill")
RESULT_PREFIX = "cluster-scaling-result: "
APP_NAME = "bench-cluster-scaling"
# Settings a child must take from its side's env file only, never from the caller's environment.
SIDE_KEYS = ("SPARK_MASTER_URL", "PYSPARK_PYTHON", "MATERIALIZERS_MASTER", "EVENTSTORE_REPLICATION_FACTOR")
CHILD_TIMEOUT_S = 1200
EXECUTORS_TIMEOUT_S = 180


@dataclass(frozen=True, slots=True)
class Sizes:
    quick: bool
    records: int  # backfill records per side

    @classmethod
    def of(cls, quick: bool, records: int | None) -> Sizes:
        return cls(quick, records or (20_000 if quick else 500_000))


# --- the children: one (side, workload) each -------------------------------------------------------


def state_pids(env_file: Path, pattern: str) -> list[int]:
    """Pids of a stack's processes from devstack's pid files next to its env file (kafka*.pid: its brokers)."""
    pids = []
    for pid_file in sorted((env_file.parent / "pids").glob(pattern)):
        with suppress(OSError, ValueError):
            pids.append(int(pid_file.read_text().split()[0]))
    return pids


def spark_apps(env_file: Path) -> list[str] | None:
    """The applications the stack's Spark master is running now (None: no master, or no answer): another
    application holding the workers' cores delays this run's executors and shares its CPUs."""
    from devstack import spark_cluster

    with suppress(OSError, ValueError, KeyError):
        ports = json.loads((env_file.parent / "ports.json").read_text())
        state = spark_cluster.master_state(int(ports["spark_master_ui"])) or {}
        apps = state.get("activeapps")
        return [str(a.get("name")) for a in apps] if isinstance(apps, list) else None
    return None


def placement(bootstrap: str, topic: str) -> dict[str, int]:
    """The replication factor the brokers gave `topic` (its first partition's replicas) and how many
    brokers the cluster's metadata lists as alive."""
    from kafkakit.clients import make_admin

    metadata = make_admin({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=30)
    return {
        "replication_factor": len(metadata.topics[topic].partitions[0].replicas),
        "live_brokers": len(metadata.brokers),
    }


def delete_group(admin: Any, group: str, timeout_s: float = 30) -> None:
    """Delete a consumer group once its last member has left (until then the broker refuses: non-empty)."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            admin.delete_consumer_groups([group])[group].result(30)
            return
        except Exception:
            if time.monotonic() > deadline:
                print(
                    f"consumer group {group} left behind: still not empty after {timeout_s:.0f} s", flush=True
                )
                return
            time.sleep(1)


def eventstore_side(quick: bool, env_file: Path) -> dict[str, Any]:
    """Per round: one synchronous client (latency), then the pipelined clients (throughput)."""
    from bench.harness.probes import cpu_seconds
    from bench.scenarios.eventstore import (
        await_group,
        combined,
        ours_worker,
        plan_for,
        processor_main,
        run_clients,
        summarize,
    )
    from eventstore import EventStore, StoreConfig
    from eventstore.topics import specs
    from kafkakit.clients import make_admin
    from shop.order import ORDER

    plan = plan_for(quick)
    run_id = uuid.uuid4().hex[:8]
    # replication_factor None: the brokers' default.replication.factor (1 here, 3 on the cluster).
    config = replace(
        StoreConfig.from_env(),
        name=f"bench-scale-{run_id}",
        partitions=plan.partitions,
        replication_factor=None,
        reply_timeout_s=60,
    )
    EventStore(config, ORDER).init()
    topics = [t.name for t in specs(config)]
    ctx = mp.get_context("spawn")
    stop, timings_out = ctx.Event(), ctx.Queue()
    processor = ctx.Process(
        target=processor_main, args=(config, "scale0", plan.processor_batch, None, stop, timings_out)
    )
    processor.start()
    samples: dict[str, list[dict[str, Any]]] = {"sync_1": [], "pipelined": []}
    began = time.monotonic()
    try:
        await_group(config, 1)
        run_clients(ours_worker, lambda i: (config, f"warm{i}", 2, 1), 1)
        watched = {"broker": state_pids(env_file, "kafka*.pid"), "processor": [processor.pid or 0]}
        scenarios: dict[str, Callable[[int], dict[str, Any]]] = {
            "sync_1": lambda r: run_clients(
                ours_worker, lambda i: (config, f"s{r}-{i}", plan.orders_single, 1), 1
            ),
            "pipelined": lambda r: run_clients(
                ours_worker,
                lambda i: (config, f"q{r}-{i}", plan.orders_pipelined_per_client, plan.window),
                plan.clients,
            ),
        }
        for r in range(plan.rounds):
            for name, scenario in scenarios.items():
                before = cpu_seconds(watched)
                result = scenario(r)
                after = cpu_seconds(watched)
                result["server_cpu_s"] = {k: after[k] - before[k] for k in watched}
                samples[name].append(result)
                print(f"round {r} {name:10s} {result['events_per_s']:9.1f} commands/s", flush=True)
        placed = placement(config.bootstrap_servers, topics[0])
    finally:
        stop.set()
        timings = combined(timings_out, [processor])
        admin = make_admin({"bootstrap.servers": config.bootstrap_servers})
        admin.delete_topics(topics)
        delete_group(admin, config.processor_group)
    batches = max(1, timings.get("batches", 0))
    return {
        "plan": {**asdict(plan), "processors": 1},
        **placed,
        "seconds": round(time.monotonic() - began, 1),
        "sync_1": summarize(samples["sync_1"]),
        "pipelined": summarize(samples["pipelined"]),
        "processor_per_batch_ms": {
            k: round(1000 * v / batches, 3) for k, v in timings.items() if k.endswith("_s")
        },
        "commands_per_batch": round(timings.get("commands", 0) / batches, 2),
    }


def await_executors(spark: Any, wanted: int, timeout_s: float) -> float:
    """Seconds until `wanted` executors have registered with the driver (the count includes the driver)."""
    began = time.monotonic()
    status = spark.sparkContext._jsc.sc().getExecutorMemoryStatus
    while status().size() - 1 < wanted:
        if time.monotonic() - began > timeout_s:
            raise RuntimeError(
                f"only {status().size() - 1} of {wanted} executors registered in {timeout_s:.0f} s: are the "
                "Spark workers alive, and are their cores held by another application?"
            )
        time.sleep(0.2)
    return time.monotonic() - began


def backfill_side(side: str, records: int) -> dict[str, Any]:
    """Produce `records` snapshot records, then backfill them into the cache view on this side's Spark."""
    from confluent_kafka.admin import NewTopic  # type: ignore[attr-defined]

    from bench.scenarios import materializers as mb
    from kafkakit.clients import make_admin
    from materializers.config import DRIVER_ROWS, RunConfig
    from materializers.runtime.job import JobPlan
    from materializers.spark import session as spark_session
    from shop.products import PRODUCTS

    # The cluster's master comes from its env file; executors run PYSPARK_PYTHON (the workers' venv),
    # which the parent put in this process's environment before any session exists.
    master = os.environ["SPARK_MASTER_URL"] if side == "cluster" else "local[*]"
    base = replace(RunConfig.from_env(), master=master)
    bootstrap = base.endpoints.kafka_bootstrap_servers
    tag = uuid.uuid4().hex[:6]
    topic = f"bench-scale-backfill-{tag}"
    work = Path(tempfile.mkdtemp(prefix="bench-scale-"))
    admin = make_admin({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 2)])[topic].result(timeout=30)  # the brokers' default RF
    prefix = f"bench-scale-{tag}"
    result: dict[str, Any] = {"master": master, "records": records, "topic_partitions": 2}
    try:
        result.update(placement(bootstrap, topic))
        print(f"producing {records} records to {topic} ...", flush=True)
        result["produce_seconds"] = round(mb.produce_snapshot(bootstrap, topic, records), 2)
        began = time.monotonic()
        spark = spark_session.build(master, APP_NAME)
        result["session_seconds"] = round(time.monotonic() - began, 2)
        try:
            if side == "cluster":
                from devstack.config import CLUSTER

                wanted = CLUSTER.spark_workers
                result["executors_seconds"] = round(await_executors(spark, wanted, EXECUTORS_TIMEOUT_S), 2)
            result["default_parallelism"] = spark.sparkContext.defaultParallelism
            plan = JobPlan.of(
                PRODUCTS,
                replace(
                    base,
                    topic=topic,
                    home=work / "cache",
                    redis_prefix=prefix,
                    views=("cache",),
                    # the materializers scenario's records / 8 per batch, but always above the driver's bound
                    # (auto: DRIVER_ROWS on a cluster): a smaller batch is applied from the driver, and
                    # the executors' path is the one measured.
                    max_offsets_per_trigger=max(records // 8, (base.small_batch_rows or DRIVER_ROWS) + 1),
                ),
            )
            print(f"backfill -> cache on {master} ...", flush=True)
            result.update(mb.backfill(spark, plan, records))
            result["view_rows"] = mb.view_size(plan, "cache")
        finally:
            spark.stop()
    finally:
        mb.unlink_prefix(base.endpoints.redis_url, prefix)
        admin.delete_topics([topic, f"{topic}.dlq"])
        shutil.rmtree(work, ignore_errors=True)
    batches = result.get("batch_seconds") or [0.0]
    result["first_batch_seconds"] = batches[0]
    result["later_batches_median_seconds"] = round(statistics.median(batches[1:]), 2) if batches[1:] else None
    return result


def child_main(side: str, workload: str, sizes: Sizes, env_file: Path) -> int:
    signal.signal(signal.SIGTERM, _exit_on_sigterm)  # run the finally blocks: clean up, then exit
    loads, apps = os.getloadavg(), spark_apps(env_file)
    if workload == "eventstore":
        result = eventstore_side(sizes.quick, env_file)
    else:
        result = backfill_side(side, sizes.records)
    result["load_average_at_start"] = [round(x, 2) for x in loads]
    result["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]
    # Other Spark applications at start and end (this run's own backfill has stopped by then): a
    # neighbour's work is in these numbers.
    result["spark_apps_at_start"], result["spark_apps_at_end"] = apps, spark_apps(env_file)
    print(RESULT_PREFIX + json.dumps(result), flush=True)
    return 0


# --- the parent: run the children, compare, write ------------------------------------------------


def read_env(env_file: Path) -> dict[str, str]:
    """A stack's `export KEY=value` lines (devstack writes them)."""
    if not env_file.is_file():
        raise SystemExit(
            f"{env_file} is missing: start that stack first (`make up` for the single node, "
            "`make up-cluster` for the cluster topology), or name its env file"
        )
    from devstack.stack import read_env as parse

    return parse(env_file)


def child_env(side_env: Mapping[str, str], every_key: set[str]) -> dict[str, str]:
    """This process's environment without either stack's settings, plus the side's own."""
    kept = {k: v for k, v in os.environ.items() if k not in every_key and k not in SIDE_KEYS}
    return {**kept, **side_env}


def run_child(argv: list[str], env: dict[str, str]) -> dict[str, Any]:
    """Run one child in its own process group, echo its output, return its result line."""
    proc = subprocess.Popen(
        argv, env=env, cwd=REPO, stdout=subprocess.PIPE, text=True, bufsize=1, start_new_session=True
    )

    def stop() -> None:
        # SIGTERM lets the child delete what it made (its finally blocks); whatever of its group is left
        # after that (clients, the Spark JVM) is killed.
        with suppress(ProcessLookupError):
            os.kill(proc.pid, signal.SIGTERM)
        with suppress(subprocess.TimeoutExpired):
            proc.wait(90)
        with suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)

    found: dict[str, Any] | None = None
    timer = threading.Timer(CHILD_TIMEOUT_S, stop)
    timer.start()
    assert proc.stdout is not None
    try:
        for line in proc.stdout:
            if line.startswith(RESULT_PREFIX):
                found = json.loads(line[len(RESULT_PREFIX) :])
            else:
                print("  " + line, end="", flush=True)
        code = proc.wait(60)
    except BaseException:
        stop()
        raise
    finally:
        timer.cancel()
    if code != 0 or found is None:
        raise RuntimeError(
            f"{' '.join(argv[2:6])} failed (exit {code}; stopped after {CHILD_TIMEOUT_S} s if it ran that "
            "long); its output is above"
        )
    return found


def ratio(cluster: float | None, single: float | None) -> float | None:
    return round(cluster / single, 3) if cluster is not None and single else None


def compare(results: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows of the summary table: (workload, measure, single, cluster, cluster / single)."""
    rows: list[dict[str, Any]] = []

    def row(workload: str, measure: str, get: Callable[[dict[str, Any]], float | None]) -> None:
        single, cluster = get(results[workload]["single"]), get(results[workload]["cluster"])
        rows.append(
            {
                "workload": workload,
                "measure": measure,
                "single": single,
                "cluster": cluster,
                "ratio": ratio(cluster, single),
            }
        )

    if "eventstore" in results:
        # One event per command (CreateOrder -> Created, AddLine -> LineAdded): the two rates are equal.
        row("eventstore", "pipelined commands/s", lambda r: round(r["pipelined"]["events_per_s"], 1))
        row("eventstore", "pipelined events/s", lambda r: round(r["pipelined"]["events_per_s"], 1))
        row("eventstore", "1 sync client commands/s", lambda r: round(r["sync_1"]["events_per_s"], 1))
        row("eventstore", "1 sync client p50 ms", lambda r: round(r["sync_1"]["p50_ms"], 2))
        row("eventstore", "1 sync client p99 ms", lambda r: round(r["sync_1"]["p99_ms"], 2))
        row(
            "eventstore",
            "broker CPU ms/event (pipelined)",
            lambda r: r["pipelined"].get("broker_cpu_ms_per_event"),
        )
        row("eventstore", "processor flush ms/batch", lambda r: r["processor_per_batch_ms"].get("flush_s"))
        row("eventstore", "processor commit ms/batch", lambda r: r["processor_per_batch_ms"].get("commit_s"))
    if "backfill" in results:
        row("backfill", "rows/s", lambda r: r["rows_per_s"])
        row("backfill", "backfill seconds", lambda r: r["seconds"])
        row("backfill", "first batch seconds", lambda r: r["first_batch_seconds"])
        row("backfill", "later batches median seconds", lambda r: r["later_batches_median_seconds"])
        row("backfill", "session start seconds", lambda r: r["session_seconds"])
        row("backfill", "produce seconds", lambda r: r["produce_seconds"])
    return rows


def _txn_ms(side: dict[str, Any]) -> float:
    """The processor's transaction per batch: flush (acks) + send_offsets + commit, in ms."""
    per_batch = side["processor_per_batch_ms"]
    return round(float(sum(per_batch.get(k, 0.0) for k in ("flush_s", "offsets_s", "commit_s"))), 1)


def analysis(results: dict[str, dict[str, Any]]) -> list[str]:
    """Where the cluster's extra time goes, from this run's own numbers where they tell."""
    lines = [
        "## What this measures",
        "",
        "Both stacks run on the same 2 cores, the idle one's processes included, so the cluster cannot be "
        "faster here: the ratios measure what the cluster's layout costs (replication, network hops between "
        "its processes, task scheduling, executor start-up), not a speed-up. A speed-up would need the "
        "cluster's processes on machines of their own; nothing here says how large it would be.",
        "",
    ]
    if "eventstore" in results:
        s, c = results["eventstore"]["single"], results["eventstore"]["cluster"]
        lines.append(
            f"- Event store: a processor batch is one Kafka transaction; flush + send_offsets + commit took "
            f"{_txn_ms(s)} ms per batch on RF {s['replication_factor']} and {_txn_ms(c)} ms on RF "
            f"{c['replication_factor']} (acks=all waits until min.insync replicas have fetched the records, and "
            "the commit markers are replicated too): that difference is the replication wait and the hops "
            f"between broker processes. Decide + encode (handle) took {s['processor_per_batch_ms'].get('handle_s')} "
            f"vs {c['processor_per_batch_ms'].get('handle_s')} ms per batch: the same Python work, slowed only by "
            "the shared CPUs. A synchronous client waits one transaction per command, so its latency shows the "
            f"replication wait directly (decide -> reply p50 {s['sync_1'].get('decide_to_reply_ms_p50', 0):.1f} vs "
            f"{c['sync_1'].get('decide_to_reply_ms_p50', 0):.1f} ms); pipelined clients spread it over a batch. "
            "Broker CPU per event sums every broker: the cluster's includes the followers copying each record."
        )
    if "backfill" in results:
        s, c = results["backfill"]["single"], results["backfill"]["cluster"]
        lines.append(
            f"- Backfill: `{c['master']}` schedules each task through the standalone master onto "
            f"{c.get('default_parallelism', '?')} executor cores, where `{s['master']}` runs them in the driver's "
            f"JVM on {s.get('default_parallelism', '?')} threads. The executors registered "
            f"{c.get('executors_seconds', '?')} s after the session was built (outside the backfill time; a wait for "
            "cores another application holds counts there). "
            f"First batch {s['first_batch_seconds']} vs {c['first_batch_seconds']} s, later batches "
            f"{s['later_batches_median_seconds']} vs {c['later_batches_median_seconds']} s (median): the first "
            "batch's excess over the later ones is mostly start-up (JIT, the executors' Python workers in the "
            "workers' venv); the later batches' ratio is the steady per-record cost of scheduling, shipping "
            "batches between JVMs and fewer cores. Producing the input (RF "
            f"{s['replication_factor']} vs {c['replication_factor']}, acks=all) is not part of the backfill time: "
            f"{s['produce_seconds']} vs {c['produce_seconds']} s."
        )
    return [*lines, ""]


def render(report: dict[str, Any]) -> str:
    r = report["results"]
    lines = [
        f"# Cluster scaling: single node vs cluster topology ({report['measured_at']})",
        "",
        f"{report['machine']['cpus']} CPUs shared by BOTH stacks; commit {report['git_commit']}; "
        f"{'quick sizes (a smoke run, not numbers to quote)' if report['sizes']['quick'] else 'full size'}; "
        f"load average (1/5/15 min) {report['machine']['load_average_before']} before, "
        f"{report['machine']['load_average_after']} after; run took {report['seconds']} s.",
        "",
    ]
    if "eventstore" in r:
        s, c = r["eventstore"]["single"], r["eventstore"]["cluster"]
        plan = s["plan"]
        lines.append(
            f"- Event store: {plan['clients']} pipelined clients, {s['pipelined']['events']:,} commands in all "
            f"(window {plan['window']}), and 1 synchronous client, {s['sync_1']['events']:,} commands; "
            f"{plan['rounds']} round(s), median; {plan['partitions']} partitions, 1 processor; "
            f"RF {s['replication_factor']} vs {c['replication_factor']} (the brokers' default; acks=all)."
        )
    if "backfill" in r:
        s, c = r["backfill"]["single"], r["backfill"]["cluster"]
        lines.append(
            f"- Backfill: {s['records']:,} Debezium JSON records (2 partitions) into the Redis cache view, "
            f"{s['batches']} vs {c['batches']} micro-batches; Spark `{s['master']}` vs `{c['master']}`."
        )
    for workload, sides in r.items():
        seen = sorted(
            {a for x in ("spark_apps_at_start", "spark_apps_at_end") for a in sides["cluster"].get(x) or ()}
            - {APP_NAME}  # this run's own session, if the master has not noticed its stop yet
        )
        if seen:
            lines.append(
                f"- **Not a quiet run**: other Spark applications ({', '.join(seen)}) were on the cluster's master "
                f"around the {workload} run; their work (and any fault injection) is in its cluster numbers."
            )
        cluster = sides["cluster"]
        if cluster.get("live_brokers", 0) < cluster.get("replication_factor", 0):
            lines.append(
                f"- **Not a quiet run**: only {cluster['live_brokers']} of the cluster's brokers were alive when "
                f"the {workload} run checked (RF {cluster['replication_factor']}): a failover is in its numbers."
            )
    lines += [
        "",
        "| workload | measure | single | cluster | cluster / single |",
        "|---|---|---:|---:|---:|",
        *(
            f"| {x['workload']} | {x['measure']} | {x['single']} | {x['cluster']} | {x['ratio']} |"
            for x in report["comparison"]
        ),
        "",
        *analysis(r),
    ]
    return "\n".join(lines)


def _exit_on_sigterm(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


def parent_main(args: argparse.Namespace, sizes: Sizes) -> int:
    run_start = bench_results.Began()
    signal.signal(signal.SIGTERM, _exit_on_sigterm)  # a running child is stopped and cleans up (run_child)
    envs = {"single": read_env(args.single_env), "cluster": read_env(args.cluster_env)}
    env_files = {"single": args.single_env, "cluster": args.cluster_env}
    if "SPARK_MASTER_URL" not in envs["cluster"]:
        raise SystemExit(
            f"{args.cluster_env} names no SPARK_MASTER_URL: is it the cluster topology's env file?"
        )
    every_key = set(envs["single"]) | set(envs["cluster"])
    loads_before = [round(x, 2) for x in os.getloadavg()]
    began = time.monotonic()
    results: dict[str, dict[str, Any]] = {}
    for workload in args.workload or WORKLOADS:
        results[workload] = {}
        for side in SIDES:
            print(f"=== {workload} on {side} ===", flush=True)
            argv = [sys.executable, "-m", "bench.scenarios.cluster_scaling", "--side", side, "--workload", workload,
                    "--env-file", str(env_files[side]), "--records", str(sizes.records)]  # fmt: skip
            if sizes.quick:
                argv.append("--quick")
            results[workload][side] = run_child(argv, child_env(envs[side], every_key))
    report = {
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "git_commit": bench_results.commit()["commit"],
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "platform": platform.platform(),
            "load_average_before": loads_before,
            "load_average_after": [round(x, 2) for x in os.getloadavg()],
        },
        "sizes": asdict(sizes),
        "stacks": {
            side: {
                "env_file": str(env_files[side]),
                "kafka_bootstrap_servers": envs[side].get("KAFKA_BOOTSTRAP_SERVERS"),
                "spark_master": envs[side].get("SPARK_MASTER_URL", "local[*]"),
            }
            for side in SIDES
        },
        "seconds": round(time.monotonic() - began, 1),
        "results": results,
    }
    report["comparison"] = compare(results)
    text = render(report)
    bench_results.write(args.out, report, text, began=run_start)
    print(text)
    return 0


def parse(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--quick", action="store_true", help="small sizes (20k records; the eventstore bench's quick plan)"
    )
    parser.add_argument("--records", type=int, help="backfill records per side (500,000; quick 20,000)")
    parser.add_argument(
        "--workload", action="append", choices=WORKLOADS, help="run just these (default: both)"
    )
    parser.add_argument(
        "--single-env", type=Path, default=STACK_DIR / "env", help="the single-node stack's env file"
    )
    parser.add_argument(
        "--cluster-env",
        type=Path,
        default=CLUSTER_ENV,
        help="the cluster topology's env file",
    )
    parser.add_argument(
        "--out", type=Path, default=bench_results.RESULTS / "cluster_scaling", help="the results' folder"
    )
    parser.add_argument("--side", choices=SIDES, help=argparse.SUPPRESS)  # a child's: one side, one workload
    parser.add_argument("--env-file", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.side and (not args.workload or len(args.workload) != 1 or args.env_file is None):
        parser.error("--side needs exactly one --workload and --env-file")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse(argv)
    sizes = Sizes.of(args.quick, args.records)
    if args.side:
        return child_main(args.side, args.workload[0], sizes, args.env_file)
    return parent_main(args, sizes)


if __name__ == "__main__":
    raise SystemExit(main())
