"""Factory fixtures for the cdc integration tests, on the session-scoped real stack."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from cdc_helpers import ConnectorFactory

from cdc.connect_client import ConnectClient


@pytest.fixture
def connect(stack: Any) -> Iterator[ConnectClient]:
    with ConnectClient(stack.kafka_connect_url) as client:
        yield client


@pytest.fixture
def connectors(stack: Any, connect: ConnectClient) -> Iterator[ConnectorFactory]:
    """Creates connectors; deletes each one and drops its slot and publication afterwards."""
    factory = ConnectorFactory(connect, stack.pg_dsn)
    yield factory
    factory.cleanup()


@pytest.fixture
def pg(stack: Any) -> Iterator[psycopg.Connection[tuple[Any, ...]]]:
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
