"""Every Postgres type in the torture table round-trips through Debezium equal to what psycopg reads."""

from __future__ import annotations

import ipaddress
import math
from datetime import UTC, date, datetime, time
from decimal import Decimal
from typing import Any

import psycopg
import pytest
from cdc_helpers import RECORD_FORMATS, decode_all, read_topic, unique
from cdc_torture import LARGE_BYTES, create_sql, insert_sql
from psycopg.types import TypeInfo
from psycopg.types.hstore import register_hstore

from cdc.change_event import ChangeEvent
from cdc.values import Interval
from devstack.connectors import ConnectorFactory

pytestmark = pytest.mark.integration


def _normal(column: str, value: Any) -> Any:
    """Bring psycopg's and the decoder's representation of the same value to one comparable form."""
    if value is None:
        return None
    if isinstance(value, float) and math.isnan(value):
        return "float-nan"
    if isinstance(value, Decimal) and value.is_nan():
        return "decimal-nan"
    if isinstance(value, list | tuple):
        return tuple(_normal(column, v) for v in value)
    if isinstance(value, Interval):
        return value.as_timedelta()
    if isinstance(value, time) and value.tzinfo is not None:
        # Debezium sends timetz in UTC; compare the UTC time of day.
        moment = datetime.combine(date(2000, 1, 1), value).astimezone(UTC)
        return moment.time().replace(tzinfo=UTC)
    if column == "c_money":
        return Decimal(str(value).replace("$", "").replace(",", ""))
    if column == "c_inet":
        return ipaddress.ip_interface(str(value))
    return value


@pytest.mark.parametrize("connector_format", RECORD_FORMATS, indirect=True)
def test_type_torture_round_trips(
    stack: Any, pg: psycopg.Connection[tuple[Any, ...]], tables: list[str], connectors: ConnectorFactory
) -> None:
    suffix = unique("tt")
    table, enum = f"public.{suffix}", f"mood_{suffix}"
    tables.extend([f"type:{enum}", f"table:{table}"])
    for sql in create_sql(table, enum):
        pg.execute(sql)  # type: ignore[arg-type]
    pg.execute(insert_sql(table), {"large": LARGE_BYTES})  # type: ignore[arg-type]
    info = TypeInfo.fetch(pg, "hstore")
    assert info is not None
    register_hstore(info, pg)
    cur = pg.execute(f"SELECT * FROM {table} ORDER BY id")  # type: ignore[arg-type]
    names = [d.name for d in cur.description or ()]
    expected = {row[0]: dict(zip(names, row, strict=True)) for row in cur.fetchall()}

    spec = connectors.start(connectors.spec([table]))
    items = decode_all(
        read_topic(stack.kafka_bootstrap_servers, spec.topic_for(table), until=lambda rs: len(rs) >= 4),
        connectors.schemas,
    )
    decoded = {i.after["id"]: i.after for i in items if isinstance(i, ChangeEvent) and i.after is not None}
    assert sorted(decoded) == sorted(expected) == [1, 2, 3, 4]
    mismatches = [
        (row_id, col, expected[row_id][col], decoded[row_id][col])
        for row_id in expected
        for col in names
        if _normal(col, expected[row_id][col]) != _normal(col, decoded[row_id][col])
    ]
    assert mismatches == []
