"""Factory fixtures for the materializer integration tests: ONE SparkSession for the whole run."""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import NewTopic  # type: ignore[attr-defined]

from devstack.kafka_security import KafkaAccess
from kafkakit.clients import make_admin, make_consumer, make_producer
from kafkakit.settings import Endpoints
from materializers.config import RunConfig
from materializers.spark import session as spark_session


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    session = spark_session.build("local[2]", "materializers-tests")
    yield session
    session.stop()


@pytest.fixture
def uid() -> str:
    return uuid.uuid4().hex[:10]


@pytest.fixture
def endpoints(stack: Any, kafka: KafkaAccess) -> Endpoints:
    """The stack's endpoints, Kafka at its SASL_SSL listener where it has one (tests/conftest.py)."""
    plain = Endpoints(
        kafka_bootstrap_servers=stack.kafka_bootstrap_servers,
        kafka_connect_url=stack.kafka_connect_url,
        pg_dsn=stack.pg_dsn,
        redis_url=stack.redis_url,
        schema_registry_url=stack.schema_registry_url,
    )
    return kafka.endpoints(plain)


@pytest.fixture
def run_config(endpoints: Endpoints, tmp_path: Path, uid: str) -> Callable[..., RunConfig]:
    def make(**overrides: Any) -> RunConfig:
        base = RunConfig(
            endpoints=endpoints, home=tmp_path / "home", redis_prefix=f"mat-test-{uid}", optimize_every=2
        )
        return base.with_overrides(**overrides) if overrides else base

    return make


@pytest.fixture
def cli_env(monkeypatch: pytest.MonkeyPatch, endpoints: Endpoints, tmp_path: Path, uid: str) -> Path:
    """The CLI's environment (stack endpoints, a fresh home, a unique Redis prefix); returns the home."""
    for name, value in endpoints.as_env().items():
        monkeypatch.setenv(name, value)
    home = tmp_path / "home"
    monkeypatch.setenv("MATERIALIZERS_HOME", str(home))
    monkeypatch.setenv("MATERIALIZERS_REDIS_PREFIX", f"mat-bad-{uid}")
    return home


@pytest.fixture
def topics(endpoints: Endpoints) -> Iterator[Callable[[str], str]]:
    """Create a topic (1 partition, RF 1) named <prefix>-<uuid>; deleted (with its .dlq) at the end."""
    admin = make_admin(
        {"bootstrap.servers": endpoints.kafka_bootstrap_servers}, client_config=endpoints.kafka_client
    )
    made: list[str] = []

    def create(prefix: str) -> str:
        name = f"{prefix}-{uuid.uuid4().hex[:8]}"
        admin.create_topics([NewTopic(name, 1, 1)])[name].result(timeout=30)
        made.append(name)
        return name

    yield create
    doomed = [t for name in made for t in (name, f"{name}.dlq")]
    existing = admin.list_topics(timeout=10).topics
    doomed += [t for t in existing if any(t.startswith(f"{m}.") for m in made)]
    # Metadata can lag a topic created a moment ago (seen right after `make up`): delete what it lists.
    listed = sorted(set(doomed) & set(existing))
    if listed:
        admin.delete_topics(listed)


@pytest.fixture
def producer(endpoints: Endpoints) -> Producer:
    return make_producer(
        {"bootstrap.servers": endpoints.kafka_bootstrap_servers, "enable.idempotence": True},
        client_config=endpoints.kafka_client,
    )


def consumer_of(endpoints: Endpoints, **settings: Any) -> Consumer:
    """A consumer of the stack's Kafka (its security settings included), in a group of its own."""
    return make_consumer(
        {
            "bootstrap.servers": endpoints.kafka_bootstrap_servers,
            "group.id": f"t-{uuid.uuid4().hex}",
            **settings,
        },
        client_config=endpoints.kafka_client,
    )


def read_all(endpoints: Endpoints, topic: str, timeout: float = 30.0) -> list[Any]:
    """Every record of a 1-partition topic up to its current end."""
    consumer = consumer_of(endpoints, **{"enable.auto.commit": False})
    try:
        end = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)[1]
        consumer.assign([TopicPartition(topic, 0, 0)])
        found: list[Any] = []
        deadline = time.monotonic() + timeout
        while end and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                found.append(msg)
                if msg.offset() >= end - 1:
                    break
        return found
    finally:
        consumer.close()


def wait_for_end_offset(endpoints: Endpoints, topic: str, at_least: int, timeout: float = 60.0) -> int:
    consumer = consumer_of(endpoints)
    try:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                end = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=5)[1]
            except Exception:  # the topic may not exist yet (Connect creates it)
                end = -1
            if end >= at_least:
                return int(end)
            time.sleep(0.3)
        raise AssertionError(f"{topic} did not reach {at_least} records in {timeout}s")
    finally:
        consumer.close()


