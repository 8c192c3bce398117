"""Micro-benchmark: reading one live-sized batch with Spark's Kafka source, fetch.max.wait.ms 500
(Kafka's default) vs 10 (the materializers' setting, `SOURCE_FETCH` in `materializers.runtime.job`).

A micro-batch's reader asks for offsets that hold no record: a transaction's commit marker (the event
store appends in Kafka transactions) or the end of its range. The broker holds such an empty fetch
for fetch.max.wait.ms before answering. Two topics of `records` records over 3 partitions: one written
plainly (as Connect writes CDC records), one in transactions of 10 records (as the event store
appends). A round is a Spark batch query over the whole topic brought to the driver as Arrow (what a
small micro-batch does), after two unmeasured reads. Needs the stack's Kafka.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka.admin import NewTopic  # type: ignore[attr-defined]

from kafkakit.clients import make_admin, make_producer

SETTINGS = {"kafka_default_500ms": "500", "materializers_10ms": "10"}
KINDS = ("plain", "transactional")
PARTITIONS = 3


def fill(bootstrap: str, topic: str, records: int, transactional: bool) -> None:
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
            producer.produce(topic, key=str(n).encode(), value=b'{"n": %d}' % n, partition=n % PARTITIONS)
        if transactional:
            producer.commit_transaction()
    producer.flush()


@pytest.fixture(scope="module")
def topics(bootstrap: str) -> Iterator[dict[str, str]]:
    tag = uuid.uuid4().hex[:6]
    names = {kind: f"bench-fetch-{kind}-{tag}" for kind in KINDS}
    admin = make_admin({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(t, PARTITIONS, 1) for t in names.values()]).values():
        future.result(timeout=30)
    for kind, topic in names.items():
        fill(bootstrap, topic, 60, transactional=kind == "transactional")
    yield names
    admin.delete_topics(list(names.values()), operation_timeout=30)


@pytest.mark.parametrize("setting", SETTINGS)
@pytest.mark.parametrize("kind", KINDS)
def test_read_one_batch(
    benchmark: Any, spark: Any, bootstrap: str, topics: dict[str, str], quick: bool, kind: str, setting: str
) -> None:
    frame = (
        spark.read.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topics[kind])
        .option("startingOffsets", "earliest")
        .option("endingOffsets", "latest")
        .option("kafka.fetch.max.wait.ms", SETTINGS[setting])
        .load()
        .select("key", "value", "topic", "partition", "offset")
    )
    table = benchmark.pedantic(frame.toArrow, rounds=3 if quick else 15, iterations=1, warmup_rounds=2)
    assert table.num_rows == 60
