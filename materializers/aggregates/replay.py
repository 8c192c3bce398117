"""Committed batches of an aggregate job read again as one Spark batch job, each record beside the
batch that read it (its late-input watermark and clock, from aggregate_batches): what `verify`
recomputes the table from, and where the records a batch refused are taken for the dead-letter topic.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING

from materializers.aggregates.batches import OffsetRange
from materializers.aggregates.declaration import AggregateView
from materializers.aggregates.plan import events, reported_refusal
from materializers.decode.avro_events import WriterSchemas, learn_topic_schemas
from materializers.plan import JobPlan
from materializers.runtime.kafka_topics import topic_partitions

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

# Kafka's own markers in a batch read's offset options (the source needs every partition named).
LATEST, EARLIEST = -1, -2


def offset_options(
    partitions: Sequence[int], ranges: Sequence[OffsetRange]
) -> tuple[dict[str, int], dict[str, int]]:
    """(startingOffsets, endingOffsets) per partition covering `ranges`: a partition none of them
    reads starts and ends at the latest offset, so it adds at most a few records the join drops (pure)."""
    begins: dict[str, int] = {str(p): LATEST for p in partitions}
    ends: dict[str, int] = {str(p): LATEST for p in partitions}
    for r in ranges:
        key = str(r.partition)
        begins[key] = r.begin if begins.get(key, LATEST) == LATEST else min(begins[key], r.begin)
        ends[key] = r.end if ends.get(key, LATEST) == LATEST else max(ends[key], r.end)
    return begins, ends


def raw_records(spark: SparkSession, plan: JobPlan, ranges: Sequence[OffsetRange]) -> DataFrame:
    """The source records `ranges` cover (at most: the caller joins them with the ranges)."""
    endpoints = plan.config.endpoints
    partitions = topic_partitions(
        endpoints.kafka_bootstrap_servers, plan.topic, client_config=endpoints.kafka_client
    )
    begins, ends = offset_options(partitions, ranges)
    return (
        spark.read.format("kafka")
        .option("kafka.bootstrap.servers", endpoints.kafka_bootstrap_servers)
        .options(**endpoints.kafka_client.spark_options())
        .option("subscribe", plan.topic)
        .option("includeHeaders", "true")
        .option("startingOffsets", json.dumps({plan.topic: begins}))
        .option("endingOffsets", json.dumps({plan.topic: ends}))
        .load()
    )


def placed(
    spark: SparkSession, plan: JobPlan, view: AggregateView, ranges: Sequence[OffsetRange]
) -> DataFrame:
    """The decoded records of `ranges`, each with its batch's `_batch`, `_late_wm` and `_ts` (ms)."""
    from pyspark.sql import functions as F

    endpoints = plan.config.endpoints
    schemas = WriterSchemas(endpoints.schema_registry_url, auth=endpoints.schema_registry_auth)
    learn_topic_schemas(schemas, plan.topic)
    decoded = events(raw_records(spark, plan, ranges), view, schemas.trusting_cache())
    batches = spark.createDataFrame(
        [(r.partition, r.begin, r.end, r.batch, r.late_watermark_ms, r.timestamp_ms) for r in ranges],
        "_part int, _begin long, _end long, _batch int, _late_wm long, _ts long",
    )
    inside = (
        (F.col("src_partition") == F.col("_part"))
        & (F.col("src_offset") >= F.col("_begin"))
        & (F.col("src_offset") < F.col("_end"))
    )
    return decoded.join(F.broadcast(batches), inside)


def refused_records(
    spark: SparkSession, plan: JobPlan, view: AggregateView, ranges: Sequence[OffsetRange]
) -> DataFrame:
    """The records `ranges` refused, as dead letters (dead_letters.write): original key and value,
    topic, partition, offset and the reason, judged by each record's own batch clock."""
    from pyspark.sql import functions as F

    found = placed(spark, plan, view, ranges)
    reason = reported_refusal(view, F.timestamp_millis(F.col("_ts")))
    refused = found.where(reason.isNotNull()).select(
        F.col("src_partition").alias("partition"),
        F.col("src_offset").alias("offset"),
        reason.alias("error"),
    )
    raw = raw_records(spark, plan, ranges).select("key", "value", "topic", "partition", "offset")
    return refused.join(raw, ["partition", "offset"])
