"""Benchmark: reading one live-sized batch with Spark's Kafka source, fetch.max.wait.ms 500 (Kafka's
default) vs 10 (the materializers' setting, materializers/job.py SOURCE_FETCH).

A micro-batch's reader asks for offsets that hold no record: a transaction's commit marker (the event
store appends in Kafka transactions) or the end of its range. The broker holds such an empty fetch
for fetch.max.wait.ms before answering. Two topics, `--records` records each over `--partitions`
partitions: one written plainly (as Connect writes CDC records), one in transactions of 10 records
(as the event store appends). Each read is a Spark batch query over the whole topic brought to the
driver as Arrow (what a small micro-batch does), repeated `--reads` times per setting, settings
interleaved; medians in ms. Results: bench/results/kafka-source-fetch.json + .md. Needs `make up`.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from confluent_kafka.admin import NewTopic  # type: ignore[attr-defined]

from kafkakit.clients import make_admin, make_producer
from materializers import spark_session
from materializers.config import RunConfig

OUT = Path(__file__).parent / "results" / "kafka-source-fetch.json"
SETTINGS = {"kafka default (500 ms)": "500", "materializers (10 ms)": "10"}


def fill(bootstrap: str, topic: str, records: int, partitions: int, transactional: bool) -> None:
    config: dict[str, Any] = {"bootstrap.servers": bootstrap}
    if transactional:
        config["transactional.id"] = f"bench-fetch-{uuid.uuid4().hex[:6]}"
    producer = make_producer(config)
    if transactional:
        producer.init_transactions()
    for start in range(0, records, 10):
        if transactional:
            producer.begin_transaction()
        for n in range(start, min(start + 10, records)):
            producer.produce(topic, key=str(n).encode(), value=b'{"n": %d}' % n, partition=n % partitions)
        if transactional:
            producer.commit_transaction()
    producer.flush()


def read_ms(spark: Any, bootstrap: str, topic: str, wait_ms: str, reads: int) -> list[float]:
    frame = (
        spark.read.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("endingOffsets", "latest")
        .option("kafka.fetch.max.wait.ms", wait_ms)
        .load()
        .select("key", "value", "topic", "partition", "offset")
    )
    times = []
    for _ in range(reads):
        began = time.perf_counter()
        frame.toArrow()
        times.append((time.perf_counter() - began) * 1000)
    return times


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--records", type=int, default=60)
    parser.add_argument("--partitions", type=int, default=3)
    parser.add_argument("--reads", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    bootstrap = RunConfig.from_env().endpoints.kafka_bootstrap_servers
    tag = uuid.uuid4().hex[:6]
    topics = {
        "plain (CDC-like)": f"bench-fetch-plain-{tag}",
        "transactional (event store)": f"bench-fetch-txn-{tag}",
    }
    admin = make_admin({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(t, args.partitions, 1) for t in topics.values()]).values():
        future.result(timeout=30)
    try:
        for kind, topic in topics.items():
            fill(
                bootstrap,
                topic,
                args.records,
                args.partitions,
                transactional=kind.startswith("transactional"),
            )
        spark = spark_session.build("local[2]", "bench-kafka-source-fetch")
        samples: dict[str, dict[str, list[float]]] = {k: {s: [] for s in SETTINGS} for k in topics}
        for kind, topic in topics.items():
            read_ms(spark, bootstrap, topic, "10", 2)  # the JVM's first reads: not measured
            for _ in range(args.rounds):
                for setting, wait_ms in SETTINGS.items():
                    samples[kind][setting] += read_ms(spark, bootstrap, topic, wait_ms, args.reads)
        spark.stop()
    finally:
        admin.delete_topics(list(topics.values()), operation_timeout=30)
    medians = {k: {s: round(statistics.median(v)) for s, v in by.items()} for k, by in samples.items()}
    res = {
        "measured_at": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "machine": f"{os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}",
        "records": args.records,
        "partitions": args.partitions,
        "reads_per_setting": args.reads * args.rounds,
        "median_ms": medians,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(res, indent=2))
    lines = ["# Spark's Kafka source: one live-sized batch to the driver, fetch.max.wait.ms 500 vs 10", "",
             f"Measured {res['measured_at']} ({res['machine']}): {args.records} records over {args.partitions} "
             f"partitions, {res['reads_per_setting']} reads per setting, interleaved; median ms.", "",
             "| topic | " + " | ".join(SETTINGS) + " | ratio |", "|---|" + "---:|" * (len(SETTINGS) + 1)]  # fmt: skip
    for kind, by in medians.items():
        default, ours = (by[s] for s in SETTINGS)
        lines.append(f"| {kind} | {default} | {ours} | {default / max(ours, 1):.1f}x |")
    args.out.with_suffix(".md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
