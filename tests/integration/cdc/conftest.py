"""Factory fixtures for the cdc integration tests, on the session-scoped real stack.

Connectors come from the toolkit's pytest plugin (`devstack.connectors.ConnectorFactory`), which gives
Connect the address it reaches Postgres (and the registry) at on every backend.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from cdc.connect_client import ConnectClient
from devstack.connectors import ConnectorFactory
from devstack.session import StackHandle


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
