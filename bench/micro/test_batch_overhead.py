"""Benchmark: what a live-sized micro-batch costs the driver to decode, before any view writes it.

A live batch of a few dozen records is decoded into Arrow in the driver (materializers/job.py,
`_in_driver`): building the decode (pyspark expressions over py4j, Spark's analysis of each
projection), optimising and planning it, and running it. For such batches those fixed costs are the
batch: commit->view latency is about one and a half to two batch times.

One run, one driver JVM, the same records for every variant: the shop's order events (the example
`orders` materializer, five event types, five writer schemas) over three partitions, read by a
streaming query per variant in batches of `--batch` records (maxOffsetsPerTrigger), each batch
decoded and brought to the driver as Arrow inside `foreachBatch`, as a job does. Variants:
- raw: the records without decoding (the floor: Spark's Kafka source and the Arrow collect);
- the decoder built anew each batch / built once and reused (`OrderDecoder`, `avro_events.EventDecoder`);
- the decode part of the streaming query itself, built once when it starts (what a job does now):
  `foreachBatch` gets the batch decoded and only brings it to the driver;
- with pyspark's call-site capture (Spark's default: `spark.python.sql.dataFrameDebugging.enabled`;
  the materializers' session turns it off) and without. The capture is pyspark's Python wrapper around
  every `functions` call; the bench switches that wrapper's cached flag, which is all the setting
  decides for a classic session.
Two rounds, the variants in order then reversed; median ms per batch over the last half of each
round's `--batches` (the first half warms the JVM). `query plan` is Spark's own planning of the
batch before `foreachBatch` (its progress's `queryPlanning`), counted in every variant's total. Results:
bench/results/batch-overhead.json + .md. Needs `make up` (Kafka only).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import Any

from confluent_kafka.admin import NewTopic  # type: ignore[attr-defined]
from fastavro import parse_schema

from kafkakit.clients import make_admin, make_producer
from materializers import event_shape, spark_session
from materializers.avro_events import SchemaCache, WriterSchemas
from materializers.config import RunConfig
from shop.orders import EVENT_TYPES, OrderDecoder

OUT = Path(__file__).parent / "results" / "batch-overhead.json"
PHASES = ("query_plan", "build", "optimize", "plan", "run", "total")
DATA = {
    "order.created": {"customer_id": "c-1"},
    "order.line_added": {"sku": "sku-1", "quantity": 2, "unit_price_cents": 250},
    "order.line_removed": {"sku": "sku-1"},
    "order.placed": {"total_cents": 500},
    "order.cancelled": {"reason": "changed mind"},
}


def schema_texts() -> dict[int, str]:
    from importlib.resources import files

    return {n + 1: (files("shop") / "schemas" / f"{t}.avsc").read_text() for n, t in enumerate(EVENT_TYPES)}


def fill(bootstrap: str, topic: str, records: int, partitions: int, texts: dict[int, str]) -> None:
    producer = make_producer({"bootstrap.servers": bootstrap})
    schemas = {sid: parse_schema(json.loads(text)) for sid, text in texts.items()}
    for n in range(records):
        sid = n % len(EVENT_TYPES) + 1
        event_type = EVENT_TYPES[sid - 1]
        key, value, headers = event_shape.encode_record(
            stream_id=f"o-{n // len(EVENT_TYPES)}", version=sid, event_type=event_type, schema_id=sid,
            schema=schemas[sid], data={"order_id": f"o-{n // len(EVENT_TYPES)}", **DATA[event_type]},
        )  # fmt: skip
        producer.produce(topic, key=key, value=value, headers=headers, partition=n % partitions)
    producer.flush()


def set_call_site_capture(on: bool) -> None:
    import pyspark.errors.utils as utils

    utils._enable_debugging_cache = on  # what spark.python.sql.dataFrameDebugging.enabled sets


Decode = Callable[[Any], Any]


def variants(texts: dict[int, str]) -> dict[str, tuple[bool, Callable[[], Decode], bool]]:
    """name -> (call-site capture on, a factory of the decode, whether the query itself decodes)."""
    schemas = WriterSchemas("http://127.0.0.1:9/unused", True, SchemaCache(found=OrderedDict(texts)))

    def raw() -> Decode:
        return lambda batch: batch.select("key", "value", "topic", "partition", "offset")

    def rebuilt() -> Decode:
        return lambda batch: OrderDecoder()(batch, schemas)

    def reused() -> Decode:
        decoder = OrderDecoder()
        return lambda batch: decoder(batch, schemas)

    return {
        "raw records (no decode)": (False, raw, False),
        "built each batch, call sites captured (before)": (True, rebuilt, False),
        "built each batch, no call sites": (False, rebuilt, False),
        "built once, call sites captured": (True, reused, False),
        "built once, no call sites": (False, reused, False),
        "decoded in the query (now)": (False, reused, True),
    }


def one_variant(
    spark: Any, bootstrap: str, topic: str, decode: Decode, in_query: bool, batch: int, batches: int
) -> list[dict[str, float]]:
    """Phases (ms) of each of the query's first `batches` batches."""
    timings: dict[int, dict[str, float]] = {}
    done = threading.Event()

    def each(frame: Any, batch_id: int) -> None:
        if batch_id >= batches:
            done.set()
            return
        began = time.perf_counter()
        decoded = frame.select("*") if in_query else decode(frame)
        built = time.perf_counter()
        execution = decoded._jdf.queryExecution()
        execution.optimizedPlan()
        optimized = time.perf_counter()
        execution.executedPlan()
        planned = time.perf_counter()
        decoded.toArrow()
        ran = time.perf_counter()
        marks = (began, built, optimized, planned, ran)
        steps = zip(PHASES[1:-1], marks[:-1], marks[1:], strict=True)
        timings[batch_id] = {p: (b - a) * 1000 for p, a, b in steps} | {"total": (ran - began) * 1000}

    with tempfile.TemporaryDirectory() as checkpoint:
        source = (
            spark.readStream.format("kafka")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", topic)
            .option("includeHeaders", "true")
            .option("startingOffsets", "earliest")
            .option("maxOffsetsPerTrigger", str(batch))
            .option("kafka.fetch.max.wait.ms", "10")
            .load()
        )
        query = (
            # as a job keeps it (`Job._kept`): an error row's bytes are read back for a dead letter
            (decode(source).drop("src_key", "src_value") if in_query else source)
            .writeStream.option("checkpointLocation", checkpoint)
            .foreachBatch(each)
            .trigger(processingTime="0 seconds")
            .start()
        )
        while not done.wait(1):
            if not query.isActive:
                raise RuntimeError(f"the bench's query stopped: {query.exception()}")
        query.stop()
        for progress in query.recentProgress:
            if int(progress["batchId"]) in timings:
                planned_ms = float(progress["durationMs"].get("queryPlanning", 0))
                timing = timings[int(progress["batchId"])]
                timing.update(query_plan=planned_ms, total=timing["total"] + planned_ms)
    return [timings[b] for b in sorted(timings) if "query_plan" in timings[b]]


