"""Value conversions not covered by the captured records (other Debezium modes, edge forms)."""

from __future__ import annotations

import base64
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal
from uuid import UUID

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


def _bits_schema(source_type: str, length: int) -> dict[str, object]:
    params = {"length": str(length), "__debezium.source.column.type": source_type}
    return {"type": "bytes", "name": "io.debezium.data.Bits", "parameters": params}


def _le(number: int) -> str:
    return base64.b64encode(number.to_bytes((number.bit_length() + 7) // 8, "little")).decode()


def test_fixed_bits_are_padded_to_their_length() -> None:
    assert decode_value(_bits_schema("BIT", 4), _le(0b0101)) == "0101"
    assert decode_value(_bits_schema("BIT", 4), "") == "0000"


@pytest.mark.parametrize("length", [20, 2147483647])
def test_bit_varying_without_its_length_is_refused_not_padded(length: int) -> None:
    # '10110' in a bit varying(20) arrives as the integer 22: '010110' would arrive the same.
    with pytest.raises(ValueDecodeError, match=r"column\.exclude\.list") as caught:
        decode_value(_bits_schema("VARBIT", length), _le(0b10110))
    assert caught.value.fix is not None


def test_bit_varying_that_fills_its_declared_length_is_exact() -> None:
    assert decode_value(_bits_schema("VARBIT", 5), _le(0b10110)) == "10110"
    with pytest.raises(ValueDecodeError):
        decode_value(_bits_schema("BIT", 3), _le(0b10110))


def test_numeric_infinities_and_nan_are_exact() -> None:
    schema = {"type": "string", "parameters": {"__debezium.source.column.type": "NUMERIC"}}
    assert decode_value(schema, "POSITIVE_INFINITY") == Decimal("Infinity")
    assert decode_value(schema, "NEGATIVE_INFINITY") == Decimal("-Infinity")
    assert decode_value(schema, "NAN").is_nan()


def test_a_decimal_string_in_another_form_is_refused_not_guessed() -> None:
    schema = {"type": "string", "parameters": {"__debezium.source.column.type": "MONEY"}}
    assert decode_value(schema, "-1234567.89") == Decimal("-1234567.89")
    for text in ("1,5", "$1,234.50", "1.234,50 €"):
        with pytest.raises(ValueDecodeError):
            decode_value(schema, text)


def _array(element: str, items: dict[str, object], scale: int | None = None) -> dict[str, object]:
    params = {"__debezium.source.column.type": f"_{element}"}
    if scale is not None:
        params["__debezium.source.column.scale"] = str(scale)
    return {"type": "array", "items": items, "parameters": params}


def test_array_elements_are_typed_by_the_source_type() -> None:
    assert decode_value(_array("DATE", {"type": "int32"}), [18262, None]) == (date(2020, 1, 1), None)
    micros = _array("TIMESTAMP", {"type": "int64"}, scale=6)
    assert decode_value(micros, [1577872800123456]) == (datetime(2020, 1, 1, 10, 0, 0, 123456),)
    millis = _array("TIMESTAMP", {"type": "int64"}, scale=3)
    assert decode_value(millis, [1577872800123]) == (datetime(2020, 1, 1, 10, 0, 0, 123000),)
    assert decode_value(_array("TIME", {"type": "int64"}, scale=3), [36000123000]) == (
        time(10, 0, 0, 123000),
    )
    zoned = decode_value(_array("TIMESTAMPTZ", {"type": "string"}), ["2020-01-01T10:00:00.000000Z"])
    assert zoned == (datetime(2020, 1, 1, 10, tzinfo=UTC),)
    assert decode_value(_array("TIMETZ", {"type": "string"}), ["08:00:00Z"]) == (time(8, tzinfo=UTC),)
    uid = "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"
    assert decode_value(_array("UUID", {"type": "string"}), [uid]) == (UUID(uid),)
    assert decode_value(_array("JSONB", {"type": "string"}), ['{"a": 1}']) == ({"a": 1},)
    assert decode_value(_array("TEXT", {"type": "string"}), ["x"]) == ("x",)


def test_a_multi_dimensional_text_array_is_refused() -> None:
    with pytest.raises(ValueDecodeError, match="multi-dimensional"):
        decode_value(_array("TEXT", {"type": "string"}), ["[Ljava.lang.String;@958d11d"])


@pytest.mark.parametrize(
    ("schema", "value"),
    [
        ({"type": "int32", "name": "io.debezium.time.Date"}, -735160),  # 0044-03-15 BC, streamed
        ({"type": "int32", "name": "io.debezium.time.Date"}, -2147472692),  # 'infinity'
        ({"type": "int64", "name": "io.debezium.time.MicroTimestamp"}, 9223372036825200000),
        ({"type": "string", "name": "io.debezium.time.ZonedTimestamp"}, "-0043-03-15T12:00:00.000000Z"),
        ({"type": "string", "name": "io.debezium.time.ZonedTimestamp"}, "-infinity"),
        ({"type": "int64", "name": "io.debezium.time.MicroTime"}, 86_400_000_000),  # 24:00:00
    ],
)
def test_times_python_cannot_hold_are_refused_with_a_fix(schema: dict[str, object], value: object) -> None:
    with pytest.raises(ValueDecodeError) as caught:
        decode_value(schema, value)
    assert caught.value.fix is not None and "CHECK" in caught.value.fix


def test_a_refusal_names_the_column_path_and_source_type() -> None:
    from cdc.values import decode_struct

    row = {"type": "struct", "fields": [{**_bits_schema("VARBIT", 20), "field": "flags"}]}
    with pytest.raises(ValueDecodeError) as caught:
        decode_struct(row, {"flags": _le(0b10110)})
    assert (caught.value.column, caught.value.source_type) == ("flags", "VARBIT")
    assert "field 'flags' (VARBIT)" in str(caught.value)
