"""Factory fixtures for the cdc integration tests, on the session-scoped real stack.

Connectors come from the toolkit's pytest plugin (`devstack.connectors.ConnectorFactory`), which gives
Connect the address it reaches Postgres (and the registry) at on every backend. The tests' own Kafka
clients and `cdc` CLI runs reach Kafka through `kafka`: the stack's SASL_SSL listener where it has one.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from cdc.connect_client import ConnectClient
from devstack.connectors import ConnectorFactory
from devstack.kafka_security import KafkaAccess
from devstack.session import StackHandle


@pytest.fixture
def cli_flags(stack: StackHandle, kafka: KafkaAccess, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The `cdc` flags for the stack's Connect, Kafka and Postgres (the registry: SCHEMA_REGISTRY_URL),
    with `kafka`'s client config in the environment (KAFKA_CLIENT_CONFIG), as a user configures the
    CLI: every Kafka client of a CLI run goes through the same listener as the tests' own."""
    for variable, value in kafka.env().items():
        monkeypatch.setenv(variable, value)
    return [
        "--connect-url",
        stack.kafka_connect_url,
        "--bootstrap-servers",
        kafka.bootstrap_servers,
        "--pg-dsn",
        stack.pg_dsn,
    ]


@pytest.fixture
def connect(stack: StackHandle) -> Iterator[ConnectClient]:
    with ConnectClient(stack.kafka_connect_url) as client:
        yield client


@pytest.fixture
def connectors(connector_factory: ConnectorFactory) -> ConnectorFactory:
    """The plugin's `connector_factory` under this suite's name: connectors in `connector_format` (JSON
    unless parametrized indirectly), removed with their slots and publications afterwards."""
    return connector_factory


@pytest.fixture
def preflight_flags(connectors: ConnectorFactory) -> list[str]:
    """`cdc apply/validate` flags for pre-flight where Connect reaches Postgres at another address."""
    return ["--preflight-at", connectors.preflight_at] if connectors.preflight_at else []


@pytest.fixture
def pg(stack: StackHandle) -> Iterator[psycopg.Connection[tuple[Any, ...]]]:
    with psycopg.connect(stack.pg_dsn, autocommit=True) as conn:
        yield conn


@pytest.fixture
def tables(pg: psycopg.Connection[tuple[Any, ...]]) -> Iterator[list[str]]:
    """Append names of tables/types the test creates ('table:x' / 'type:x'); they are dropped at the end."""
    created: list[str] = []
    yield created
    for item in reversed(created):
        kind, name = item.split(":", 1)
        pg.execute(f"DROP {kind.upper()} IF EXISTS {name} CASCADE")  # type: ignore[arg-type]
