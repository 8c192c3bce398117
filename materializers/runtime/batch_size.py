"""How many records a batch applied whole in the driver may hold: sized by bytes, not by a count.

The driver's path (one Spark job collects the batch as Arrow, the views write it from there: delta-rs
for the warehouse) pays fixed work per batch: Spark's planning and job, and delta-rs's MERGE, which
reads the current table and rewrites every file the batch's entities touch (copy-on-write: delta-rs
writes no deletion vectors). A backfill therefore wants as few batches as the driver's memory allows,
and a count of records fits one row width only. A backfill is faster the larger its batches, up to
what the driver holds. A batch sized by a quarter of the driver's memory
did not fit a job with the cache in Spark's default 1 GiB heap.

`auto` (the default of `--small-batch-rows` and `--warehouse-driver-rows`): on a local master, as many
records as fit an eighth of the driver's heap (`spark.driver.memory`, by default a quarter of the
host's memory on a local master, `spark_session.local_heap`: a collected batch passes through the
driver JVM's heap several times: the tasks' Arrow batches, their serialized results, the copy the
driver receives) and half of `spark.driver.maxResultSize` (a collect past it fails),
each counted at its key and value bytes on the broker (the mean of the newest records of each
partition) plus ROW_OVERHEAD for what a decoded row adds (position, Kafka coordinates, topic name);
never fewer than DRIVER_ROWS. Record bytes over-count a decoded row (Debezium's envelope carries
`source` and `before`; JSON its field names or inline schema), so the bound errs on the small side.
DRIVER_ROWS, a live stream's batches, on a cluster (larger ones stay on the executors there), when
the topic holds no records yet, and where the job keeps a view besides the warehouse (the others
turn a batch into Python values: `JobPlan.warehouse_only`), so their batches keep the count they
were measured with.
"""

from __future__ import annotations

import logging
import time
from dataclasses import replace
from typing import TYPE_CHECKING

from materializers.config import DRIVER_ROWS, RunConfig, is_local
from materializers.errors import SourceUnavailable
from materializers.spark.session import driver_heap

if TYPE_CHECKING:
    from confluent_kafka import Consumer
    from pyspark.sql import SparkSession

    from kafkakit.client_config import KafkaClientConfig

log = logging.getLogger(__name__)

ROW_OVERHEAD = 256  # bytes a decoded row holds beyond its record's: position, coordinates, topic
SAMPLE = 64  # records read from the end of each partition
MEMORY_SHARE = 8  # a batch may take 1/MEMORY_SHARE of the driver's memory (see `budget_of`)


def rows_for(budget_bytes: int, record_bytes: float | None) -> int:
    """Records per driver batch within `budget_bytes` (`budget`) for records of `record_bytes` (None:
    not known) on average (pure)."""
    if record_bytes is None:
        return DRIVER_ROWS
    return max(DRIVER_ROWS, int(budget_bytes // (record_bytes + ROW_OVERHEAD)))


def sized(config: RunConfig, topic: str, spark: SparkSession, *, warehouse_only: bool) -> RunConfig:
    """`config` with its `auto` driver batch bounds (None) resolved for `topic` and this driver;
    `warehouse_only`: whether the warehouse is the job's only view (`JobPlan.warehouse_only`)."""
    if config.small_batch_rows is not None and config.warehouse_driver_rows is not None:
        return config
    rows = DRIVER_ROWS
    if is_local(config.master) and warehouse_only:
        allowed = budget(spark)
        sampled = record_bytes(
            config.endpoints.kafka_bootstrap_servers, topic, client_config=config.endpoints.kafka_client
        )
        rows = rows_for(allowed, sampled)
        log.info(
            "driver batches of at most %s records (auto: %s bytes per record on %s, a budget of %s MiB)",
            f"{rows:,}",
            "unknown" if sampled is None else f"{sampled:,.0f}",
            topic,
            allowed >> 20,
        )
    return replace(
        config,
        small_batch_rows=rows if config.small_batch_rows is None else config.small_batch_rows,
        warehouse_driver_rows=rows if config.warehouse_driver_rows is None else config.warehouse_driver_rows,
    )


def budget(spark: SparkSession) -> int:
    """`budget_of` this driver's heap (as its JVM reports it: `spark.driver.memory`, whose default on
    a local master follows the host, `spark_session.local_heap`) and `spark.driver.maxResultSize`
    (default 1g), read as Spark reads it."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    max_result = spark.sparkContext.getConf().get("spark.driver.maxResultSize", "1g") or "1g"
    return budget_of(
        driver_heap(spark), int(jvm.org.apache.spark.network.util.JavaUtils.byteStringAsBytes(max_result))
    )


def budget_of(memory: int, max_result: int) -> int:
    """The bytes a driver batch may take (pure): 1/MEMORY_SHARE of the driver's memory, and at most
    half of its `maxResultSize` (0: no limit), past which Spark fails the job that collects a batch."""
    share = memory // MEMORY_SHARE
    return min(share, max_result // 2) if max_result else share


def record_bytes(
    bootstrap: str, topic: str, *, client_config: KafkaClientConfig | None = None, timeout_s: float = 5.0
) -> float | None:
    """Mean key + value bytes of the newest SAMPLE records of each of `topic`'s partitions (None: no
    record, or the topic cannot be read: the job's own checks name that)."""
    from confluent_kafka import KafkaException, TopicPartition

    from materializers.runtime.kafka_topics import metadata_consumer, partitions_of

    consumer = metadata_consumer(bootstrap, client_config)
    try:
        wanted: list[TopicPartition] = []
        for partition in partitions_of(consumer, bootstrap, topic):
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=timeout_s)
            if high > low:
                wanted.append(TopicPartition(topic, partition, max(low, high - SAMPLE)))
        if not wanted:
            return None
        consumer.assign(wanted)
        sizes = _sizes(consumer, SAMPLE * len(wanted), time.monotonic() + timeout_s)
        return sum(sizes) / len(sizes) if sizes else None
    except (KafkaException, SourceUnavailable):
        return None
    finally:
        consumer.close()


def _sizes(consumer: Consumer, expected: int, deadline: float) -> list[int]:
    """Key + value bytes of the records the assigned `consumer` reads: until `expected`, the deadline,
    or a poll that finds nothing more (a compacted or transactional partition holds fewer records
    than its offsets span)."""
    sizes: list[int] = []
    while len(sizes) < expected and time.monotonic() < deadline:
        got = consumer.consume(num_messages=expected - len(sizes), timeout=0.2 if sizes else 1.0)
        if not got:
            break
        sizes += [len(m.key() or b"") + len(m.value() or b"") for m in got if m.error() is None]
    return sizes
