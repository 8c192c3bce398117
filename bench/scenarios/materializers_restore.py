"""Benchmark: restore a snapshot + catch up vs rebuild the products views from offset 0.

Same data for both: `--records` Debezium-shaped product changes on a fresh 1-partition topic. The
job processes the first (records - tail) of them and is snapshotted; the `tail` arrives; then
(a) restore the snapshot and catch up the tail, and (b) build the views from offset 0 in a fresh
home. Both end states are compared (cache, search, Delta counts) before the times are written to
`bench/results/materializers_restore/latest.{json,md}`. Needs a running stack (`source .stack/env`).
Timing on a shared 2-core machine is noisy: look at the ratio, and re-run before drawing conclusions.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import tempfile
import time
import uuid
from collections.abc import Sequence
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any

from confluent_kafka.admin import NewTopic  # type: ignore[attr-defined]

from bench.harness import results as bench_results
from bench.harness.streaming import run_available_now
from kafkakit.clients import make_admin, make_producer
from materializers.config import RunConfig
from materializers.ops import snapshots
from materializers.runtime.job import Job, JobPlan
from materializers.spark import session as spark_session
from materializers.views.warehouse.delta import query
from shop.products import PRODUCTS

OUT = bench_results.RESULTS / "materializers_restore"


def record(entity: int, lsn: int, rev: int) -> tuple[bytes, bytes]:
    key = {"schema": {"type": "struct"}, "payload": {"id": entity}}
    after = {
        "id": entity,
        "name": f"p{entity} r{rev}",
        "description": f"thing {entity}",
        "price": "1.00",
        "stock": rev,
    }
    payload = {
        "before": None,
        "after": after,
        "source": {"lsn": lsn, "ts_ms": 1_764_000_000_000 + lsn},
        "op": "u",
        "ts_ms": 0,
    }
    return json.dumps(key).encode(), json.dumps({"schema": {}, "payload": payload}).encode()


def produce(bootstrap: str, topic: str, first: int, count: int, entities: int) -> None:
    producer = make_producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
    for n in range(first, first + count):
        key, value = record(n % entities, 10_000 + n, n // entities)
        producer.produce(topic, key=key, value=value)
        producer.poll(0)
    producer.flush(60)


def run_available(spark: Any, plan: JobPlan) -> float:
    return run_available_now(partial(Job, spark, plan), "the job", timeout_s=1800).seconds


def fingerprint(plan: JobPlan) -> dict[str, Any]:
    index = plan.search()
    wh = plan.warehouse()
    return {
        "cache": plan.cache().entities(),
        "search": index.live_documents() if index else {},
        "current": query(wh.current_path, "SELECT entity, position, name FROM t ORDER BY entity"),
        "history_rows": query(wh.history_path, "SELECT count(*) AS n FROM t")[0]["n"],
    }


def render(result: dict[str, Any]) -> str:
    return "\n".join([
        "# Restore from a snapshot + catch-up vs a rebuild from offset 0", "",
        f"{result['records']} records ({result['tail_after_snapshot']} after the snapshot), "
        f"{result['entities']} entities, the products views; seconds.", "",
        "| initial build | snapshot | restore | catch-up | restore + catch-up | rebuild from 0 | views equal |",
        "|---:|---:|---:|---:|---:|---:|---|",
        f"| {result['initial_build_s']} | {result['snapshot_s']} | {result['restore_s']} | {result['catch_up_s']} "
        f"| {result['restore_plus_catch_up_s']} | {result['rebuild_from_0_s']} | {result['views_equal']} |",
        "",
    ])  # fmt: skip


def parse(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--records", type=int, default=20_000)
    parser.add_argument("--tail", type=int, default=1_000, help="records that arrive after the snapshot")
    parser.add_argument("--entities", type=int, default=5_000)
    parser.add_argument("--out", type=Path, default=OUT, help="the results' folder")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    run_start = bench_results.Began()
    args = parse(argv)
    base = RunConfig.from_env()
    bootstrap = base.endpoints.kafka_bootstrap_servers
    topic = f"bench-mat-restore-{uuid.uuid4().hex[:8]}"
    admin = make_admin({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(timeout=30)
    spark = spark_session.build(base.master, "bench-materializers-restore")
    work = Path(tempfile.mkdtemp(prefix="bench-mat-restore-"))
    tag = uuid.uuid4().hex[:6]
    plan = JobPlan.of(PRODUCTS, replace(base, topic=topic, home=work / "a", redis_prefix=f"bench-{tag}-a"))
    fresh = JobPlan.of(PRODUCTS, replace(base, topic=topic, home=work / "b", redis_prefix=f"bench-{tag}-b"))
    try:
        head = args.records - args.tail
        produce(bootstrap, topic, 0, head, args.entities)
        initial_s = run_available(spark, plan)
        began = time.monotonic()
        manifest = snapshots.take(plan)
        snapshot_s = time.monotonic() - began
        produce(bootstrap, topic, head, args.tail, args.entities)
        run_available(spark, plan)  # the views move on past the snapshot (what a restore undoes)
        began = time.monotonic()
        where, found = snapshots.check_restorable(plan, manifest.id)
        snapshots.restore(plan, where, found)
        restore_s = time.monotonic() - began
        catch_up_s = run_available(spark, plan)
        rebuild_s = run_available(spark, fresh)
        same = fingerprint(plan) == fingerprint(fresh)
        result = {
            "records": args.records,
            "tail_after_snapshot": args.tail,
            "entities": args.entities,
            "initial_build_s": round(initial_s, 2),
            "snapshot_s": round(snapshot_s, 2),
            "restore_s": round(restore_s, 2),
            "catch_up_s": round(catch_up_s, 2),
            "restore_plus_catch_up_s": round(restore_s + catch_up_s, 2),
            "rebuild_from_0_s": round(rebuild_s, 2),
            "views_equal": same,
            "machine": {
                "cpus": os.cpu_count(),
                "load_1m": os.getloadavg()[0],
                "python": platform.python_version(),
            },
            "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
        bench_results.write(args.out, result, render(result), began=run_start)
        print(json.dumps(result, indent=2))
        return 0 if same else 1
    finally:
        plan.cache().clear()
        fresh.cache().clear()
        admin.delete_topics([topic, f"{topic}.dlq"])
        spark.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
