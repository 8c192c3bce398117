"""Factory fixtures for the cdc integration tests, on the session-scoped real stack."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import psycopg
import pytest
from cdc_helpers import ConnectorFactory

from cdc.connect_client import ConnectClient
from cdc.connector_spec import AVRO_CONVERTER


@pytest.fixture
def connect(stack: Any) -> Iterator[ConnectClient]:
    with ConnectClient(stack.kafka_connect_url) as client:
        yield client


@pytest.fixture
def record_format(request: pytest.FixtureRequest, stack: Any) -> str:
    """The connectors' record format; Avro needs Apicurio's converter on the Connect worker."""
    chosen = str(getattr(request, "param", "json"))
    if chosen == "avro":
        url = f"{stack.kafka_connect_url}/connector-plugins?connectorsOnly=false"
        listed = {p.get("class") for p in httpx.get(url, timeout=10).json()}
        if AVRO_CONVERTER not in listed:  # `make up` always provides it: a stale worker is a failure
            pytest.fail(
                f"Connect at {stack.kafka_connect_url} does not list {AVRO_CONVERTER}: run `devstack fetch`, "
                "then restart the Connect worker so it scans its plugin.path again"
            )
    return chosen


@pytest.fixture
def connectors(stack: Any, connect: ConnectClient, record_format: str) -> Iterator[ConnectorFactory]:
    """Creates connectors in `record_format`; deletes each one and drops its slot and publication afterwards."""
    factory = ConnectorFactory(connect, stack.pg_dsn, record_format, stack.schema_registry_url)
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
