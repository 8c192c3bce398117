"""Reading committed events: one stream in version order, a stream's current state, or a subscription.

Undecodable records (unknown event type, unknown schema id, bad bytes) are never skipped silently:
`read_stream`/`load` raise `UndecodableRecord` naming topic/partition/offset (a stream with a hole
cannot be trusted); `subscribe` raises too, unless a dead-letter topic is configured, in which case the
raw record is copied there byte for byte (with `dlq-*` headers saying where it came from and why) and
the subscription goes on.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any, Generic, TypeVar

from confluent_kafka import Message, Producer, TopicPartition

from eventstore.aggregate import Aggregate
from eventstore.config import StoreConfig
from eventstore.decision import StreamState, load
from eventstore.envelope import EventEnvelope, Position, Snapshot
from eventstore.errors import CorruptStream, UndecodableRecord
from eventstore.kafkaio import concrete_ranges, end_offsets, read_range, reader
from eventstore.serde import H_STREAM, Serde, header_map, raw_pairs
from eventstore.topics import partition_for
from kafkakit.clients import make_producer
from kafkakit.positions import StartPosition

S = TypeVar("S")


class EventReader(Generic[S]):
    def __init__(self, config: StoreConfig, aggregate: Aggregate[S], serde: Serde) -> None:
        self.config = config
        self.aggregate = aggregate
        self.serde = serde
        self._consumer = reader(config.bootstrap_servers, client_config=config.kafka_client)
        self._dlq: Producer | None = None

    def close(self) -> None:
        self._consumer.close()
        if self._dlq is not None:
            self._dlq.flush(10)

    def _decode(self, msg: Message) -> EventEnvelope:
        position = Position(topic=msg.topic() or "", partition=msg.partition() or 0, offset=msg.offset() or 0)
        return self.serde.read_event(position, msg.value(), msg.headers())

    def _stream_records(self, topic: str, stream_id: str, start: int = 0) -> Iterator[Message]:
        partition = partition_for(stream_id, self.config.partitions)
        lo, hi = end_offsets(self._consumer, topic, partition)
        for msg in read_range(self._consumer, topic, partition, max(lo, start), hi):
            if header_map(msg.headers()).get(H_STREAM, (msg.key() or b"").decode()) == stream_id:
                yield msg

    def read_stream(
        self, stream_id: str, *, after_version: int = 0, from_offset: int = 0
    ) -> list[EventEnvelope]:
        """Committed events of one stream in version order; raises CorruptStream on a gap/duplicate.

        `from_offset` skips the partition's earlier records: every event after `after_version` must lie
        at or after it (a snapshot's `events_offset` guarantees that).
        """
        records = self._stream_records(self.config.events_topic, stream_id, from_offset)
        events = [self._decode(m) for m in records]
        events = [e for e in events if e.version > after_version]
        for expected, event in enumerate(events, start=after_version + 1):
            if event.version != expected:
                raise CorruptStream(
                    f"stream {stream_id} has version {event.version} where {expected} was expected at "
                    f"{event.position}; the events topic was written outside the processor — investigate"
                )
        return events

    def latest_snapshot(self, stream_id: str) -> Snapshot | None:
        found = None
        for msg in self._stream_records(self.config.snapshots_topic, stream_id):
            found = msg
        return None if found is None else self.serde.read_snapshot(found.value() or b"", found.headers())

    def load(self, stream_id: str) -> StreamState[S]:
        """Latest snapshot + the events after it (read from the snapshot's events offset on)."""
        snapshot = self.latest_snapshot(stream_id)
        after, start = (snapshot.version, snapshot.events_offset) if snapshot else (0, 0)
        return load(
            self.aggregate, snapshot, self.read_stream(stream_id, after_version=after, from_offset=start)
        )

    def subscribe(
        self, start: StartPosition, *, until_end: bool = False, idle_timeout: float | None = None
    ) -> Iterator[EventEnvelope]:
        """Committed events from `start` (per-partition order), each with its position.

        `until_end` stops at the end offsets seen when the subscription began; `idle_timeout` stops
        after that many seconds without a record.
        """
        topic = self.config.events_topic
        consumer = reader(self.config.bootstrap_servers, client_config=self.config.kafka_client)
        try:
            ranges = concrete_ranges(consumer, topic, start)
            # Partitions already at their end never report a position; they are done from the start.
            ends = {p: end for p, (first, end) in ranges.items() if first < end}
            consumer.assign([TopicPartition(topic, p, first) for p, (first, _) in ranges.items()])
            last_seen = time.monotonic()
            while True:
                if until_end and self._at_end(consumer, topic, ends):
                    return
                msg = consumer.poll(0.2)
                if msg is None or msg.error() is not None:
                    if idle_timeout is not None and time.monotonic() - last_seen > idle_timeout:
                        return
                    continue
                last_seen = time.monotonic()
                try:
                    yield self._decode(msg)
                except UndecodableRecord as exc:
                    self._dead_letter(msg, exc)
        finally:
            consumer.close()

    @staticmethod
    def _at_end(consumer: Any, topic: str, ends: dict[int, int]) -> bool:
        positions = consumer.position([TopicPartition(topic, p) for p in ends])
        return all(tp.offset >= ends[tp.partition] for tp in positions)

    def _dead_letter(self, msg: Message, exc: UndecodableRecord) -> None:
        if self.config.dlq_topic is None:
            raise exc
        if self._dlq is None:
            self._dlq = make_producer(
                {"bootstrap.servers": self.config.bootstrap_servers, "enable.idempotence": True},
                client_config=self.config.kafka_client,
            )
        headers = [
            *raw_pairs(msg.headers()),
            ("dlq-error", str(exc).encode()),
            ("dlq-topic", exc.topic.encode()),
            ("dlq-partition", str(exc.partition).encode()),
            ("dlq-offset", str(exc.offset).encode()),
        ]
        self._dlq.produce(self.config.dlq_topic, value=msg.value(), key=msg.key(), headers=headers)
        if self._dlq.flush(10):
            raise exc  # the DLQ did not take it: stop rather than lose the record
