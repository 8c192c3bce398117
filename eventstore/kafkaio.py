"""Small Kafka helpers shared by the processor, the client and replay (the imperative shell).

All readers use `isolation.level=read_committed`: aborted transactions (e.g. of a processor killed with
kill -9) are never seen. Reading "to the end" means up to the high watermark captured at the start; a
read_committed consumer's position moves past aborted records and transaction markers, so position is
compared, not the offsets of the records delivered.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Message, TopicPartition

from eventstore.errors import EventStoreError, StoreConfigError
from kafkakit.client_config import KafkaClientConfig
from kafkakit.clients import make_consumer
from kafkakit.positions import StartPosition, resolve

log = logging.getLogger(__name__)
T = TypeVar("T")

READ_COMMITTED = {"isolation.level": "read_committed", "enable.auto.commit": False}

# librdkafka's local errors while a broker is lost and a new leader elected: the client recovers from
# each on its own once metadata is refreshed, so a read that met one is simply tried again.
_FAILOVER = frozenset(
    {
        KafkaError._DESTROY_BROKER,
        KafkaError._TRANSPORT,
        KafkaError._ALL_BROKERS_DOWN,
        KafkaError._TIMED_OUT,
        KafkaError._UNKNOWN_PARTITION,
        KafkaError._WAIT_COORD,
        KafkaError.LEADER_NOT_AVAILABLE,
        KafkaError.NOT_LEADER_FOR_PARTITION,
        KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
        KafkaError.NOT_COORDINATOR,
        KafkaError.COORDINATOR_NOT_AVAILABLE,
        KafkaError.REQUEST_TIMED_OUT,
    }
)


# A partition whose leader is moving or not yet known (a topic created a moment ago): answered once the
# metadata catches up. Unlike `_FAILOVER`, no error that an absent cluster gives too.
_LEADER_MOVING = frozenset(
    {
        KafkaError.NOT_LEADER_FOR_PARTITION,
        KafkaError.LEADER_NOT_AVAILABLE,
        KafkaError._DESTROY_BROKER,
        KafkaError._UNKNOWN_PARTITION,
    }
)
LEADER_MOVE_S = 30.0


def transient(exc: KafkaException, codes: frozenset[int] = _FAILOVER) -> bool:
    """A failure a broker's loss causes and a retry outlives (not a fatal, auth or config error)."""
    err = exc.args[0] if exc.args else None
    return isinstance(err, KafkaError) and not err.fatal() and (err.retriable() or err.code() in codes)


def consumer_fatal(err: KafkaError | None) -> bool:
    """Whether a consumed message's error ends the consumer. librdkafka hands its fatal error (a
    static member fenced, say) to `consume` as a message with code _FATAL, whose error confluent-kafka
    builds without the fatal flag, so the code counts as much as the flag."""
    return err is not None and (err.fatal() or err.code() == KafkaError._FATAL)


def until_failover_ends(
    fn: Callable[[], T],
    *,
    what: str,
    deadline_s: float,
    on_retry: Callable[[], None],
    codes: frozenset[int] = _FAILOVER,
) -> T:
    """`fn()`, tried again (after `on_retry`) while it fails transiently, for up to `deadline_s`: the time
    a leader election takes. A non-transient error, or one that outlasts the deadline, is raised."""
    deadline = time.monotonic() + deadline_s
    pause = 0.2
    while True:
        try:
            return fn()
        except KafkaException as exc:
            if not transient(exc, codes) or time.monotonic() + pause > deadline:
                raise
            log.warning(
                "%s failed (%s); trying again in %.1fs (a broker failover?)", what, exc.args[0], pause
            )
        time.sleep(pause)
        pause = min(pause * 2, 5.0)
        on_retry()


def reader(bootstrap: str, *, client_config: KafkaClientConfig | None = None, **extra: Any) -> Consumer:
    """A group-less consumer for assign()-based reads, with `client_config`'s security settings."""
    config = {
        "bootstrap.servers": bootstrap,
        "group.id": "eventstore-reader",  # required by the client; never used to commit
        "enable.auto.offset.store": False,
        "auto.offset.reset": "earliest",
        **READ_COMMITTED,
        **extra,
    }
    return make_consumer(config, client_config=client_config)


def take(consumer: Consumer, limit: int, timeout: float) -> list[Message]:
    """Up to `limit` records: waits at most `timeout` for the first, then takes only what is ready.

    (`consume(limit, timeout)` alone waits the full timeout whenever fewer than `limit` are ready.)
    """
    first = consumer.consume(1, timeout=timeout)
    if not first or limit <= 1:
        return first
    return first + consumer.consume(limit - 1, timeout=0)


