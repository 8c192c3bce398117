"""Decoding records the real Debezium 3.6.1 connector wrote (captured by capture_fixtures.py)."""

from __future__ import annotations

import json
import math
import random
from datetime import UTC, date, datetime, time, timedelta, timezone
from decimal import Decimal
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest

from cdc.change_event import ChangeEvent, Op, Tombstone, decode_record
from cdc.errors import ChangeEventDecodeError
from cdc.fold import fold
from cdc.values import UNCHANGED, Interval

FIXTURES = json.loads((Path(__file__).parent / "fixtures" / "debezium_records.json").read_text("utf-8"))
LARGE_BYTES = random.Random(7).randbytes(64 * 1024)  # same seed as tests/integration/cdc/cdc_torture.py


def _decode(raw: dict[str, Any]) -> ChangeEvent | Tombstone:
    return decode_record(
        topic=raw["topic"],
        partition=raw["partition"],
        offset=raw["offset"],
        key=None if raw["key"] is None else raw["key"].encode(),
        value=None if raw["value"] is None else raw["value"].encode(),
    )


@pytest.fixture(scope="module")
def torture() -> list[ChangeEvent | Tombstone]:
    return [_decode(r) for r in FIXTURES["torture"]]


def _event(items: list[ChangeEvent | Tombstone], i: int) -> ChangeEvent:
    item = items[i]
    assert isinstance(item, ChangeEvent)
    return item


def test_operations_in_order(torture: list[ChangeEvent | Tombstone]) -> None:
    kinds = [item.op.value if isinstance(item, ChangeEvent) else "tombstone" for item in torture]
    assert kinds == ["r", "r", "r", "r", "u", "d", "tombstone", "c", "u"]


def test_ordinary_row_decodes_to_python_types(torture: list[ChangeEvent | Tombstone]) -> None:
    after = _event(torture, 0).after
    assert after is not None
    assert dict(after) == {
        "id": 1,
        "c_smallint": 1,
        "c_int": 2,
        "c_bigint": 3,
        "c_numeric": Decimal("12.5"),
        "c_numeric_ps": Decimal("1234.5678"),
        "c_money": Decimal("12.34"),
        "c_real": 1.5,
        "c_double": 2.25,
        "c_bool": True,
        "c_text": "plain",
        "c_varchar": "vc",
        "c_char": "ab   ",
        "c_uuid": UUID("a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"),
        "c_date": date(2024, 2, 29),
        "c_time": time(13, 14, 15, 123456),
        "c_timetz": time(11, 14, 15, 500000, tzinfo=UTC),
        "c_ts": datetime(2024, 2, 29, 13, 14, 15, 123456),
        "c_ts3": datetime(2024, 2, 29, 13, 14, 15, 123000),
        "c_tstz": datetime(2024, 2, 29, 13, 14, 15, 123456, tzinfo=timezone(timedelta(hours=5, minutes=30))),
        "c_interval": Interval(months=14, days=3, microseconds=(4 * 3600 + 5 * 60 + 6) * 10**6 + 789000),
        "c_json": {"a": [1, 2, {"b": None}]},
        "c_jsonb": {"k": "v", "n": 1.5},
        "c_hstore": {"a": "1", "b": None},
        "c_int_arr": (1, 2, 3),
        "c_text_arr": ("x", "y z"),
        "c_num_arr": (Decimal("1.5"), Decimal("2.25")),
        "c_bytea": b"\x00\x01\x02\xff",
        "c_enum": "happy",
        "c_bits": "1000",
        "c_inet": "192.168.0.1/24",
    }
    assert after["c_tstz"].tzinfo is not None and after["c_ts"].tzinfo is None


def test_edge_values(torture: list[ChangeEvent | Tombstone]) -> None:
    row2, row3 = _event(torture, 1).after, _event(torture, 2).after
    assert row2 is not None and row3 is not None
    assert row2["c_numeric"].is_nan() and math.isnan(row2["c_real"]) and row2["c_double"] == -math.inf
    assert (row2["c_smallint"], row2["c_int"], row2["c_bigint"]) == (-32768, -(2**31), 2**63 - 1)
    assert row2["c_money"] == Decimal("-0.01")
    assert row2["c_text"] == "héllo ✓ 日本語 🎉 'quoted' \\ back"
    assert (row2["c_varchar"], row2["c_char"]) == ("", "     ")
    assert row2["c_date"] == date(1, 1, 1) and row2["c_time"] == time(0, 0)
    assert row2["c_timetz"] == time(10, 59, 59, 999999, tzinfo=UTC)  # 23:59:59.999999-11 in UTC
    assert row2["c_ts3"] == datetime(9999, 12, 31, 23, 59, 59, 999000)
    assert row2["c_tstz"] == datetime(1999, 12, 31, 10, tzinfo=UTC)
    assert row2["c_interval"] == Interval(
        months=-14, days=3, microseconds=-(4 * 3600 + 5 * 60 + 6) * 10**6 - 1
    )
    assert (row2["c_json"], row2["c_jsonb"], row2["c_hstore"]) == ([], {}, {})
    assert (row2["c_int_arr"], row2["c_text_arr"], row2["c_num_arr"]) == ((), (), ())
    assert row2["c_bytea"] == LARGE_BYTES and row2["c_bits"] == "0000"
    assert row3["c_numeric"] == Decimal("123456789012345678901234567890.123456789012345678901234567890")
    assert row3["c_real"] == math.inf and math.isnan(row3["c_double"])
    assert row3["c_bigint"] == -(2**63)
    assert row3["c_ts"] == datetime(2262, 4, 11, 23, 47, 16, 854775)
    assert row3["c_ts3"] == datetime(1900, 1, 1)
    assert row3["c_tstz"] == datetime(1969, 12, 31, 23, 59, 59, 999999, tzinfo=UTC)
    assert row3["c_time"] == time(23, 59, 59, 999999) and row3["c_interval"] == Interval()
    assert (
        row3["c_json"] is None and row3["c_jsonb"] == [1, "two", 3.0] and row3["c_hstore"] == {"a b": "c,d"}
    )
    assert row3["c_int_arr"] == (None, 1) and row3["c_text_arr"] == (None, "")
    assert row3["c_num_arr"] == (Decimal("-1e-20"), Decimal("1e30"))
    assert row3["c_bytea"] == b"" and row3["c_text"] == "x" * 3000


