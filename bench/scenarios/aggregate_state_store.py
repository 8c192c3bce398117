"""Benchmark (issue 25): the aggregate job on Spark's two state stores, side by side on one topic.

Per simulated minute, G `order.line_added` events (every SKU once; the aggregate scenario's data) go to one
topic, then the real `AggregateJob` on the shop's `sku_per_minute` runs once per store (a driver run
with availableNow, each store its own checkpoint and table), the order of the two alternating per
minute so neither always runs second on a warm JVM:
- `hdfs`: Spark's default HDFSBackedStateStoreProvider (the state in the JVM heap, a delta file per
  batch, a snapshot every few);
- `rocksdb`: RocksDBStateStoreProvider with changelog checkpointing (the state in RocksDB off the heap,
  the batch's changes uploaded as a changelog).
Reported per minute and store: the driver run's wall time, the data batch's trigger time, and the
state rows and memory Spark reports (`stateOperators`). Both tables must be equal at the end.
Results: bench/results/aggregate_state_store/latest.{json,md}. Needs a running stack (`source .stack/env`).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shutil
import tempfile
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from confluent_kafka.admin import NewTopic  # type: ignore[attr-defined]

from bench.harness import results as bench_results
from bench.scenarios import aggregate as ab
from kafkakit.clients import make_admin, make_producer
from materializers.aggregates.declaration import materializer
from materializers.config import RunConfig
from materializers.plan import JobPlan
from materializers.spark import session as spark_session
from shop.sku_per_minute import SKU_PER_MINUTE_VIEW

PROVIDER = "spark.sql.streaming.stateStore.providerClass"
CHANGELOG = "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled"
STORES = {
    "hdfs": {
        PROVIDER: "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider",
        CHANGELOG: "false",
    },
    "rocksdb": {
        PROVIDER: "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider",
        CHANGELOG: "true",
    },
}
OUT = bench_results.RESULTS / "aggregate_state_store"


def run_store(spark: Any, plan: JobPlan, store: str) -> dict[str, Any]:
    for key, value in STORES[store].items():  # read when the query starts (and kept in its checkpoint)
        spark.conf.set(key, value)
    run = ab.stream_minute(spark, plan)
    data = [b for b in run["batches"] if b["rows_in"]]
    return {
        "wall_s": run["wall_s"],
        "data_batch_s": round(sum(b["trigger_ms"] for b in data) / 1000, 2),
        "state_rows_updated": max((b["state_rows_updated"] for b in run["batches"]), default=0),
        "state_memory_mib": max((b["state_memory_mib"] for b in run["batches"]), default=0),
    }


def run_size(spark: Any, base: RunConfig, groups: int, minutes: int, work: Path) -> dict[str, Any]:
    topic = f"bench-stores-{groups}-{uuid.uuid4().hex[:6]}"
    bootstrap = base.endpoints.kafka_bootstrap_servers
    admin = make_admin({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, ab.PARTITIONS, 1)])[topic].result(timeout=30)
    try:
        records, _subject = ab.register(base.endpoints.schema_registry_url, topic)
        producer = make_producer(
            {
                "bootstrap.servers": bootstrap,
                "linger.ms": 50,
                "batch.size": 1_000_000,
                "compression.type": "lz4",
            }
        )
        lines = ab.Lines(producer, topic, records)
        spec = materializer(
            dataclasses.replace(
                SKU_PER_MINUTE_VIEW, source=dataclasses.replace(SKU_PER_MINUTE_VIEW.source, topic=topic)
            )
        )
        plans = {s: JobPlan.of(spec, dataclasses.replace(base, topic=topic, home=work / s)) for s in STORES}
        now = int(time.time() * 1000)
        t0 = now - now % ab.MINUTE_MS - (minutes + 30) * ab.MINUTE_MS  # the past: never beyond max_ahead
        per_minute = []
        for m in range(minutes):
            lines.minute(t0 + m * ab.MINUTE_MS, m, groups)
            order = list(STORES) if m % 2 == 0 else list(reversed(STORES))
            row: dict[str, Any] = {"minute": m + 1, "order": order}
            row |= {store: run_store(spark, plans[store], store) for store in order}
            row["wall_ratio_rocksdb_to_hdfs"] = round(row["rocksdb"]["wall_s"] / row["hdfs"]["wall_s"], 3)
            print(json.dumps(row), flush=True)
            per_minute.append(row)
        tables = ab.same_tables(spark, ab.table_path(plans["hdfs"]), ab.table_path(plans["rocksdb"]))
        return {"groups": groups, "minutes": per_minute, "tables_equal": tables["equal"]}
    finally:
        admin.delete_topics([topic, f"{topic}.dlq"])
        shutil.rmtree(work, ignore_errors=True)


def render_markdown(res: dict[str, Any]) -> str:
    lines = [
        "# Aggregate view: HDFS-backed vs RocksDB state store (issue 25)",
        "",
        f"Measured {res['measured_at']} on {os.cpu_count()} CPUs (shared), `local[2]`, driver memory "
        f"{res['driver_memory']}; load before {res['load_at_start']}, after {res['load_at_end']}. The shop's "
        "`sku_per_minute`, G events per simulated minute, one driver run per minute and store.",
        "",
        "| groups | minute | hdfs wall s | rocksdb wall s | rocksdb / hdfs | hdfs state MiB (heap) | "
        "rocksdb state MiB | state rows updated |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for size in res["sizes"]:
        for m in size["minutes"]:
            h, r = m["hdfs"], m["rocksdb"]
            lines.append(
                f"| {size['groups']:,} | {m['minute']} | {h['wall_s']} | {r['wall_s']} | "
                f"{m['wall_ratio_rocksdb_to_hdfs']} | {h['state_memory_mib']} | {r['state_memory_mib']} | "
                f"{h['state_rows_updated']:,} |"
            )
    lines += [
        "",
        "Per size: "
        + "; ".join(
            f"{s['groups']:,} groups measured {s.get('measured_at', res['measured_at'])}, tables equal "
            f"{s['tables_equal']}"
            for s in res["sizes"]
        )
        + ".",
        "",
    ]
    return "\n".join(lines) + "\n"


def parse(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--groups", type=int, action="append", help="distinct groups (repeat; default 100k)")
    parser.add_argument("--minutes", type=int, default=4, help="simulated minutes (default 4)")
    parser.add_argument("--driver-memory", default="6g", help="the driver JVM's heap (default 6g)")
    parser.add_argument("--out", type=Path, default=OUT, help="the results' folder")
    parser.add_argument("--keep", action="store_true", help="keep the other sizes already in --out")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    run_start = bench_results.Began()
    args = parse(argv)
    os.environ["PYSPARK_SUBMIT_ARGS"] = f"--driver-memory {args.driver_memory} pyspark-shell"
    base = dataclasses.replace(RunConfig.from_env(), master="local[2]")
    sizes = args.groups or [100_000]
    earlier = bench_results.previous(args.out).get("sizes", []) if args.keep else []
    res: dict[str, Any] = {
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "driver_memory": args.driver_memory,
        "load_at_start": [round(x, 2) for x in os.getloadavg()],
        "sizes": [s for s in earlier if s["groups"] not in sizes],
    }
    spark = spark_session.build(base.master, "bench-aggregate-state-store")
    try:
        for groups in sizes:
            work = Path(tempfile.mkdtemp(prefix="bench-stores-"))
            found = run_size(spark, base, groups, args.minutes, work)
            res["sizes"].append(
                {**found, "measured_at": res["measured_at"], "load_at_start": res["load_at_start"]}
            )
    finally:
        spark.stop()
    res["load_at_end"] = [round(x, 2) for x in os.getloadavg()]
    bench_results.write(args.out, res, render_markdown(res), began=run_start)
    print(render_markdown(res))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
