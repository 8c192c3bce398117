"""Issue 24's "Done when": no configured password in any output, log file or report of a run.

The CLIs of the three packages run as processes with recognisable passwords configured everywhere:
Kafka SASL/SCRAM through the stack's secured listener (`secure_kafka`), basic auth for Connect and the
registry on a test-owned HTTPS server (security_helpers), `requirepass` on a test-owned redis-server.
Successful commands and failing ones (wrong passwords in a variable or in a URL, a missing topic); then
every captured stdout/stderr, every file the commands wrote under their working directory and homes
(logs, status and report JSON) is searched for every password, and none is found.

A materializer driver runs for real too (`materializers start --available-now` over a three-record
topic: Spark's Kafka source and dead-letter sink over SASL_SSL, the cache view in the test's Redis over
TLS with `requirepass`, the registry behind basic auth), so its `status.json`, checkpoint and log are
among the files searched.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from security_helpers import Pki, RedisServer

from devstack.kafka_security import SecureKafka

pytestmark = pytest.mark.integration

HTTP_PASSWORD, HTTP_WRONG = "Leak-Http-Pw-5qx2", "Leak-Wrong-Http-8vn1"
REDIS_PASSWORD, REDIS_WRONG = "Leak-Redis-Pw-3mz7", "Leak-Wrong-Redis-6kd4"
KAFKA_WRONG = "Leak-Wrong-Scram-2hw9"
USER = "toolkit"
# Inherited variables that would point a command elsewhere than this test says
_OURS = ("KAFKA_", "SCHEMA_REGISTRY_", "REDIS_", "PG_DSN", "EVENTSTORE_", "MATERIALIZERS_")


@dataclass(frozen=True, slots=True)
class Run:
    command: list[str]
    code: int
    stdout: str
    stderr: str


def test_no_password_reaches_any_output_log_or_report(
    stack: Any, secure_kafka: SecureKafka, https: str, redis: RedisServer, pki: Pki, tmp_path: Path
) -> None:
    scram = secure_kafka.client_config.sasl_password or ""
    assert scram, "the secured listener's client config has no SCRAM password"
    secrets = (scram, HTTP_PASSWORD, HTTP_WRONG, REDIS_PASSWORD, REDIS_WRONG, KAFKA_WRONG)
    work = tmp_path / "run"
    work.mkdir()
    store = f"leak-{uuid.uuid4().hex[:8]}"
    base = {k: v for k, v in os.environ.items() if not k.startswith(_OURS)} | {
        **secure_kafka.env(),  # SASL_SSL, the SCRAM password in the client file
        "PG_DSN": stack.pg_dsn,
        "KAFKA_CONNECT_URL": https,
        "KAFKA_CONNECT_USERNAME": USER,
        "KAFKA_CONNECT_PASSWORD": HTTP_PASSWORD,
        "KAFKA_CONNECT_CA_FILE": str(pki.ca),
        "SCHEMA_REGISTRY_URL": stack.schema_registry_url,  # the real one (eventstore registers schemas)
        "REDIS_URL": redis.url,
        "REDIS_PASSWORD": REDIS_PASSWORD,
        "EVENTSTORE_NAME": store,
        "EVENTSTORE_PARTITIONS": "1",
        "EVENTSTORE_AGGREGATE": "shop.order:ORDER",
        "MATERIALIZERS_HOME": str(work / "materializers"),
        "COLUMNS": "200",
    }
    authed_registry = {
        "SCHEMA_REGISTRY_URL": f"{https}/apis/ccompat/v7",
        "SCHEMA_REGISTRY_USERNAME": USER,
        "SCHEMA_REGISTRY_PASSWORD": HTTP_PASSWORD,
        "SCHEMA_REGISTRY_CA_FILE": str(pki.ca),
    }
    runs: list[Run] = []

    def execute(package: str, args: list[str], env: dict[str, str], timeout_s: float) -> Run:
        command = [sys.executable, "-m", f"{package}.cli", *args]
        done = subprocess.run(
            command, cwd=work, env=base | env, capture_output=True, text=True, timeout=timeout_s
        )
        runs.append(Run(command, done.returncode, done.stdout, done.stderr))
        return runs[-1]

    def run(package: str, *args: str, **env: str) -> Run:
        return execute(package, list(args), env, 60)

    try:
        # cdc: Connect over HTTPS with basic auth, Kafka over SASL_SSL
        assert run("cdc", "status", "--json").code == 0, runs[-1].stderr
        assert run("cdc", "status", KAFKA_CONNECT_PASSWORD=HTTP_WRONG).code == 1
        assert "KAFKA_CONNECT_PASSWORD" in runs[-1].stderr
        at = https.replace("https://", f"https://{USER}:{HTTP_WRONG}@")
        assert (
            run(
                "cdc", "status", "--connect-url", at, KAFKA_CONNECT_USERNAME="", KAFKA_CONNECT_PASSWORD=""
            ).code
            == 1
        )
        assert f"https://{USER}:***@" in runs[-1].stderr
        assert run("cdc", "tail", f"{store}.missing", "--max", "1", "--idle-timeout", "1").code != 0
        # eventstore: topics over SASL_SSL, schemas in the real registry; the authed registry too
        assert run("eventstore", "init", "--json").code == 0, runs[-1].stderr
        assert run("eventstore", "subscribe", "--until-end", "--json").code == 0, runs[-1].stderr
        assert run("eventstore", "read", "order-1", "--json").code != 0  # no such stream: refused
        assert run("eventstore", "schemas", "list", "--json", **authed_registry).code == 0, runs[-1].stderr
        wrong_registry = authed_registry | {"SCHEMA_REGISTRY_PASSWORD": HTTP_WRONG}
        assert run("eventstore", "schemas", "list", "--json", **wrong_registry).code != 0
        assert "SCHEMA_REGISTRY_PASSWORD" in runs[-1].stdout + runs[-1].stderr
        assert (
            run("eventstore", "read", "order-1", "--json", KAFKA_CLIENT_SASL_PASSWORD=KAFKA_WRONG).code != 0
        )
        assert "KafkaAccessRefused" in runs[-1].stdout + runs[-1].stderr
        # materializers: Redis with requirepass (plain and TLS), Kafka over SASL_SSL; stopped before Spark
        assert run("materializers", "status", "--json").code == 0, runs[-1].stderr
        products = ["start", "shop.products:PRODUCTS", "--topic", f"{store}.missing", "--views", "cache"]
        assert run("materializers", *products, REDIS_PASSWORD=REDIS_WRONG).code != 0
        assert "REDIS_PASSWORD" in runs[-1].stderr
        tls = {"REDIS_URL": redis.tls_url, "REDIS_CA_FILE": str(pki.ca)}
        assert run("materializers", *products, **tls).code != 0  # Redis fine: the topic is missing
        assert f"{store}.missing" in runs[-1].stderr and "REDIS" not in runs[-1].stderr
        # a driver that runs: Spark reads and dead-letters over SASL_SSL, writes Redis over TLS
        source = f"{store}.products"
        _produce_products(secure_kafka, source)
        driver = ["start", "shop.products:PRODUCTS", "--topic", source, "--views", "cache"]
        driver += ["--redis-prefix", store, "--from", "earliest", "--available-now"]
        # Spark's start-up on a busy machine: well over the minute the other commands get
        assert execute("materializers", driver, tls | authed_registry, 240).code == 0, runs[-1].stderr
        _check_driver_wrote(work / "materializers", redis, store)
    finally:
        _delete_topics(secure_kafka, store)

    leaks = [
        f"{' '.join(r.command[2:])}: {stream}"
        for r in runs
        for stream, text in (("stdout", r.stdout), ("stderr", r.stderr))
        if any(s in text for s in secrets)
    ]
    written = [p for p in work.rglob("*") if p.is_file()]
    leaks += [str(p) for p in written if any(s.encode() in p.read_bytes() for s in secrets)]
    if os.environ.get("TOOLKIT_TEST_SHOW_RUNS"):  # to read what each command said
        print(json.dumps([[r.command[2:], r.code, r.stdout[-400:], r.stderr[-600:]] for r in runs], indent=1))
    assert leaks == [], "passwords found in: " + json.dumps(leaks, indent=1)
    assert len(runs) == 14


def _delete_topics(secure_kafka: SecureKafka, store: str) -> None:
    from kafkakit.clients import admin_client

    with admin_client(
        {"bootstrap.servers": secure_kafka.bootstrap_servers}, client_config=secure_kafka.client_config
    ) as admin:
        doomed = [t for t in admin.list_topics(timeout=10).topics if t.startswith(f"{store}.")]
        for future in (admin.delete_topics(doomed) if doomed else {}).values():
            future.result()


def _produce_products(secure_kafka: SecureKafka, topic: str) -> None:
    """Two product rows as Debezium's JsonConverter writes them, and one record no decoder takes (a dead
    letter, so Spark's Kafka sink logs in too)."""
    from confluent_kafka.admin import NewTopic  # type: ignore[attr-defined]

    from kafkakit.clients import admin_client, make_producer

    bootstrap = {"bootstrap.servers": secure_kafka.bootstrap_servers}
    with admin_client(bootstrap, client_config=secure_kafka.client_config) as admin:
        admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)])[topic].result()
    producer = make_producer(bootstrap, client_config=secure_kafka.client_config)
    for i in (1, 2):
        row = {"id": i, "name": f"p{i}", "description": "d", "price": "1.00", "stock": i}
        source = {"lsn": 100 + i, "ts_ms": 1_764_000_000_000, "connector": "postgresql"}
        payload = {"before": None, "after": row, "source": source, "op": "c", "ts_ms": 1_764_000_000_000}
        key = {"schema": {"type": "struct"}, "payload": {"id": i}}
        value = {"schema": {"type": "struct"}, "payload": payload}
        producer.produce(topic, key=json.dumps(key).encode(), value=json.dumps(value).encode())
    producer.produce(topic, key=b'{"payload":{"id":3}}', value=b"\x00not json")
    assert producer.flush(30) == 0


def _check_driver_wrote(home: Path, redis: RedisServer, prefix: str) -> None:
    """The driver ran to the end: its status says stopped after a batch with the dead letter, its
    checkpoint committed, and the cache view holds the rows (so the files grepped are a real run's)."""
    import redis as redis_client

    [status_file] = home.rglob("status.json")
    final = json.loads(status_file.read_text())
    assert (final["state"], final["dead_letters"]) == ("stopped", 1), final
    assert final["batch_id"] >= 0 and final["last_error"] == "", final
    assert any(p.is_file() for p in Path(final["checkpoint"]).rglob("*")), final["checkpoint"]
    client = redis_client.Redis.from_url(redis.url, password=REDIS_PASSWORD)
    try:
        assert list(client.scan_iter(match=f"{prefix}:*")), "the cache view wrote nothing"
    finally:
        client.close()
