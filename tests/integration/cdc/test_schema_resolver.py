"""The toolkit's Avro schema resolver writes the records Apicurio's own resolver writes: the same
values under the ids the registry holds for each subject, a new one after a column change."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import httpx
import psycopg
import pytest
from cdc_helpers import decode_all, read_topic, unique

from cdc.change_event import ChangeEvent
from cdc.connect_client import ConnectClient
from cdc.connector_spec import SCHEMA_RESOLVER_CLASS
from cdc.registry_client import ccompat_url
from devstack.connectors import ConnectorFactory
from devstack.kafka_security import KafkaAccess

pytestmark = pytest.mark.integration
Conn = psycopg.Connection[tuple[Any, ...]]


def _subject_ids(registry_url: str, subject: str) -> set[int]:
    base = f"{ccompat_url(registry_url)}/subjects/{subject}/versions"
    versions = httpx.get(base, timeout=10).raise_for_status().json()
    return {httpx.get(f"{base}/{v}", timeout=10).raise_for_status().json()["id"] for v in versions}


@pytest.mark.parametrize("connector_format", ["avro"], indirect=True)
def test_the_toolkit_resolver_writes_what_apicurios_writes_across_a_column_change(
    kafka: KafkaAccess,
    pg: Conn,
    tables: list[str],
    connectors: ConnectorFactory,
    connect: ConnectClient,
) -> None:
    table = f"public.{unique('resolver')}"
    tables.append(f"table:{table}")
    pg.execute(f"CREATE TABLE {table} (id int PRIMARY KEY, a text)")  # type: ignore[arg-type]
    pg.execute(f"INSERT INTO {table} SELECT g, 'row ' || g FROM generate_series(1, 3) g")  # type: ignore[arg-type]
    ours = connectors.spec([table])
    theirs = connectors.spec([table])
    assert ours.registry is not None
    theirs = replace(theirs, registry=replace(ours.registry, resolver="apicurio"))
    assert SCHEMA_RESOLVER_CLASS in ours.to_config().values()
    assert SCHEMA_RESOLVER_CLASS not in theirs.to_config().values()
    for spec in (ours, theirs):
        connectors.start(spec)
    pg.execute(f"INSERT INTO {table} VALUES (4, 'four')")  # type: ignore[arg-type]
    pg.execute(f"ALTER TABLE {table} ADD COLUMN n int")  # type: ignore[arg-type]
    pg.execute(f"INSERT INTO {table} VALUES (5, 'five', 5)")  # type: ignore[arg-type]
    pg.execute(f"UPDATE {table} SET a = 'uno', n = 1 WHERE id = 1")  # type: ignore[arg-type]

    written = {}
    for spec in (ours, theirs):
        topic = spec.topic_for(table)
        records = read_topic(kafka, topic, until=lambda rs: len(rs) >= 6)
        events = [e for e in decode_all(records, connectors.schemas) if isinstance(e, ChangeEvent)]
        written[spec.name] = [(e.op, e.key, e.after) for e in events]
        value_ids = {int.from_bytes((r.value or b"")[1:5], "big") for r in records}
        assert len(value_ids) == 2  # the table before and after ADD COLUMN
        assert value_ids == _subject_ids(str(connectors.registry_url), f"{topic}-value")
        assert connect.status(spec.name).running
    assert written[ours.name] == written[theirs.name]
    assert [after["id"] for _, _, after in written[ours.name] if after] == [1, 2, 3, 4, 5, 1]
