"""The demo's aggregate step: `sku_per_minute` (the shop's example view: lines, units and value per SKU
per minute of event time, 2 minutes of lateness) over a feed of order-line events whose times arrive
out of order and late, as events from many tills do.

Two runs of `materializers start sku_per_minute --available-now`, a restart from the checkpoint in
between: the first reads minutes 0-6 shuffled (out of order, all counted), so windows ending at or
before 4:59 close; the second brings records for closed windows (dropped and counted), for open ones
(counted in), one an hour ahead and one undecodable (refused, sent to the dead-letter topic). Then
`materializers verify sku_per_minute` recomputes the aggregate as a batch job and compares it window by
window, and `materializers status --json` shows the counters.
"""

from __future__ import annotations

import json
import random
import re
import subprocess
import sys
import time
from contextlib import suppress
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path

from devstack.event_records import EventRecords
from kafkakit.clients import admin_client, make_consumer, make_producer

VIEW = "sku_per_minute"
EVENT_TYPE = "order.line_added"
MINUTE_MS = 60_000
SKUS = ("SKU-1", "SKU-2", "SKU-3", "SKU-4")
ON_TIME, LATE, OPEN, AHEAD, BROKEN = 60, 6, 6, 1, 1  # records of each kind


@dataclass(frozen=True, slots=True)
class Feed:
    topic: str
    home: Path
    env: dict[str, str]  # the stack's endpoints as environment variables

    @property
    def bootstrap(self) -> str:
        return self.env["KAFKA_BOOTSTRAP_SERVERS"]


@dataclass(frozen=True, slots=True)
class AggregateOutcome:
    window_rows: int
    late_pairs: int  # (record, window) pairs verify found dropped as late
    late_dropped: int  # the status counter (Spark's dropped rows)
    refused: int
    dead_letters: int
    differences: int
    verified: bool
    seconds: float

    @property
    def as_expected(self) -> bool:
        return (
            self.verified
            and self.late_pairs == LATE
            and 0 < self.late_dropped <= LATE
            and self.refused == AHEAD + BROKEN
            and self.dead_letters == AHEAD + BROKEN
        )


def create_topic(bootstrap: str, topic: str) -> None:
    from confluent_kafka.admin import NewTopic  # type: ignore[attr-defined]

    with admin_client({"bootstrap.servers": bootstrap}) as admin:
        admin.create_topics([NewTopic(topic, 1)])[topic].result(timeout=30)


def delete_topics(bootstrap: str, topics: list[str]) -> None:
    with admin_client({"bootstrap.servers": bootstrap}) as admin:
        for done in admin.delete_topics(topics).values():
            with suppress(Exception):  # a dead-letter topic never created: nothing to remove
                done.result(timeout=30)


def run(feed: Feed) -> AggregateOutcome:
    started = time.monotonic()
    text = (files("shop") / "schemas" / f"{EVENT_TYPE}.avsc").read_text()
    records = EventRecords(feed.env["SCHEMA_REGISTRY_URL"], feed.topic, {EVENT_TYPE: text})
    base = (int(time.time() * 1000) // MINUTE_MS - 10) * MINUTE_MS  # minute 0, ten minutes ago
    rng = random.Random(7)
    first = [base + rng.randrange(0, 7 * MINUTE_MS) for _ in range(ON_TIME)]
    _produce(feed, records, first, rng)
    _start(feed)
    newest = max(first)  # windows ending at or before newest - 2 minutes are closed now
    late = [base + rng.randrange(0, MINUTE_MS * ((newest - base) // MINUTE_MS - 3)) for _ in range(LATE)]
    open_ = [newest - rng.randrange(0, MINUTE_MS) for _ in range(OPEN)]
    ahead = [int(time.time() * 1000) + 3_600_000 * 24]
    _produce(feed, records, late + open_ + ahead, rng, broken=BROKEN)
    _start(feed)
    verified = _cli(feed, "verify", VIEW, "--topic", feed.topic)
    shown = json.loads(_cli(feed, "status", "--json").stdout)
    (job,) = [j for j in shown if j["name"] == VIEW]
    summary = verified.stdout.strip().splitlines()[-1] if verified.stdout.strip() else ""
    return AggregateOutcome(
        window_rows=_number(r"(\d+) window row\(s\) recomputed", summary),
        late_pairs=_number(r"late: (\d+) record-window pair", summary),
        late_dropped=int(job["late_dropped"]),
        refused=int(job["refused"]),
        dead_letters=_count(feed.bootstrap, f"{feed.topic}.dlq"),
        differences=_number(r"(\d+) difference\(s\)", summary),
        verified=verified.returncode == 0,
        seconds=time.monotonic() - started,
    )


def _produce(
    feed: Feed, records: EventRecords, times: list[int], rng: random.Random, *, broken: int = 0
) -> None:
    producer = make_producer({"bootstrap.servers": feed.bootstrap})
    for n, at in enumerate(times):
        key, value, headers = records.record(
            f"till-{rng.randrange(1000)}", n + 1, EVENT_TYPE, at_ms=at,
            order_id=f"o-{rng.randrange(10_000)}", sku=rng.choice(SKUS), quantity=rng.randint(1, 5),
            unit_price_cents=rng.choice((250, 499, 1299)),
        )  # fmt: skip
        producer.produce(feed.topic, key=key, value=value, headers=headers)
    for _ in range(broken):  # the Avro body cut short: refused, not guessed at
        producer.produce(feed.topic, key=key, value=value[:7], headers=headers)
    producer.flush(30)


def _start(feed: Feed) -> None:
    done = _cli(feed, "start", VIEW, "--topic", feed.topic, "--from", "earliest", "--available-now")
    if done.returncode != 0:
        raise RuntimeError(f"materializers start {VIEW} failed:\n{done.stderr[-2000:]}")


def _cli(feed: Feed, *argv: str) -> subprocess.CompletedProcess[str]:
    log = feed.home / "materializers.log"
    feed.home.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        [sys.executable, "-m", "materializers.cli", "--home", str(feed.home), *argv],
        env=feed.env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    with log.open("a") as out:
        out.write(f"$ materializers {' '.join(argv)}\n{done.stdout}{done.stderr}\n")
    return done


def _number(pattern: str, text: str) -> int:
    found = re.search(pattern, text)
    return int(found.group(1)) if found else -1


def _count(bootstrap: str, topic: str) -> int:
    """Records in `topic` (its end offsets; the topic is new, nothing compacted or deleted)."""
    from confluent_kafka import TopicPartition

    consumer = make_consumer({"bootstrap.servers": bootstrap, "group.id": "demo-count"})
    try:
        meta = consumer.list_topics(topic, timeout=10).topics.get(topic)
        if meta is None or meta.error is not None:
            return 0
        return sum(
            consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in meta.partitions
        )
    finally:
        consumer.close()
