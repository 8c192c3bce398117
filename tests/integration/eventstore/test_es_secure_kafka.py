"""The event store over SASL_SSL (SCRAM-SHA-512, the stack's own CA): topics created, commands appended
by a processor process and read back, every client through the secured listener; and a client with a
wrong password refused by name, with nothing written."""

from __future__ import annotations

import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from es_helpers import cli_env

from devstack.kafka_security import SecureKafka
from eventstore import EventStore, StoreConfig
from eventstore.kafkaio import end_offsets, reader
from kafkakit.clients import admin_client
from kafkakit.errors import KafkaAccessRefused
from shop import order as o
from shop.order import ORDER

pytestmark = pytest.mark.integration


@pytest.fixture
def secure_store(stack: Any, secure_kafka: SecureKafka) -> Iterator[StoreConfig]:
    """A fresh store whose every Kafka client goes through the secured listener; topics deleted after."""
    config = StoreConfig(
        name=f"es-sec-{uuid.uuid4().hex[:8]}",
        bootstrap_servers=secure_kafka.bootstrap_servers,
        kafka_client=secure_kafka.client_config,
        schema_registry_url=stack.schema_registry_url,
        partitions=1,
        reply_timeout_s=60,
    )
    yield config
    with admin_client(
        {"bootstrap.servers": config.bootstrap_servers}, client_config=config.kafka_client
    ) as admin:
        doomed = [t for t in admin.list_topics(timeout=10).topics if t.startswith(f"{config.name}.")]
        if doomed:
            for future in admin.delete_topics(doomed).values():
                future.result()


def test_append_and_read_over_sasl_ssl(secure_store: StoreConfig, tmp_path: Path) -> None:
    store = EventStore(secure_store, ORDER)
    store.init()  # admin client over SASL_SSL
    log = tmp_path / "processor.log"
    # The processor is a child process: it gets the secured config through StoreConfig.as_env.
    processor = subprocess.Popen(
        [sys.executable, "-m", "eventstore.cli", "processor", "--instance-id", "sec"],
        env=cli_env(secure_store),
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
    )
    try:
        with store.client() as client:
            client.execute(o.CreateOrder(order_id="1", customer_id="c"), expected_version=0)
            client.execute(
                o.AddLine(order_id="1", sku="x", quantity=2, unit_price_cents=5), expected_version=1
            )
            assert [e.version for e in client.read_stream("order-1")] == [1, 2]
        assert [e.event_type for e in store.read("order-1")] == ["order.created", "order.line_added"]
        assert store.load("order-1").version == 2
    finally:
        processor.send_signal(signal.SIGTERM)
        assert processor.wait(30) == 0, log.read_text()[-3000:]
    secret = secure_store.kafka_client.sasl_password or ""
    assert secret and secret not in log.read_text()


def test_a_wrong_password_is_refused_by_name_and_nothing_is_written(secure_store: StoreConfig) -> None:
    EventStore(secure_store, ORDER).init()
    wrong = replace(secure_store, kafka_client=replace(secure_store.kafka_client, sasl_password="not-it"))
    with pytest.raises(KafkaAccessRefused) as info, EventStore(wrong, ORDER).client() as client:
        client.execute(o.CreateOrder(order_id="9", customer_id="c"), expected_version=0)
    message = str(info.value)
    assert f"Kafka at {secure_store.bootstrap_servers}" in message  # the service
    assert "SCRAM-SHA-512 login of user 'toolkit'" in message and "KAFKA_CLIENT_SASL_PASSWORD" in message
    assert "not-it" not in message and (secure_store.kafka_client.sasl_password or "?") not in message
    consumer = reader(secure_store.bootstrap_servers, client_config=secure_store.kafka_client)
    try:
        for topic in (secure_store.commands_topic, secure_store.events_topic):
            assert end_offsets(consumer, topic, 0) == (0, 0)  # nothing was written
    finally:
        consumer.close()
