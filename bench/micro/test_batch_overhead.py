"""Micro-benchmark: what a live-sized batch costs the driver to decode, before any view writes it.

A live batch of a few dozen records is decoded into Arrow in the driver (`materializers.runtime.job`,
`_in_driver`): building the decode (pyspark expressions over py4j, Spark's analysis of each
projection), optimising and planning it, and running it. For such batches those fixed costs are the
batch: commit->view latency is about one and a half to two batch times.

One driver JVM, the same records for every variant: the shop's order events (the example `orders`
materializer, five event types, five writer schemas), one batch of `BATCH` records over three
partitions, read by a Spark batch query with its headers as a job's source reads them. A round decodes
the batch and brings it to the driver as Arrow. Variants:
- raw: the records without decoding (the floor: Spark's Kafka source and the Arrow collect);
- the decoder built anew each round / built once and reused (`OrderDecoder`, `avro_events.EventDecoder`);
- the decode built once as a frame, so Spark plans it once (what a streaming job whose query decodes
  does now: `foreachBatch` gets the batch decoded and only brings it to the driver);
- each with pyspark's call-site capture (`spark.python.sql.dataFrameDebugging.enabled`, on by default;
  the materializers' session turns it off) and without: the bench switches the wrapper's cached flag,
  which is all the setting decides for a classic session.
Before this was a pytest-benchmark file it timed the same variants inside a streaming query's
`foreachBatch` (the history of those figures: bench/results/batch_overhead/before-pytest-benchmark.md).
Needs the stack's Kafka.
"""

from __future__ import annotations

import json
import uuid
from collections import OrderedDict
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from confluent_kafka.admin import NewTopic  # type: ignore[attr-defined]
from fastavro import parse_schema

from kafkakit.clients import make_admin, make_producer
from materializers.decode import event_shape
from materializers.decode.avro_events import SchemaCache, WriterSchemas
from shop.orders import EVENT_TYPES, OrderDecoder

BATCH = 21  # records: a live batch of the shop's orders
PARTITIONS = 3


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
        "raw_records_no_decode": (False, raw, False),
        "built_each_batch_call_sites_captured_before": (True, rebuilt, False),
        "built_each_batch_no_call_sites": (False, rebuilt, False),
        "built_once_call_sites_captured": (True, reused, False),
        "built_once_no_call_sites": (False, reused, False),
        "decoded_frame_planned_once_now": (False, reused, True),
    }


VARIANTS = tuple(variants({1: "{}"}))


@pytest.fixture(scope="module")
def batch(spark: Any, bootstrap: str) -> Iterator[Any]:
    topic = f"bench-batch-overhead-{uuid.uuid4().hex[:6]}"
    admin = make_admin({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(timeout=30)
    fill(bootstrap, topic, BATCH, PARTITIONS, schema_texts())
    yield (
        spark.read.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("includeHeaders", "true")
        .option("startingOffsets", "earliest")
        .option("endingOffsets", "latest")
        .option("kafka.fetch.max.wait.ms", "10")  # as a job's source: an empty fetch answered at once
        .load()
    )
    admin.delete_topics([topic], operation_timeout=30)


@pytest.mark.parametrize("variant", VARIANTS)
def test_decode_one_batch(benchmark: Any, batch: Any, quick: bool, variant: str) -> None:
    capture, factory, planned_once = variants(schema_texts())[variant]
    decode = factory()
    set_call_site_capture(capture)
    try:
        if planned_once:
            decoded = decode(batch)
            round_ = decoded.toArrow
        else:

            def round_() -> Any:
                return decode(batch).toArrow()

        table = benchmark.pedantic(round_, rounds=4 if quick else 24, iterations=1, warmup_rounds=2)
    finally:
        set_call_site_capture(False)
    assert table.num_rows == BATCH