def test_all_null_row(torture: list[ChangeEvent | Tombstone]) -> None:
    after = _event(torture, 3).after
    assert after is not None
    assert after["id"] == 4 and all(v is None for k, v in after.items() if k != "id")


def test_source_position_and_snapshot_markers(torture: list[ChangeEvent | Tombstone]) -> None:
    first, update = _event(torture, 0), _event(torture, 4)
    assert [_event(torture, i).source.snapshot for i in range(4)] == [
        "first",
        "true",
        "true",
        "last_in_data_collection",
    ]
    assert first.source.is_snapshot and not update.source.is_snapshot
    assert first.source.table.startswith("tt_cap_") and first.source.schema == "public"
    assert isinstance(update.source.lsn, int) and isinstance(update.source.tx_id, int)
    assert update.source.commit_time is not None and update.source.commit_time.tzinfo is UTC
    assert update.event_time is not None and update.event_time >= update.source.commit_time
    assert update.key == {"id": 1} and update.before is None  # REPLICA IDENTITY DEFAULT: no old image
    assert update.position.topic == FIXTURES["torture"][4]["topic"]


def test_delete_then_tombstone(torture: list[ChangeEvent | Tombstone]) -> None:
    delete, tomb = _event(torture, 5), torture[6]
    assert delete.op is Op.DELETE and delete.after is None
    assert delete.before is not None and delete.before["id"] == 2
    assert isinstance(tomb, Tombstone) and tomb.key == {"id": 2}


def test_schema_change_decodes_with_new_shape(torture: list[ChangeEvent | Tombstone]) -> None:
    added, after_drop = _event(torture, 7).after, _event(torture, 8).after
    assert added is not None and after_drop is not None
    assert added["c_added"] == "new shape" and "c_bits" in added
    assert after_drop["c_added"] == "dropped bits" and "c_bits" not in after_drop


def test_fold_is_latest_row_per_key(torture: list[ChangeEvent | Tombstone]) -> None:
    state = fold(torture)
    assert sorted(state) == [(1,), (3,), (4,), (5,)]
    assert state[(1,)]["c_text"] == "updated" and state[(1,)]["c_int"] == 42


def test_toast_unchanged_column_is_a_sentinel_and_fold_keeps_old_value() -> None:
    items = [_decode(r) for r in FIXTURES["toast"]]
    insert, update = items
    assert isinstance(insert, ChangeEvent) and isinstance(update, ChangeEvent)
    assert update.after is not None and insert.after is not None
    assert update.after["note"] is UNCHANGED and update.after["n"] == 2
    assert len(insert.after["note"]) == 4000
    assert fold(items)[(1,)] == {"id": 1, "note": insert.after["note"], "n": 2}


def _raw(value: Any, key: Any = None) -> dict[str, Any]:
    dump = lambda v: None if v is None else (v if isinstance(v, str) else json.dumps(v))  # noqa: E731
    return {"topic": "t", "partition": 3, "offset": 99, "key": dump(key), "value": dump(value)}


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ("not json {", "not JSON"),
        ({"id": 1}, "JsonConverter envelope"),
        ({"schema": {"type": "struct", "name": "x.Value"}, "payload": {}}, "not a Debezium Envelope"),
    ],
)
def test_foreign_records_raise_with_position(value: Any, reason: str) -> None:
    with pytest.raises(ChangeEventDecodeError, match=r"t\[3\]@99") as info:
        _decode(_raw(value))
    assert reason in info.value.reason and (info.value.topic, info.value.partition, info.value.offset) == (
        "t",
        3,
        99,
    )


def test_unknown_op_and_bad_field_value_raise() -> None:
    real = json.loads(FIXTURES["torture"][4]["value"])
    real["payload"]["op"] = "m"
    with pytest.raises(ChangeEventDecodeError, match="unknown op 'm'"):
        _decode(_raw(real))
    real["payload"]["op"] = "u"
    real["payload"]["after"]["c_int"] = "forty-two"
    with pytest.raises(ChangeEventDecodeError, match="c_int"):
        _decode(_raw(real))


def test_bad_key_raises() -> None:
    real = json.loads(FIXTURES["torture"][4]["value"])
    with pytest.raises(ChangeEventDecodeError, match="key"):
        _decode(_raw(real, key={"schema": None, "payload": 5}))
