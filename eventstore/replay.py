"""Replay: copy a topic range to another topic (exactly once) or print it as JSON lines.

To a topic: records keep key, value, headers, timestamp, partition number and per-partition order.
Each batch is produced in one transaction together with the source offsets reached, committed to the
consumer group `eventstore-replay.<src>.<dst>`. A re-run after a crash resumes from those offsets (the
crashed run's open transaction is aborted when the re-run's producer, using the same transactional id,
initialises), so nothing is copied twice. Ranges end at `--until-offset` (exclusive) or at the end
offsets seen when the replay started.

To stdout: one JSON object per record; values framed with the Confluent magic byte are decoded with
their writer schema from the registry, other values as JSON (e.g. Debezium CDC topics), else shown hex.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import Consumer, KafkaException, Message, Producer, TopicPartition
from confluent_kafka.admin import NewTopic  # type: ignore[attr-defined]

from eventstore.errors import ReplayError
from eventstore.kafkaio import READ_COMMITTED, concrete_ranges, partitions_of, read_range, reader, take
from eventstore.registry import Registry
from eventstore.serde import decode_any, raw_pairs
from kafkakit.client_config import KafkaClientConfig
from kafkakit.clients import admin_client, make_consumer, make_producer
from kafkakit.positions import StartPosition

BATCH = 500


@dataclass(slots=True)
class ReplayReport:
    copied: dict[int, int] = field(default_factory=dict)
    resumed_from: dict[int, int] = field(default_factory=dict)

    @property
    def total(self) -> int:
        return sum(self.copied.values())


def plan(
    consumer: Consumer, topic: str, start: StartPosition, until: dict[int, int] | None
) -> dict[int, tuple[int, int]]:
    """partition -> (first offset, end offset exclusive), concrete against the log's bounds."""
    ranges = concrete_ranges(consumer, topic, start, until)
    if not ranges:
        raise ReplayError(f"nothing to replay from {topic}: --until-offset names no partition being read")
    return ranges


def _ensure_destination(
    bootstrap: str, src: str, dst: str, consumer: Consumer, client_config: KafkaClientConfig | None
) -> None:
    src_parts = len(partitions_of(consumer, src))
    meta = consumer.list_topics(dst, timeout=10).topics.get(dst)
    if meta is not None and meta.error is None and meta.partitions:
        if len(meta.partitions) < src_parts:
            raise ReplayError(
                f"destination {dst} has {len(meta.partitions)} partitions, source {src} has {src_parts}; "
                "per-partition order needs at least as many — use a new destination topic"
            )
        return
    config = {"retention.ms": "-1"}
    with admin_client({"bootstrap.servers": bootstrap}, client_config=client_config) as admin:
        # -1: the cluster's default.replication.factor, as the store's own topics
        for future in admin.create_topics([NewTopic(dst, src_parts, -1, config=config)]).values():
            try:
                future.result()
            except KafkaException as exc:
                if "TOPIC_ALREADY_EXISTS" not in str(exc):
                    raise ReplayError(f"cannot create destination topic {dst}: {exc}") from exc


