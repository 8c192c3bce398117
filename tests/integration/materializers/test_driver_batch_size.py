"""The driver's batch bound (`auto`) is sized from the records on the real broker and the driver's
memory: the mean key + value bytes of each partition's newest records, exactly."""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest

from kafkakit.clients import make_producer
from materializers.config import DRIVER_ROWS
from materializers.runtime import batch_size
from materializers.runtime.job import Job, JobPlan, batch_cap
from materializers.spark import session as spark_session
from shop.products import PRODUCTS

pytestmark = pytest.mark.integration


def produce(producer: Any, topic: str, sizes: list[int]) -> None:
    for i, size in enumerate(sizes):
        producer.produce(topic, key=b"k%03d" % i, value=b"v" * (size - 4))
    assert producer.flush(30) == 0


def sampled(endpoints: Any, topic: str) -> float | None:
    return batch_size.record_bytes(
        endpoints.kafka_bootstrap_servers, topic, client_config=endpoints.kafka_client
    )


def test_auto_sizes_the_bound_from_the_newest_records_and_the_driver_memory(
    spark: Any, topics: Any, producer: Any, run_config: Any, endpoints: Any
) -> None:
    topic = topics("mat-size")
    produce(producer, topic, [5_000] * 10 + [1_000] * batch_size.SAMPLE)  # older, larger ones left out
    assert sampled(endpoints, topic) == 1_000
    job = Job(spark, JobPlan.of(PRODUCTS, run_config(topic=topic, views="warehouse")))
    # an eighth of the session's heap (a quarter of this host's memory), at most half of
    # maxResultSize (Spark's default 1 GiB)
    heap = spark_session.driver_heap(spark)
    assert batch_size.budget(spark) == min(heap // 8, 1 << 29)
    expected = batch_size.budget(spark) // (1_000 + batch_size.ROW_OVERHEAD)
    assert expected > 106_861  # what Spark's 1 GiB heap gave
    assert job.small_batch_rows == job.plan.config.warehouse_driver_rows == expected
    assert job.plan.warehouse().driver_rows == expected
    assert batch_cap(0, job.small_batch_rows, spark.sparkContext.master, collects=True) == expected
    # with the cache and the Tantivy index (change by change, Python rows) it stays a live stream's
    tantivy = Job(spark, JobPlan.of(PRODUCTS, run_config(topic=topic)))
    assert tantivy.small_batch_rows == tantivy.plan.config.warehouse_driver_rows == DRIVER_ROWS


def test_a_bound_given_is_kept_and_an_empty_or_missing_topic_gets_the_floor(
    spark: Any, topics: Any, run_config: Any, endpoints: Any, uid: str
) -> None:
    empty = topics("mat-size-empty")
    job = Job(spark, JobPlan.of(PRODUCTS, run_config(topic=empty)))
    assert job.small_batch_rows == job.plan.config.warehouse_driver_rows == DRIVER_ROWS
    given = Job(spark, JobPlan.of(PRODUCTS, run_config(topic=empty, small_batch_rows="7")))
    assert given.small_batch_rows == 7 and given.plan.config.warehouse_driver_rows == DRIVER_ROWS
    assert sampled(endpoints, f"mat-size-missing-{uid}") is None  # `prepare` names it


def test_a_transactional_topic_is_sized_without_waiting_for_its_markers(topics: Any, endpoints: Any) -> None:
    topic = topics("mat-size-txn")
    producer = make_producer(
        {"bootstrap.servers": endpoints.kafka_bootstrap_servers, "transactional.id": f"size-{uuid.uuid4()}"},
        client_config=endpoints.kafka_client,
    )
    producer.init_transactions(30)
    for sizes in ([300] * 3, [500] * 3):  # two commits: offsets the markers take hold no record
        producer.begin_transaction()
        produce(producer, topic, sizes)
        producer.commit_transaction(30)
    began = time.monotonic()
    assert sampled(endpoints, topic) == 400
    assert time.monotonic() - began < 2.5  # not the 5 s timeout: the partition's end was read
