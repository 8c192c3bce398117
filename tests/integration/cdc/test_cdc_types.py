"""Every Postgres type in the torture table round-trips through Debezium equal to what psycopg reads."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
from cdc_helpers import RECORD_FORMATS, decode_all, read_topic
from cdc_torture import mismatches, torture_table

from devstack.connectors import ConnectorFactory
from devstack.kafka_security import KafkaAccess

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("connector_format", RECORD_FORMATS, indirect=True)
def test_type_torture_round_trips(
    kafka: KafkaAccess,
    pg: psycopg.Connection[tuple[Any, ...]],
    tables: list[str],
    connectors: ConnectorFactory,
) -> None:
    table, expected = torture_table(pg, tables)
    spec = connectors.start(connectors.spec([table]))
    items = decode_all(
        read_topic(kafka, spec.topic_for(table), until=lambda rs: len(rs) >= 4),
        connectors.schemas,
    )
    assert mismatches(expected, items) == []