def medians(timings: list[dict[str, float]]) -> dict[str, float]:
    return {p: round(statistics.median(t[p] for t in timings)) for p in PHASES}


def render(res: dict[str, Any]) -> str:
    by = res["median_ms"]
    before = by["built each batch, call sites captured (before)"]["total"]
    floor = by["raw records (no decode)"]["total"]
    lines = [
        "# A live-sized batch's decode in the driver: building, planning and running it", "",
        f"Measured {res['measured_at']} ({res['machine']}), one driver JVM (`local[2]`), the shop's order "
        f"events ({res['records']} records, 5 writer schemas, {res['partitions']} partitions), batches of "
        f"{res['batch']} records, two rounds of {res['batches']} batches per variant (in order, then reversed); "
        "median ms per batch over the last half of each round.", "",
        "| variant | query plan | build | optimise | plan | run | total | vs before | over raw |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]  # fmt: skip
    for name, m in by.items():
        over = f"{m['total'] - floor:+}" if name != "raw records (no decode)" else "-"
        lines.append(
            f"| {name} | {m['query_plan']} | {m['build']} | {m['optimize']} | {m['plan']} | {m['run']} | {m['total']} "
            f"| {before / max(m['total'], 1):.2f}x | {over} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--batch", type=int, default=21, help="records per batch (maxOffsetsPerTrigger)")
    parser.add_argument("--batches", type=int, default=24, help="batches per variant")
    parser.add_argument("--partitions", type=int, default=3)
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    bootstrap = RunConfig.from_env().endpoints.kafka_bootstrap_servers
    topic = f"bench-batch-overhead-{uuid.uuid4().hex[:6]}"
    records = args.batch * (args.batches + 1)
    texts = schema_texts()
    admin = make_admin({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, args.partitions, 1)])[topic].result(timeout=30)
    try:
        fill(bootstrap, topic, records, args.partitions, texts)
        spark = spark_session.build("local[2]", "bench-batch-overhead")
        every = variants(texts)
        steady: dict[str, list[dict[str, float]]] = {name: [] for name in every}
        # Round 1 in order, round 2 reversed: no variant gets only the warmest JVM.
        for order in (list(every), list(reversed(every))):
            for name in order:
                capture, factory, in_query = every[name]
                set_call_site_capture(capture)
                timings = one_variant(spark, bootstrap, topic, factory(), in_query, args.batch, args.batches)
                steady[name] += timings[len(timings) // 2 :]  # the first half warms the JVM
                print(name, medians(steady[name]), flush=True)
        set_call_site_capture(False)
        results = {name: medians(t) for name, t in steady.items()}
        spark.stop()
    finally:
        admin.delete_topics([topic], operation_timeout=30)
    res = {
        "measured_at": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "machine": f"{os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}",
        "records": records,
        "partitions": args.partitions,
        "batch": args.batch,
        "batches": args.batches,
        "median_ms": results,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(res, indent=2))
    args.out.with_suffix(".md").write_text(render(res))
    print(render(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