def require_partitions(consumer: Consumer, topic: str, configured: int, timeout: float = 10.0) -> None:
    """Refuse a config whose partition count is not the topic's: streams are placed by
    `partition_for(stream, partitions)`, so another count sends a stream's commands to a partition (and a
    processor) that does not own it. A topic that does not exist yet is left to the caller's own check."""
    found = consumer.list_topics(topic, timeout=timeout).topics.get(topic)
    if found is None or found.error is not None or not found.partitions:
        return
    if len(found.partitions) != configured:
        raise StoreConfigError(
            f"{topic} has {len(found.partitions)} partitions but this store is configured with "
            f"partitions={configured}: commands would reach the wrong processor; set "
            f"EVENTSTORE_PARTITIONS={len(found.partitions)} (or --partitions {len(found.partitions)})"
        )


def end_offsets(consumer: Consumer, topic: str, partition: int, timeout: float = 10.0) -> tuple[int, int]:
    """The partition's low and high watermarks; asked again while its leader moves (a new topic's first
    moments, a broker's failover)."""
    lo, hi = until_failover_ends(
        lambda: consumer.get_watermark_offsets(
            TopicPartition(topic, partition), timeout=timeout, cached=False
        ),
        what=f"reading the end offsets of {topic}[{partition}]",
        deadline_s=LEADER_MOVE_S,
        # A request to a leader that died times out until the client learns the new one: ask the
        # cluster now (librdkafka would wait for its periodic refresh). An absent cluster fails here.
        on_retry=lambda: consumer.list_topics(topic, timeout=timeout),
        codes=_LEADER_MOVING | {KafkaError._TIMED_OUT},
    )
    return int(lo), int(hi)


def read_range(
    consumer: Consumer, topic: str, partition: int, start: int, end: int, *, timeout: float = 60.0
) -> Iterator[Message]:
    """Committed records of one partition in [start, end), in offset order."""
    if start >= end:
        return
    consumer.assign([TopicPartition(topic, partition, start)])
    deadline = time.monotonic() + timeout
    probe = [TopicPartition(topic, partition)]
    try:
        while True:
            msg = consumer.poll(0.2)
            if msg is not None:
                err = msg.error()
                if err is None:
                    if msg.offset() >= end:  # type: ignore[operator]
                        return
                    yield msg
                elif err.code() != KafkaError._PARTITION_EOF:
                    raise EventStoreError(f"reading {topic}[{partition}] failed: {err}")
            if consumer.position(probe)[0].offset >= end:
                return
            if time.monotonic() > deadline:
                raise EventStoreError(
                    f"reading {topic}[{partition}] to offset {end} took over {timeout}s; an open "
                    "transaction may be blocking read_committed readers — it clears within "
                    "transaction.timeout.ms, then retry"
                )
    finally:
        with contextlib.suppress(RuntimeError):  # the consumer may be closed before the generator is
            consumer.unassign()


def read_to_end(
    consumer: Consumer, topic: str, partition: int, *, timeout: float = 60.0
) -> Iterator[Message]:
    lo, hi = end_offsets(consumer, topic, partition)
    yield from read_range(consumer, topic, partition, lo, hi, timeout=timeout)


def concrete_ranges(
    consumer: Consumer, topic: str, start: StartPosition, until: dict[int, int] | None = None
) -> dict[int, tuple[int, int]]:
    """partition -> [first, end) with symbolic start offsets resolved against the log's bounds.

    `end` is `until[partition]` (capped at the log end) or the log end now; with `until`, only the
    partitions it names are included.
    """
    ranges = {}
    for tp in resolve(consumer, topic, start):
        if until is not None and tp.partition not in until:
            continue
        lo, hi = end_offsets(consumer, topic, tp.partition)
        first = lo if tp.offset == OFFSET_BEGINNING else (hi if tp.offset < 0 else tp.offset)
        end = hi if until is None else min(until[tp.partition], hi)
        ranges[tp.partition] = (first, max(first, end))
    return ranges


def partitions_of(consumer: Consumer, topic: str, timeout: float = 10.0) -> list[int]:
    meta = consumer.list_topics(topic, timeout=timeout).topics.get(topic)
    if meta is None or meta.error is not None or not meta.partitions:
        raise EventStoreError(f"topic {topic!r} does not exist; run `eventstore init` first")
    return sorted(meta.partitions)
