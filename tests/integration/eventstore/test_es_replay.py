"""Replay reproduces keys, values, headers, timestamps and order byte for byte, exactly once."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka.admin import NewTopic  # type: ignore[attr-defined]
from es_helpers import in_process_cli

from eventstore.cli import main
from eventstore.client import EventStoreClient
from eventstore.config import StoreConfig
from eventstore.kafkaio import read_to_end, reader
from eventstore.serde import raw_pairs
from kafkakit.clients import make_admin, make_producer
from shop import order as o

pytestmark = pytest.mark.integration


def _records(store: StoreConfig, topic: str, partition: int) -> list[tuple[Any, ...]]:
    consumer = reader(store.bootstrap_servers, client_config=store.kafka_client)
    try:
        return [
            (m.key(), m.value(), raw_pairs(m.headers()), m.timestamp()[1])
            for m in read_to_end(consumer, topic, partition)
        ]
    finally:
        consumer.close()


@pytest.fixture(autouse=True)
def kafka_client_env(store: StoreConfig) -> Iterator[None]:
    """The CLI runs in-process here (es_helpers.in_process_cli)."""
    with in_process_cli(store):
        yield


@pytest.fixture
def source(store: StoreConfig) -> str:
    topic = f"{store.name}.replay-src"
    admin = make_admin({"bootstrap.servers": store.bootstrap_servers}, client_config=store.kafka_client)
    # The records are dated 2020: under the broker's default 7-day retention its next retention check
    # (every 5 min) deletes them, once mid-test (log start offset 0 -> 6 between replay and read-back).
    never_expires = {"retention.ms": "-1"}
    for f in admin.create_topics([NewTopic(topic, 2, 1, config=never_expires)]).values():
        f.result()
    producer = make_producer(
        {"bootstrap.servers": store.bootstrap_servers, "enable.idempotence": True},
        client_config=store.kafka_client,
    )
    for i in range(12):
        headers = [("h", f"v{i}".encode()), ("bin", bytes([0, 255, i])), ("h", b"dup-key")]
        key = None if i % 5 == 0 else f"k{i}".encode()
        value = None if i == 7 else bytes([0xFF, i]) + uuid.uuid4().bytes
        producer.produce(
            topic, key=key, value=value, headers=headers, partition=i % 2, timestamp=1_600_000_000_000 + i
        )
    producer.flush(10)
    return topic


def test_replay_to_topic_is_byte_exact_and_resumable(store: StoreConfig, source: str, capsys: Any) -> None:
    dst = f"{store.name}.replay-dst"
    base = ["replay", "--bootstrap-servers", store.bootstrap_servers, "--topic", source, "--json"]
    # First run stops early (exclusive end) — as if it had crashed after committing that far.
    assert main([*base, "--from-offset", "0:2,1:0", "--until-offset", "0:4,1:3", "--to-topic", dst]) == 0
    assert json.loads(capsys.readouterr().out.splitlines()[-1])["total"] == 2 + 3
    assert main([*base, "--from-offset", "0:2,1:0", "--to-topic", dst]) == 0
    report = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert report["resumed_from"] == {"0": 4, "1": 3} and report["total"] == (6 - 4) + (6 - 3)
    assert _records(store, dst, 0) == _records(store, source, 0)[2:]
    assert _records(store, dst, 1) == _records(store, source, 1)
    assert main([*base, "--from-offset", "0:2,1:0", "--to-topic", dst]) == 0  # re-run: nothing twice
    assert json.loads(capsys.readouterr().out.splitlines()[-1])["total"] == 0
    assert len(_records(store, dst, 0)) == 4


def test_replay_to_stdout_decodes_avro_and_json(
    store: StoreConfig, start_processor: Any, client: EventStoreClient[Any], capsys: Any
) -> None:
    start_processor()
    client.execute(o.CreateOrder(order_id="r1", customer_id="ann"))
    cdc_topic = f"{store.name}.cdc-json"
    admin = make_admin({"bootstrap.servers": store.bootstrap_servers}, client_config=store.kafka_client)
    for f in admin.create_topics([NewTopic(cdc_topic, 1, 1)]).values():
        f.result()
    producer = make_producer({"bootstrap.servers": store.bootstrap_servers}, client_config=store.kafka_client)
    envelope = {"schema": {"type": "struct"}, "payload": {"before": None, "after": {"id": 1}, "op": "c"}}
    producer.produce(cdc_topic, key=b'{"id": 1}', value=json.dumps(envelope).encode())
    producer.flush(10)
    common = [
        "replay",
        "--bootstrap-servers",
        store.bootstrap_servers,
        "--schema-registry-url",
        store.schema_registry_url,
    ]
    partition = next(p for p in range(store.partitions) if _records(store, store.events_topic, p))
    assert (
        main([*common, "--topic", store.events_topic, "--from-offset", f"{partition}:0", "--to-stdout"]) == 0
    )
    line = json.loads(capsys.readouterr().out.splitlines()[0])
    assert line["value"] == {"order_id": "r1", "customer_id": "ann"} and line["key"] == "order-r1"
    assert ["event-type", "order.created"] in line["headers"]
    assert (
        main([*common, "--topic", cdc_topic, "--from-timestamp", "2000-01-01T00:00:00Z", "--to-stdout"]) == 0
    )
    line = json.loads(capsys.readouterr().out.splitlines()[0])
    assert line["value"]["payload"]["after"] == {"id": 1}
