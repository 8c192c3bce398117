"""Test plumbing for the cdc integration tests and the fixture capture script (real services only)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from typing import Any, TypeVar

import psycopg
from confluent_kafka import Consumer, KafkaException, TopicPartition

from cdc.avro_records import SchemaLookup
from cdc.change_event import ChangeEvent, Tombstone, decode_record
from cdc.connect_client import ConnectClient, ConnectorNotFound
from cdc.connector_spec import ConnectorSpec, DatabaseSpec, HeartbeatSpec, RegistrySpec
from cdc.registry_client import RegistryClient
from cdc.slots import drop_slot

T = TypeVar("T")

# Tests that must hold for every record format take the `record_format` fixture through
# @pytest.mark.parametrize("record_format", RECORD_FORMATS, indirect=True); the others get JSON.
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


def read_topic(
    bootstrap: str, topic: str, *, until: Callable[[list[RawRecord]], bool], timeout: float = 60.0
) -> list[RawRecord]:
    """Read `topic` from the beginning until `until(records)` holds; fail after `timeout`."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": unique("cdc-test"),
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
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
                records.append(RawRecord(msg.topic(), msg.partition(), msg.offset(), msg.key(), msg.value()))
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


@dataclass
class ConnectorFactory:
    """Creates uniquely named connectors in `record_format`; `cleanup` deletes them and drops their
    slots/publications. `schemas` reads their Avro records' writer schemas (None for JSON)."""

    connect: ConnectClient
    pg_dsn: str
    record_format: str = "json"
    registry_url: str | None = None
    created: list[ConnectorSpec] = field(default_factory=list)
    _registry: RegistryClient | None = None

    @property
    def schemas(self) -> SchemaLookup | None:
        if self.record_format != "avro" or self.registry_url is None:
            return None
        if self._registry is None:
            self._registry = RegistryClient(self.registry_url)
        return self._registry

    def spec(self, tables: list[str], **overrides: Any) -> ConnectorSpec:
        name = overrides.pop("name", unique("cdct").replace("_", "-"))
        if self.record_format == "avro" and self.registry_url is not None:
            # Connect runs beside the tests (local stack): it reaches the registry at the same URL.
            overrides.setdefault("registry", RegistrySpec.from_url(self.registry_url))
        return ConnectorSpec(
            name=name,
            database=overrides.pop("database", DatabaseSpec.from_dsn(self.pg_dsn)),
            topic_prefix=overrides.pop("topic_prefix", name.replace("-", "_")),
            tables=tuple(tables),
            heartbeat=overrides.pop("heartbeat", HeartbeatSpec(interval_ms=1000)),
            format=overrides.pop("format", self.record_format),
            **overrides,
        )

    def start(self, spec: ConnectorSpec, *, wait: bool = True, preflight: bool = True) -> ConnectorSpec:
        from cdc.preflight import run_preflight

        if preflight:
            run_preflight(spec)
        else:  # what pre-flight would have prepared, without its checks
            with psycopg.connect(self.pg_dsn, autocommit=True) as conn:
                conn.execute(spec.heartbeat_table_ddl())  # type: ignore[arg-type]
        self.created.append(spec)
        self.connect.apply(spec.name, spec.to_config())
        if wait:
            # RUNNING comes before the slot and publication exist; changes made in that window can be
            # missed by an empty-table snapshot. Wait for the snapshot, as a real deployment would.
            self.connect.wait_running(spec.name, timeout=90)
            self.connect.wait_snapshot_complete(spec.name, timeout=90)
        return spec

    def cleanup(self) -> None:
        if self._registry is not None:
            self._registry.close()
        for spec in self.created:
            with suppress(ConnectorNotFound):
                self.connect.delete(spec.name)
            drop_slot(self.pg_dsn, spec.resolved_slot_name, spec.resolved_publication_name)


@contextmanager
def pg(pg_dsn: str) -> Iterator[psycopg.Connection[tuple[Any, ...]]]:
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        yield conn
