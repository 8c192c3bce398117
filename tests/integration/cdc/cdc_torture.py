"""The type-torture table: one column per Postgres type the decoder supports, rows full of edge values.

Shared by the integration tests (`torture_table` and `mismatches`: what psycopg reads against what the
decoder gives) and by `capture_fixtures.py`, which records what the real connector emits for these rows
into tests/unit/cdc/fixtures/ (the unit tests decode those bytes).
"""

from __future__ import annotations

import ipaddress
import math
import random
from collections.abc import Sequence
from datetime import UTC, date, datetime, time
from decimal import Decimal
from typing import Any

import psycopg
from cdc_helpers import unique
from psycopg.types import TypeInfo
from psycopg.types.hstore import register_hstore

from cdc.change_event import ChangeEvent, Tombstone
from cdc.values import Interval

Row = dict[str, Any]

COLUMNS = """
    id integer PRIMARY KEY,
    c_smallint smallint, c_int integer, c_bigint bigint,
    c_numeric numeric, c_numeric_ps numeric(12, 4), c_money money,
    c_real real, c_double double precision,
    c_bool boolean, c_text text, c_varchar varchar(20), c_char char(5),
    c_uuid uuid, c_date date, c_time time, c_timetz timetz,
    c_ts timestamp, c_ts3 timestamp(3), c_tstz timestamptz,
    c_interval interval, c_json json, c_jsonb jsonb, c_hstore hstore,
    c_int_arr integer[], c_text_arr text[], c_num_arr numeric[],
    c_bytea bytea, c_enum {enum}, c_bits bit(4), c_inet inet
"""

# Large bytea (exercises base64 and the record size) made from a fixed seed so fixtures are stable.
LARGE_BYTES = random.Random(7).randbytes(64 * 1024)

ROWS = [
    # 1: ordinary values
    """(1, 1, 2, 3, 12.5, 1234.5678, 12.34, 1.5, 2.25, true, 'plain', 'vc', 'ab',
        'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', '2024-02-29', '13:14:15.123456', '13:14:15.5+02',
        '2024-02-29 13:14:15.123456', '2024-02-29 13:14:15.123', '2024-02-29 13:14:15.123456+05:30',
        '1 year 2 months 3 days 04:05:06.789', '{"a": [1, 2, {"b": null}]}', '{"k": "v", "n": 1.5}',
        'a=>1, b=>NULL', '{1,2,3}', '{"x","y z"}', '{1.5,2.25}',
        '\\x000102ff', 'happy', B'1000', '192.168.0.1/24')""",
    # 2: edge values
    """(2, -32768, -2147483648, 9223372036854775807,
        'NaN', -99999999.9999, -0.01, 'NaN', '-Infinity', false,
        'héllo ✓ 日本語 🎉 ''quoted'' \\ back', '', ' ',
        '00000000-0000-0000-0000-000000000000', '0001-01-01', '00:00:00', '23:59:59.999999-11',
        '1970-01-01 00:00:00', '9999-12-31 23:59:59.999', '2000-01-01 00:00:00+14',
        '-1 year -2 months +3 days -04:05:06.000001', '[]', '{}', '',
        '{}', '{}', '{}', %(large)s, 'sad', B'0000', '::1')""",
    # 3: huge and infinite numbers
    """(3, 0, 0, -9223372036854775808,
        123456789012345678901234567890.123456789012345678901234567890, 0, 0,
        'Infinity', 'NaN', true, repeat('x', 3000), 'z', 'abcde',
        'ffffffff-ffff-ffff-ffff-ffffffffffff', '2100-12-31', '23:59:59.999999', '00:00:00+00',
        '2262-04-11 23:47:16.854775', '1900-01-01 00:00:00', '1969-12-31 23:59:59.999999+00',
        '0 seconds', 'null', '[1, "two", 3.0]', '"a b"=>"c,d"',
        '{NULL,1}', '{NULL,""}', '{-1e-20,1e30}', '\\x', 'ok', B'1111', '10.0.0.0/8')""",
    # 4: all nulls but the key
    "(4" + ", NULL" * 30 + ")",
]


def create_sql(table: str, enum: str) -> list[str]:
    return [
        "CREATE EXTENSION IF NOT EXISTS hstore",
        f"CREATE TYPE {enum} AS ENUM ('sad', 'ok', 'happy')",
        f"CREATE TABLE {table} ({COLUMNS.format(enum=enum)})",
    ]


def insert_sql(table: str) -> str:
    return f"INSERT INTO {table} VALUES " + ",\n".join(ROWS)


def torture_table(pg: psycopg.Connection[tuple[Any, ...]], tables: list[str]) -> tuple[str, dict[int, Row]]:
    """A new torture table, filled (its name and type go on `tables` for dropping), and its rows as
    psycopg reads them, by id."""
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
    return table, {row[0]: dict(zip(names, row, strict=True)) for row in cur.fetchall()}


def mismatches(
    expected: dict[int, Row], items: Sequence[ChangeEvent | Tombstone]
) -> list[tuple[int, str, Any, Any]]:
    """(id, column, psycopg's value, the decoder's) for every value the change events carry wrong; a
    row missing from either side fails at once."""
    decoded = {i.after["id"]: i.after for i in items if isinstance(i, ChangeEvent) and i.after is not None}
    assert sorted(decoded) == sorted(expected) == [1, 2, 3, 4]
    return [
        (row_id, col, want, decoded[row_id][col])
        for row_id, row in expected.items()
        for col, want in row.items()
        if _normal(col, want) != _normal(col, decoded[row_id][col])
    ]


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