def replay_to_topic(
    bootstrap: str,
    src: str,
    start: StartPosition,
    dst: str,
    *,
    until: dict[int, int] | None = None,
    on_batch: Callable[[int], None] | None = None,
    transaction_timeout_ms: int = 60_000,
    client_config: KafkaClientConfig | None = None,
) -> ReplayReport:
    if src == dst:
        raise ReplayError("source and destination are the same topic; replay into a new topic")
    group = f"eventstore-replay.{src}.{dst}"
    consumer = make_consumer(
        {"bootstrap.servers": bootstrap, "group.id": group, **READ_COMMITTED}, client_config=client_config
    )
    producer = make_producer(
        {
            "bootstrap.servers": bootstrap,
            # Stable id: a re-run fences the crashed run and aborts its open transaction.
            "transactional.id": group,
            "transaction.timeout.ms": transaction_timeout_ms,
        },
        client_config=client_config,
    )
    report = ReplayReport()
    try:
        _ensure_destination(bootstrap, src, dst, consumer, client_config)
        ranges = plan(consumer, src, start, until)
        producer.init_transactions(30)
        committed = consumer.committed([TopicPartition(src, p) for p in ranges], timeout=30)
        for tp in committed:
            first, end = ranges[tp.partition]
            if tp.offset > first:  # progress recorded by an earlier (crashed or finished) run
                ranges[tp.partition] = (min(tp.offset, end), end)
                report.resumed_from[tp.partition] = tp.offset
        todo = {p: r for p, r in ranges.items() if r[0] < r[1]}
        report.copied = dict.fromkeys(ranges, 0)
        if not todo:
            return report
        consumer.assign([TopicPartition(src, p, first) for p, (first, _) in todo.items()])
        while todo:
            msgs = [m for m in take(consumer, BATCH, timeout=1.0) if m.error() is None]
            batch = [
                m
                for m in msgs
                if (m.partition() or 0) in todo and (m.offset() or 0) < todo[m.partition() or 0][1]
            ]
            if batch:
                _copy(producer, consumer, dst, src, batch)
                for m in batch:
                    report.copied[m.partition() or 0] += 1
                if on_batch:
                    on_batch(len(batch))
            positions = consumer.position([TopicPartition(src, p) for p in todo])
            for tp in positions:
                if tp.offset >= todo[tp.partition][1]:
                    del todo[tp.partition]
        return report
    finally:
        consumer.close()


def _copy(producer: Producer, consumer: Consumer, dst: str, src: str, batch: list[Message]) -> None:
    producer.begin_transaction()
    try:
        nexts: dict[int, int] = {}
        for m in batch:
            producer.produce(
                dst,
                value=m.value(),
                key=m.key(),
                headers=raw_pairs(m.headers()),
                partition=m.partition() or 0,
                timestamp=m.timestamp()[1],
            )
            nexts[m.partition() or 0] = (m.offset() or 0) + 1
        offsets = [TopicPartition(src, p, n) for p, n in nexts.items()]
        producer.send_offsets_to_transaction(offsets, consumer.consumer_group_metadata())
        producer.commit_transaction()
    except KafkaException as exc:
        if exc.args[0].txn_requires_abort():
            producer.abort_transaction()
        raise ReplayError(f"replay transaction failed ({exc.args[0]}); re-run to resume safely") from exc


def read_records(
    bootstrap: str,
    src: str,
    start: StartPosition,
    until: dict[int, int] | None = None,
    *,
    client_config: KafkaClientConfig | None = None,
) -> Iterator[Message]:
    """Committed records of the range, partition by partition in offset order."""
    consumer = reader(bootstrap, client_config=client_config)
    try:
        for partition, (first, end) in sorted(plan(consumer, src, start, until).items()):
            yield from read_range(consumer, src, partition, first, end)
    finally:
        consumer.close()


def as_json(msg: Message, registry: Registry | None) -> dict[str, Any]:
    value = msg.value()
    framed = value is not None and len(value) >= 5 and value[0] == 0
    if framed and registry is None:
        raise ReplayError("an Avro value needs the schema registry; set SCHEMA_REGISTRY_URL")
    return {
        "topic": msg.topic(),
        "partition": msg.partition(),
        "offset": msg.offset(),
        "timestamp": msg.timestamp()[1],
        "key": _text_or_b64(msg.key()),
        "headers": [
            [k, _text_or_b64(v if isinstance(v, bytes) else (v or "").encode())]
            for k, v in raw_pairs(msg.headers())
        ],
        "value": decode_any(registry, value),
    }


def _text_or_b64(data: bytes | None) -> str | None:
    if data is None:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return "base64:" + base64.b64encode(data).decode()


def dumps(record: dict[str, Any]) -> str:
    return json.dumps(record, ensure_ascii=False, default=str)
