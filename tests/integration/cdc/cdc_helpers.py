"""Test plumbing for the cdc integration tests and the fixture capture script (real services only).

The connector factory lives in the toolkit's pytest plugin (`devstack.connectors.ConnectorFactory`).
Every Kafka client of the tests (and every `cdc` CLI run) reaches Kafka through `KafkaAccess`: the
stack's SASL_SSL listener where it has one, else PLAINTEXT. Connect itself writes Debezium's topics
through the broker's PLAINTEXT listener: that is the stack's choice, not the tests'."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import psycopg
from confluent_kafka import KafkaException, TopicPartition

from cdc.avro_records import SchemaLookup
from cdc.change_event import ChangeEvent, Tombstone, decode_record
from cdc.connector_spec import DatabaseSpec
from devstack.kafka_security import KafkaAccess

T = TypeVar("T")

# Tests that must hold for every record format take the plugin's `connector_format` fixture through
# @pytest.mark.parametrize("connector_format", RECORD_FORMATS, indirect=True); the others get JSON.
RECORD_FORMATS = ("json", "avro")


def wait_until(get: Callable[[], T], ok: Callable[[T], bool], *, timeout: float) -> T:
    """Poll `get()` until `ok(value)`; fail with the last value after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = get()
        if ok(value):
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met after {timeout}s; last value: {value!r}")
        time.sleep(0.3)


def unique(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:10]}"


@dataclass(frozen=True, slots=True)
class RawRecord:
    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] = ()


def read_topic(
    kafka: KafkaAccess, topic: str, *, until: Callable[[list[RawRecord]], bool], timeout: float = 60.0
) -> list[RawRecord]:
    """Read `topic` from the beginning until `until(records)` holds; fail after `timeout`."""
    consumer = kafka.consumer(
        **{"group.id": unique("cdc-test"), "enable.auto.commit": False, "auto.offset.reset": "earliest"}
    )
    records: list[RawRecord] = []
    deadline = time.monotonic() + timeout
    try:
        assigned = False
        while time.monotonic() < deadline:
            if not assigned:
                meta = consumer.list_topics(topic, timeout=5).topics.get(topic)
                if meta is None or meta.error is not None or not meta.partitions:
                    time.sleep(0.2)
                    continue
                consumer.assign([TopicPartition(topic, p, -2) for p in sorted(meta.partitions)])
                assigned = True
            msg = consumer.poll(0.5)
            if msg is not None:
                if msg.error():
                    if msg.error().retriable() or "UNKNOWN_TOPIC" in str(msg.error()):
                        continue
                    raise KafkaException(msg.error())
                records.append(
                    RawRecord(
                        msg.topic(),
                        msg.partition(),
                        msg.offset(),
                        msg.key(),
                        msg.value(),
                        tuple(msg.headers() or ()),
                    )
                )
                continue
            if until(records):
                return records
        if until(records):
            return records
        raise AssertionError(f"{topic}: condition not met after {timeout}s with {len(records)} records")
    finally:
        consumer.close()


def decode_all(
    records: list[RawRecord], schemas: SchemaLookup | None = None
) -> list[ChangeEvent | Tombstone]:
    return [
        decode_record(
            topic=r.topic, partition=r.partition, offset=r.offset, key=r.key, value=r.value, schemas=schemas
        )
        for r in records
    ]


@contextmanager
def pg(pg_dsn: str) -> Iterator[psycopg.Connection[tuple[Any, ...]]]:
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        yield conn


# ---- specs for the `cdc` CLI (its flags: the conftest's `cli_flags` fixture) -------------------------
def spec_doc(stack: Any, name: str, tables: list[str], **over: Any) -> dict[str, Any]:
    """A spec file's document for `tables` (`over`: more keys); no format, so the default (Avro). The
    database is Connect's view of it (run pre-flight with the `preflight_flags` fixture)."""
    db = DatabaseSpec.from_dsn(stack.connect_view.pg_dsn)
    return {
        "name": name,
        "database": {"hostname": db.hostname, "port": db.port, "user": db.user, "dbname": db.dbname}
        | ({"password": db.password} if db.password else {}),
        "topic_prefix": name.replace("-", "_"),
        "tables": tables,
        "heartbeat": {"interval_ms": 1000},
        **over,
    }


def write_spec(tmp_path: Path, doc: dict[str, Any]) -> Path:
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(doc))
    return path
