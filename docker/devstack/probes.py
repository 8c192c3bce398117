"""Readiness probes for the five services, by address: a real request each, never a log line or a sleep.

Each probe returns True when the service answers within `timeout_s` and False otherwise (refused,
timed out, wrong answer); none raises for an absent service. Used by the local stack's start-up
(`devstack.services`), the containers' wait strategies (`devstack.containers`) and the check of an
external stack (`devstack.session`), so "ready" means the same on every backend:
Postgres `select 1`, a Kafka metadata request listing a broker, Connect's `/connector-plugins` listing
Debezium's PostgresConnector, Redis PING, the registry's Confluent-compatible `/subjects`.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import httpx

from kafkakit.clients import admin_client
from kafkakit.settings import ENV_NAMES, Endpoints

POSTGRES_CONNECTOR = "io.debezium.connector.postgresql.PostgresConnector"

# librdkafka logs every refused connection while a broker boots (or is absent); probes drop those lines.
_QUIET = logging.getLogger("devstack.probe")
_QUIET.setLevel(logging.CRITICAL)


def postgres(dsn: str, timeout_s: float = 2.0) -> bool:
    import psycopg

    try:
        with psycopg.connect(dsn, connect_timeout=max(1, round(timeout_s))) as conn:
            return conn.execute("select 1").fetchone() == (1,)
    except psycopg.OperationalError:
        return False


def kafka(bootstrap: str, timeout_s: float = 2.0) -> bool:
    try:
        with admin_client({"bootstrap.servers": bootstrap}, logger=_QUIET) as admin:
            return bool(admin.list_topics(timeout=timeout_s).brokers)
    except Exception:  # KafkaException, or a bare Exception from the admin client while the broker boots
        return False


def connect(url: str, timeout_s: float = 2.0) -> bool:
    try:
        plugins = httpx.get(f"{url.rstrip('/')}/connector-plugins", timeout=timeout_s).json()
    except (httpx.HTTPError, ValueError):
        return False
    return isinstance(plugins, list) and any(p.get("class") == POSTGRES_CONNECTOR for p in plugins)


def redis(url: str, timeout_s: float = 2.0) -> bool:
    import redis as redis_client

    try:
        return bool(redis_client.Redis.from_url(url, socket_timeout=timeout_s).ping())
    except redis_client.RedisError:
        return False


def registry(url: str, timeout_s: float = 2.0) -> bool:
    try:
        return httpx.get(f"{url.rstrip('/')}/subjects", timeout=timeout_s).status_code == 200
    except httpx.HTTPError:
        return False


# Endpoints attribute -> (probe, what must answer there).
PROBES: dict[str, tuple[Callable[[str, float], bool], str]] = {
    "pg_dsn": (postgres, "Postgres"),
    "kafka_bootstrap_servers": (kafka, "a Kafka broker"),
    "kafka_connect_url": (connect, "Kafka Connect with Debezium's PostgresConnector"),
    "redis_url": (redis, "Redis"),
    "schema_registry_url": (
        registry,
        "a schema registry's Confluent-compatible API (Apicurio: .../apis/ccompat/v7)",
    ),
}


def unanswered(endpoints: Endpoints, timeout_s: float = 3.0) -> list[str]:
    """One line per endpoint that does not answer its probe: `ENV_VAR=value: <what> does not answer`.

    The five probes run at once, so a wholly absent stack costs one timeout, not five.
    """
    with ThreadPoolExecutor(max_workers=len(PROBES)) as pool:
        answers = {
            attr: pool.submit(probe, getattr(endpoints, attr), timeout_s)
            for attr, (probe, _) in PROBES.items()
        }
        return [
            f"{ENV_NAMES[attr]}={redact(getattr(endpoints, attr))}: {PROBES[attr][1]} does not answer there"
            for attr, answer in answers.items()
            if not answer.result()
        ]


_URL_PASSWORD = re.compile(r"(://[^:/@\s]+:)[^@\s]*@")
_KV_PASSWORD = re.compile(r"(password\s*=\s*)\S+")


def redact(address: str) -> str:
    """`address` with any password replaced by ***: error messages name endpoints, never credentials."""
    return _KV_PASSWORD.sub(r"\1***", _URL_PASSWORD.sub(r"\1***@", address))
