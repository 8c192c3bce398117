"""A materializer whose Spark Kafka source and dead-letter sink, and whose confluent-kafka clients (topic
check, dead-letter topic, lag), all go through the stack's SASL_SSL listener (SCRAM-SHA-512, its own CA).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from conftest import read_all, run_once
from records import debezium

from devstack.kafka_security import SecureKafka
from kafkakit.clients import make_producer
from kafkakit.settings import Endpoints
from materializers.config import RunConfig
from materializers.ops import lag
from materializers.runtime.job import JobPlan
from shop.products import PRODUCTS

pytestmark = pytest.mark.integration


def test_a_job_reads_its_source_and_writes_dead_letters_over_sasl_ssl(
    spark: Any, topics: Any, endpoints: Endpoints, secure_kafka: SecureKafka, tmp_path: Path, uid: str
) -> None:
    topic = topics("mat-sec")
    secured = secure_kafka.endpoints(endpoints)
    producer = make_producer(
        {"bootstrap.servers": secured.kafka_bootstrap_servers}, client_config=secured.kafka_client
    )
    for i in (1, 2):
        key, value = debezium(
            i, 100 + i, "c", {"name": f"p{i}", "description": "d", "price": "1.00", "stock": i}
        )
        producer.produce(topic, key=key, value=value)
    producer.produce(topic, key=b'{"payload":{"id":3}}', value=b"\x00not json")  # a dead letter
    assert producer.flush(30) == 0
    config = replace(
        RunConfig(endpoints=secured, home=tmp_path / "home", redis_prefix=f"mat-sec-{uid}"), topic=topic
    )
    plan = JobPlan.of(PRODUCTS, config)
    try:
        job = run_once(spark, plan)
        assert plan.cache().read("2") == {"name": "p2", "description": "d", "price": "1.00", "stock": "2"}
        assert job.dead_letters == 1
        [letter] = read_all(endpoints, plan.dlq_topic)  # written by Spark's sink
        assert letter.value() == b"\x00not json"
        assert lag.measure(
            plan.checkpoint, topic, secured.kafka_bootstrap_servers, client_config=secured.kafka_client
        ) == {f"{topic}[0]": 0}
    finally:
        plan.cache().clear()
