"""Value conversions not covered by the captured records (other Debezium modes, edge forms)."""

from __future__ import annotations

import base64
from datetime import UTC, time, timedelta
from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cdc.errors import ValueDecodeError
from cdc.values import UNCHANGED, Interval, decode_value


@given(
    st.integers(-(10**6), 10**6),
    st.integers(-(10**6), 10**6),
    st.integers(-(10**15), 10**15),
)
def test_interval_iso_round_trips(months: int, days: int, micros: int) -> None:
    value = Interval(months=months, days=days, microseconds=micros)
    assert Interval.parse_iso(value.to_iso()) == value


def test_interval_as_timedelta_matches_psycopg_approximation() -> None:
    assert Interval(months=14, days=3, microseconds=1).as_timedelta() == timedelta(
        days=365 + 60 + 3, microseconds=1
    )
    with pytest.raises(ValueDecodeError, match="PnYnMnDTnHnMnS"):
        Interval.parse_iso("1 day")


def test_connect_decimal_and_variable_scale_decimal() -> None:
    # precise mode: unscaled two's-complement big-endian bytes, base64 in JSON
    raw = base64.b64encode((-123456).to_bytes(3, "big", signed=True)).decode()
    schema = {"type": "bytes", "name": "org.apache.kafka.connect.data.Decimal", "parameters": {"scale": "2"}}
    assert decode_value(schema, raw) == Decimal("-1234.56")
    vsd = {"type": "struct", "name": "io.debezium.data.VariableScaleDecimal"}
    assert decode_value(vsd, {"scale": 3, "value": raw}) == Decimal("-123.456")


def test_other_time_precisions_and_durations() -> None:
    assert decode_value({"type": "int32", "name": "io.debezium.time.Time"}, 3_723_004) == time(1, 2, 3, 4000)
    assert decode_value({"type": "int64", "name": "io.debezium.time.NanoTime"}, 1_000_000_001_000) == time(
        0, 16, 40, 1
    )
    assert decode_value({"type": "int64", "name": "io.debezium.time.MicroDuration"}, -5) == timedelta(
        microseconds=-5
    )
    assert decode_value({"type": "string", "name": "io.debezium.time.ZonedTime"}, "01:02:03Z") == time(
        1, 2, 3, tzinfo=UTC
    )
    assert decode_value({"type": "string", "name": "io.debezium.data.EnumSet"}, "a,b") == ("a", "b")


def test_placeholders_become_unchanged_by_type() -> None:
    ph = "__debezium_unavailable_value"
    assert decode_value({"type": "string"}, ph) is UNCHANGED
    assert decode_value({"type": "string", "name": "io.debezium.data.Json"}, ph) is UNCHANGED
    assert decode_value({"type": "bytes"}, base64.b64encode(ph.encode()).decode()) is UNCHANGED
    assert decode_value({"type": "array", "items": {"type": "string"}}, [ph]) is UNCHANGED
    assert decode_value({"type": "int32"}, 5) == 5
    assert decode_value({"type": "string"}, "custom", placeholder="custom") is UNCHANGED


@pytest.mark.parametrize(
    ("schema", "value"),
    [
        ({"type": "int32"}, "1"),
        ({"type": "int64"}, True),
        ({"type": "boolean"}, 1),
        ({"type": "bytes"}, "not base64!"),
        ({"type": "string", "name": "io.debezium.data.Uuid"}, "nope"),
        ({"type": "int32", "name": "io.debezium.time.Date"}, 1.5),
        ({"type": "float64"}, "Huge"),
        ({"type": "decimal-ish"}, 1),
    ],
)
def test_values_that_do_not_fit_their_schema_raise(schema: dict[str, object], value: object) -> None:
    with pytest.raises(ValueDecodeError):
        decode_value(schema, value)
