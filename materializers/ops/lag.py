"""Lag as a user has it: records in the source topic that no committed batch has reached yet.

Per partition, the topic's end offset (the broker's high watermark, read now) minus the offset the
query's last committed batch ended at (its checkpoint: `offsets/<n>` of the highest `commits/<n>`).
It grows while a driver is stopped, dead or slow, which Spark's query progress cannot show.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from confluent_kafka import Consumer, KafkaException, TopicPartition

from kafkakit.client_config import KafkaClientConfig
from kafkakit.positions import StartPosition, resolve
from materializers.errors import SourceUnavailable
from materializers.plan import JobPlan
from materializers.runtime import checkpoint
from materializers.runtime.job import pinned_start
from materializers.runtime.kafka_topics import metadata_consumer, partitions_of
from materializers.runtime.status import JobStatus


def log_bounds(
    bootstrap: str, topic: str, *, client_config: KafkaClientConfig | None = None
) -> dict[int, tuple[int, int]]:
    """Each partition's (first retained offset, end offset) now: the low and high watermarks."""
    consumer = metadata_consumer(bootstrap, client_config)
    try:
        return _bounds(consumer, bootstrap, topic)
    finally:
        consumer.close()


def _bounds(consumer: Consumer, bootstrap: str, topic: str) -> dict[int, tuple[int, int]]:
    bounds: dict[int, tuple[int, int]] = {}
    for p in partitions_of(consumer, bootstrap, topic):
        low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
        bounds[p] = (int(low), int(high))
    return bounds


def end_offsets(
    bootstrap: str, topic: str, *, client_config: KafkaClientConfig | None = None
) -> checkpoint.Offsets:
    """The topic's end offset (high watermark) per partition, now."""
    bounds = log_bounds(bootstrap, topic, client_config=client_config)
    return {topic: {str(p): high for p, (_low, high) in bounds.items()}}


def measure(
    checkpoint_dir: Path, topic: str, bootstrap: str, *, client_config: KafkaClientConfig | None = None
) -> dict[str, int] | None:
    """{"topic[p]": records behind}; None while nothing is committed (the start is not known yet)."""
    done = checkpoint.committed(checkpoint_dir)
    if done.batch_id < 0:
        return None
    return checkpoint.behind(done.offsets, end_offsets(bootstrap, topic, client_config=client_config))


def backlog(plan: JobPlan, begin: StartPosition, *, fresh: bool = False) -> int:
    """The records `plan`'s query reads before it is caught up, measured as it starts: from its
    checkpoint's last committed batch, else (or when `fresh`: a rebuild's new generation) from where
    a new checkpoint starts: the offsets a restore pinned, or `begin`, a timestamp resolved by the
    broker as Spark resolves it."""
    done = None if fresh else checkpoint.committed(plan.checkpoint)
    bootstrap = plan.config.endpoints.kafka_bootstrap_servers
    consumer = metadata_consumer(bootstrap, plan.config.endpoints.kafka_client)
    try:
        bounds = _bounds(consumer, bootstrap, plan.topic)
        if done is not None and done.batch_id >= 0:
            starts = {int(p): offset for p, offset in done.offsets.get(plan.topic, {}).items()}
        else:
            start = (None if fresh else pinned_start(plan)) or begin
            starts = {tp.partition: tp.offset for tp in resolve(consumer, plan.topic, start)}
    finally:
        consumer.close()
    return checkpoint.records_ahead(starts, bounds)


def with_lag(job: JobStatus, bootstrap: str, *, client_config: KafkaClientConfig | None = None) -> JobStatus:
    """The job's status with its lag measured now (unknown when Kafka does not answer)."""
    if not job.topic or not job.checkpoint:
        return replace(job, lag=None)  # published by a driver older than this field
    try:
        lag = measure(Path(job.checkpoint), job.topic, bootstrap, client_config=client_config)
        return replace(job, lag=lag)
    except (KafkaException, SourceUnavailable):
        return replace(job, lag=None)