class CdcSource:
    """A Postgres table captured by its own Debezium connector (pgoutput, unique slot/publication)."""

    def __init__(self, endpoints: Endpoints, uid: str, ddl: str, connect_pg_dsn: str | None = None) -> None:
        self.endpoints = endpoints
        self.connect_pg_dsn = connect_pg_dsn or endpoints.pg_dsn  # Postgres as the Connect worker reaches it
        self.table = f"mat_products_{uid}"
        self.name = f"mat-{uid}"
        self.slot = f"mat_slot_{uid}"
        self.publication = f"mat_pub_{uid}"
        self.prefix = f"mat{uid}"
        self.topic = f"{self.prefix}.public.{self.table}"
        self.pg = psycopg.connect(endpoints.pg_dsn, autocommit=True)
        self.pg.execute(f"CREATE TABLE {self.table} ({ddl})")  # type: ignore[arg-type]

    def start(self, **extra: str) -> None:
        """Register the connector (`extra`: more connector config, e.g. converter settings)."""
        dsn = psycopg.conninfo.conninfo_to_dict(self.connect_pg_dsn)
        config = {
            "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
            "plugin.name": "pgoutput",
            "slot.name": self.slot,
            "publication.name": self.publication,
            "publication.autocreate.mode": "filtered",
            "topic.prefix": self.prefix,
            "table.include.list": f"public.{self.table}",
            "decimal.handling.mode": "string",
            "topic.creation.default.replication.factor": "1",
            "topic.creation.default.partitions": "1",
            "topic.creation.default.cleanup.policy": "compact",
            "database.hostname": str(dsn.get("host", "127.0.0.1")),
            "database.port": str(dsn.get("port", "5432")),
            "database.user": str(dsn.get("user", "postgres")),
            "database.password": str(dsn.get("password", "")),
            "database.dbname": str(dsn.get("dbname", "postgres")),
            **extra,
        }
        url = f"{self.endpoints.kafka_connect_url}/connectors/{self.name}"
        httpx.put(f"{url}/config", json=config, timeout=30).raise_for_status()
        # Slot creation waits for every open transaction in the database (other tests share it): allow time.
        deadline = time.monotonic() + 180
        body: Any = None
        while time.monotonic() < deadline:
            reply = httpx.get(f"{url}/status", timeout=10)
            if reply.status_code == 200:
                body = reply.json()
                tasks = body.get("tasks", [])
                if any(t["state"] == "FAILED" for t in tasks):
                    raise AssertionError(f"connector failed: {body}")
                if (
                    body["connector"]["state"] == "RUNNING"
                    and tasks
                    and all(t["state"] == "RUNNING" for t in tasks)
                ):
                    return
            time.sleep(0.3)
        raise AssertionError(f"connector {self.name} not RUNNING in 180s; last status {body}")

    def close(self) -> None:
        httpx.delete(f"{self.endpoints.kafka_connect_url}/connectors/{self.name}", timeout=30)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            row = self.pg.execute(
                "SELECT active FROM pg_replication_slots WHERE slot_name = %s", (self.slot,)
            ).fetchone()
            if row is None:
                break
            if not row[0]:
                self.pg.execute("SELECT pg_drop_replication_slot(%s)", (self.slot,))
                break
            time.sleep(0.3)
        self.pg.execute(f"DROP PUBLICATION IF EXISTS {self.publication}")  # type: ignore[arg-type]
        self.pg.execute(f"DROP TABLE IF EXISTS {self.table}")  # type: ignore[arg-type]
        self.pg.close()
        admin = make_admin(
            {"bootstrap.servers": self.endpoints.kafka_bootstrap_servers},
            client_config=self.endpoints.kafka_client,
        )
        doomed = [t for t in admin.list_topics(timeout=10).topics if t.startswith(self.topic)]
        if doomed:
            admin.delete_topics(doomed)


@pytest.fixture(scope="session", autouse=True)
def opensearch_of_the_stack(stack: Any) -> Iterator[None]:
    """The stack's OpenSearch address where the search tests look for it (OPENSEARCH_URL), for stacks
    that are not described by an env file (containers); one set by the caller wins."""
    if stack.opensearch_url and not os.environ.get("OPENSEARCH_URL"):
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv("OPENSEARCH_URL", stack.opensearch_url)
            yield
    else:
        yield


@pytest.fixture
def cdc_source(stack: Any, endpoints: Endpoints, uid: str) -> Iterator[Callable[[str], CdcSource]]:
    made: list[CdcSource] = []

    def make(ddl: str) -> CdcSource:
        source = CdcSource(endpoints, uid, ddl, stack.connect_view.pg_dsn)
        made.append(source)
        return source

    yield make
    for source in made:
        source.close()


def wait_for_failpoint(marker: Path, driver: Any, timeout: float = 240.0) -> None:
    """Poll until a driver started with a failpoint has written its marker (it is then mid-batch)."""
    deadline = time.monotonic() + timeout
    while not marker.exists() and driver.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
    assert marker.exists(), f"driver never reached its failpoint (exit {driver.poll()})"


def crash_at_failpoint(argv: list[str], env: dict[str, str], step: str, marker: Path) -> None:
    """Start a driver that stops at `step` of its first batch, wait until it is there, then kill -9
    its whole process group (the driver and its JVM: a hard crash)."""
    import os
    import signal
    import subprocess

    from materializers.config import ENV_FAILPOINT

    crashing = subprocess.Popen(
        argv, env={**env, ENV_FAILPOINT: f"{step}:{marker}"}, start_new_session=True,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        wait_for_failpoint(marker, crashing)
    finally:
        os.killpg(crashing.pid, signal.SIGKILL)
        crashing.wait(30)


def run_once(spark: Any, plan: Any, start: str = "earliest", job: Any = None) -> Any:
    """Run a job (a new one, or `job` again: what it learned stays) until it has processed everything
    available now; return the Job."""
    from kafkakit.positions import parse_start
    from materializers.runtime.job import Job

    job = job or Job(spark, plan)
    query = job.start(parse_start(start), available_now=True)
    query.awaitTermination(240)
    assert query.exception() is None, query.exception()
    assert not query.isActive, "availableNow query did not finish in 240s"
    return job
