"""The stack is real: a Debezium Postgres connector registered through Connect's REST API captures a
snapshot, an insert, an update and a delete into a compacted topic, and the registry and Redis answer."""

from __future__ import annotations

import json
import time
import uuid
from typing import Any
from urllib.parse import urlparse

import httpx
import psycopg
import pytest
import redis
from confluent_kafka import Consumer, KafkaError
from confluent_kafka.admin import AdminClient, ConfigResource

from cdc.slots import drop_slot
from devstack.session import StackHandle

pytestmark = pytest.mark.integration


def _connector_config(stack: StackHandle, table: str, prefix: str, slot: str) -> dict[str, str]:
    dsn = urlparse(stack.connect_view.pg_dsn)  # Postgres as Connect reaches it (postgres:5432 in containers)
    return {
        "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
        "plugin.name": "pgoutput",  # Debezium's default, decoderbufs, is not installed in Postgres
        "database.hostname": dsn.hostname or "127.0.0.1",
        "database.port": str(dsn.port or 5432),
        "database.user": dsn.username or "postgres",
        "database.password": dsn.password or "postgres",
        "database.dbname": dsn.path.lstrip("/") or "postgres",
        "topic.prefix": prefix,
        "table.include.list": f"public.{table}",
        "slot.name": slot,
        "publication.name": f"{slot}_pub",
        "publication.autocreate.mode": "filtered",
        "tombstones.on.delete": "true",
        "topic.creation.default.replication.factor": "1",
        "topic.creation.default.partitions": "1",
        "topic.creation.default.cleanup.policy": "compact",
    }


def _wait_running(client: httpx.Client, name: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        resp = client.get(f"/connectors/{name}/status")
        if resp.status_code == 200:
            body = resp.json()
            states = [body["connector"]["state"], *(t["state"] for t in body["tasks"])]
            assert "FAILED" not in states, json.dumps(body, indent=2)
            if body["tasks"] and set(states) == {"RUNNING"}:
                return
        time.sleep(0.5)
    raise AssertionError(f"connector {name} not RUNNING after {timeout}s")


def _consume(stack: StackHandle, topic: str, count: int, timeout: float = 60) -> list[Any]:
    consumer = Consumer(
        {
            "bootstrap.servers": stack.kafka_bootstrap_servers,
            "group.id": f"test-{uuid.uuid4().hex}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([topic])
    records = []
    deadline = time.monotonic() + timeout
    try:
        while len(records) < count and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                assert msg.error().code() in (KafkaError._PARTITION_EOF, KafkaError.UNKNOWN_TOPIC_OR_PART), (
                    msg.error()
                )
                continue
            records.append(msg)
    finally:
        consumer.close()
    assert len(records) >= count, f"only {len(records)} of {count} records arrived on {topic}"
    return records


def test_debezium_captures_snapshot_insert_update_delete_into_a_compacted_topic(stack: StackHandle) -> None:
    suffix = uuid.uuid4().hex[:8]
    table, prefix, slot, name = f"items_{suffix}", f"rt{suffix}", f"rt_{suffix}", f"roundtrip-{suffix}"
    with psycopg.connect(stack.pg_dsn, autocommit=True) as conn:
        conn.execute(f"create table {table} (id int primary key, name text not null, qty int)")
        conn.execute(f"insert into {table} values (1, 'before-snapshot', 5)")
    client = httpx.Client(base_url=stack.kafka_connect_url, timeout=30)
    try:
        resp = client.put(f"/connectors/{name}/config", json=_connector_config(stack, table, prefix, slot))
        assert resp.status_code in (200, 201), resp.text
        _wait_running(client, name)
        with psycopg.connect(stack.pg_dsn, autocommit=True) as conn:
            conn.execute(f"insert into {table} values (2, 'inserted', 1)")
            conn.execute(f"update {table} set qty = 7 where id = 2")
            conn.execute(f"delete from {table} where id = 1")

        topic = f"{prefix}.public.{table}"
        records = _consume(stack, topic, count=5)  # r, c, u, d + tombstone
        values = [json.loads(m.value()) if m.value() is not None else None for m in records]
        keys = [json.loads(m.key())["payload"] for m in records]
        ops = [v["payload"]["op"] if v else None for v in values]
        assert ops == ["r", "c", "u", "d", None]
        assert keys == [{"id": 1}, {"id": 2}, {"id": 2}, {"id": 1}, {"id": 1}]
        payloads = [v["payload"] if v else None for v in values]
        assert payloads[0]["after"] == {"id": 1, "name": "before-snapshot", "qty": 5}
        assert payloads[1]["before"] is None and payloads[1]["after"] == {
            "id": 2,
            "name": "inserted",
            "qty": 1,
        }
        assert payloads[2]["after"]["qty"] == 7
        assert payloads[3]["before"]["id"] == 1 and payloads[3]["after"] is None
        assert payloads[0]["source"]["snapshot"] in (
            "true",
            "last",
            "first_in_data_collection",
            "last_in_data_collection",
        )

        admin = AdminClient({"bootstrap.servers": stack.kafka_bootstrap_servers})
        resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
        configs = admin.describe_configs([resource])[resource].result(timeout=10)
        assert configs["cleanup.policy"].value == "compact"
    finally:
        client.delete(f"/connectors/{name}")
        client.close()
        drop_slot(stack.pg_dsn, slot, f"{slot}_pub")


def test_schema_registry_stores_and_serves_an_avro_schema(stack: StackHandle) -> None:
    subject = f"stack-check-{uuid.uuid4().hex[:8]}-value"
    schema = {"type": "record", "name": "Check", "fields": [{"name": "n", "type": "int"}]}
    with httpx.Client(base_url=stack.schema_registry_url, timeout=10) as client:
        resp = client.post(f"/subjects/{subject}/versions", json={"schema": json.dumps(schema)})
        assert resp.status_code == 200, resp.text
        schema_id = resp.json()["id"]
        fetched = client.get(f"/schemas/ids/{schema_id}").json()
        assert json.loads(fetched["schema"]) == schema


def test_redis_answers_reads_and_writes(stack: StackHandle) -> None:
    client = redis.Redis.from_url(stack.redis_url)
    key = f"stack-check:{uuid.uuid4().hex}"
    client.set(key, b"\x00bytes\xff", ex=60)
    assert client.get(key) == b"\x00bytes\xff"
