"""`cdc tail` over SASL_SSL (SCRAM-SHA-512, the stack's own CA), configured as a user would: the Java
client properties file in KAFKA_CLIENT_CONFIG; and a wrong password refused by name, never printed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from cdc.cli import EXIT_OK, EXIT_REFUSED, main
from devstack.kafka_security import SecureKafka
from devstack.topics import TopicFactory
from kafkakit.clients import make_producer

pytestmark = pytest.mark.integration

# A change event as Debezium's JsonConverter wrote it (recorded from the real connector).
RECORDED = Path(__file__).parents[2] / "unit" / "cdc" / "fixtures" / "debezium_records.json"


def test_tail_reads_over_sasl_ssl_and_a_wrong_password_is_named(
    secure_kafka: SecureKafka,
    topic_factory: TopicFactory,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    record: dict[str, Any] = json.loads(RECORDED.read_text())["toast"][0]
    topic = topic_factory("cdc-sec")
    producer = make_producer(
        {"bootstrap.servers": secure_kafka.bootstrap_servers}, client_config=secure_kafka.client_config
    )
    producer.produce(topic, key=record["key"].encode(), value=record["value"].encode())
    assert producer.flush(30) == 0
    for name, value in secure_kafka.env().items():
        monkeypatch.setenv(name, value)
    tail = ["tail", topic, "--from-beginning", "--max", "1", "--idle-timeout", "30"]
    capsys.readouterr()

    assert main(tail) == EXIT_OK
    [line] = capsys.readouterr().out.splitlines()
    event = json.loads(line)
    assert (event["op"], event["after"]["id"]) == ("CREATE", 1)

    monkeypatch.setenv("KAFKA_CLIENT_SASL_PASSWORD", "not-the-password")  # overrides the file's
    assert main(tail) == EXIT_REFUSED
    out = capsys.readouterr()
    assert out.out == ""
    error = " ".join(out.err.split())  # unwrapped from the console's lines
    assert f"Kafka at {secure_kafka.bootstrap_servers}" in error
    assert "refused the SCRAM-SHA-512 login of user 'toolkit'" in error
    assert "KAFKA_CLIENT_SASL_PASSWORD" in error
    assert "not-the-password" not in out.err
    assert (secure_kafka.client_config.sasl_password or "?") not in out.err
