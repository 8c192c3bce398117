"""Where to start reading a topic: parsing user input (pure) and resolving it against a broker.

Forms accepted everywhere (cdc tail, eventstore replay/subscribe, materializers start):
  earliest | latest | P:N[,P:N...] (partition:offset) | {"topic": {"0": 123}} | ISO-8601 timestamp.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Literal

from kafkakit.errors import BadStartPosition

if TYPE_CHECKING:
    from confluent_kafka import Consumer, TopicPartition


@dataclass(frozen=True, slots=True)
class Edge:
    which: Literal["earliest", "latest"]


@dataclass(frozen=True, slots=True)
class Offsets:
    """Explicit offsets per (topic, partition); a topic of None means 'the topic being read'."""

    by_partition: tuple[tuple[str | None, int, int], ...]


@dataclass(frozen=True, slots=True)
class Timestamp:
    epoch_ms: int


StartPosition = Edge | Offsets | Timestamp


def parse_timestamp(text: str) -> Timestamp:
    try:
        moment = datetime.fromisoformat(text)
    except ValueError as exc:
        raise BadStartPosition(
            f"timestamp {text!r} is not ISO-8601; write it as YYYY-MM-DDTHH:MM:SSZ (UTC) or with an offset such as +02:00"
        ) from exc
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return Timestamp(int(moment.timestamp() * 1000))


def parse_partition_offsets(text: str) -> Offsets:
    """`0:15,1:7` -> partition 0 from offset 15, partition 1 from offset 7."""
    entries = []
    for part in text.split(","):
        p, sep, n = part.strip().partition(":")
        if not sep or not p.isdigit() or not n.lstrip("-").isdigit() or int(n) < 0:
            raise BadStartPosition(
                f"offset {part!r} is not PARTITION:OFFSET with non-negative integers; write e.g. 0:15"
            )
        entries.append((None, int(p), int(n)))
    return Offsets(tuple(entries))


def parse_offsets_json(text: str) -> Offsets:
    """Spark's startingOffsets form: {"topic": {"0": 123, "1": -2}} (-2 earliest, -1 latest)."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise BadStartPosition(
            f'offsets JSON is malformed ({exc.msg}); write e.g. \'{{"orders": {{"0": 12}}}}\''
        ) from exc
    if not isinstance(doc, dict) or not doc:
        raise BadStartPosition('offsets JSON must be an object of topics, e.g. {"orders": {"0": 12}}')
    entries = []
    for topic, parts in doc.items():
        if not isinstance(parts, dict) or not parts:
            raise BadStartPosition(f'offsets for topic {topic!r} must be an object like {{"0": 12}}')
        for p, n in parts.items():
            if not str(p).isdigit() or not isinstance(n, int) or n < -2:
                raise BadStartPosition(
                    f"offset {topic}[{p}]={n!r} is invalid: partitions are integers, offsets >= 0 "
                    "(or -2 earliest, -1 latest)"
                )
            entries.append((topic, int(p), n))
    return Offsets(tuple(entries))


def parse_start(text: str) -> StartPosition:
    """Parse any accepted form; the error names the form expected."""
    value = text.strip()
    if value in ("earliest", "beginning"):
        return Edge("earliest")
    if value in ("latest", "end"):
        return Edge("latest")
    if value.startswith("{"):
        return parse_offsets_json(value)
    if value[:1].isdigit() and ":" in value and "-" not in value.split(":")[0] and "T" not in value:
        return parse_partition_offsets(value)
    try:
        return parse_timestamp(value)
    except BadStartPosition:
        raise BadStartPosition(
            f"start position {text!r} not understood; use earliest, latest, P:N[,P:N], "
            '{"topic": {"0": N}} or an ISO-8601 timestamp'
        ) from None


def resolve(
    consumer: Consumer, topic: str, start: StartPosition, timeout: float = 10.0
) -> list[TopicPartition]:
    """Concrete TopicPartitions to `assign()`, checked against the log's real bounds."""
    from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, TopicPartition

    meta = consumer.list_topics(topic, timeout=timeout).topics.get(topic)
    if meta is None or meta.error is not None or not meta.partitions:
        raise BadStartPosition(f"topic {topic!r} does not exist; check the name with the broker's topic list")
    partitions = sorted(meta.partitions)
    if isinstance(start, Edge):
        edge = OFFSET_BEGINNING if start.which == "earliest" else OFFSET_END
        return [TopicPartition(topic, p, edge) for p in partitions]
    if isinstance(start, Timestamp):
        found = consumer.offsets_for_times(
            [TopicPartition(topic, p, start.epoch_ms) for p in partitions], timeout
        )
        for tp in found:
            low = consumer.get_watermark_offsets(TopicPartition(topic, tp.partition), timeout=timeout)[0]
            # The first retained record is already newer than asked, and older ones were deleted:
            # records from the asked moment are gone, so starting there would silently skip them.
            if low > 0 and tp.offset == low:
                raise BadStartPosition(
                    f"timestamp {start.epoch_ms} is before the log start of {topic}[{tp.partition}] "
                    f"(offsets below {low} were deleted); start from 'earliest' or a later timestamp"
                )
        return [
            TopicPartition(topic, tp.partition, tp.offset if tp.offset >= 0 else OFFSET_END) for tp in found
        ]
    chosen = []
    for t, p, n in start.by_partition:
        if t not in (None, topic):
            continue
        if p not in meta.partitions:
            raise BadStartPosition(f"topic {topic!r} has no partition {p}; it has {partitions}")
        lo, hi = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=timeout)
        if n >= 0 and not lo <= n <= hi:
            raise BadStartPosition(
                f"offset {n} is outside {topic}[{p}] (log holds {lo}..{hi}); pick an offset in that range"
            )
        chosen.append(
            TopicPartition(topic, p, n if n >= 0 else (OFFSET_BEGINNING if n == -2 else OFFSET_END))
        )
    if not chosen:
        raise BadStartPosition(f"the offsets given name no partition of topic {topic!r}")
    return chosen
