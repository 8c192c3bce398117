"""Debezium JSON with and without inline schemas (JsonConverter `schemas.enable`) decode alike.

Without schemas a record is ~8x smaller; the materializer types columns by its own DDL, so both forms
must give the same changes, the same positions and the same dead-letter reasons.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from conftest import read_all, run_once, wait_for_end_offset
from records import debezium

from cdc.connector_spec import SCHEMALESS_JSON
from materializers.decode import debezium as dbz
from materializers.ops.verify import verify
from materializers.runtime.job import JobPlan
from shop.products import COLUMNS, DATA_DDL, PRODUCTS, TABLE_DDL

pytestmark = pytest.mark.integration


def row(entity: int, price: str) -> dict[str, Any]:
    return {"name": f"p{entity}", "description": f"about {entity}", "price": price, "stock": entity}


def changes(schemas: bool) -> list[tuple[bytes, bytes]]:
    """Upserts, a snapshot read, a TOAST placeholder, a delete, then five poison records."""

    def form(entity: int, lsn: int, op: str, data: dict[str, Any] | None, **kw: Any) -> tuple[bytes, bytes]:
        return debezium(entity, lsn, op, data, schemas=schemas, **kw)

    unsupported = json.loads(form(5, 50, "u", row(5, "5.00"))[1])
    (unsupported["payload"] if schemas else unsupported)["op"] = "x"
    key = form(6, 60, "c", None)[0]
    return [
        form(1, 10, "r", row(1, "1.00")),
        form(1, 11, "u", row(1, "1.50"), unavailable=("description",)),
        form(2, 20, "c", row(2, "2.00")),
        form(3, 30, "c", row(3, "3.00")),
        form(3, 31, "d", None),
        (key, json.dumps(unsupported).encode()),
        (key, b'{"hello": "world"}'),
        (key, b"not json"),
        # stock is `int` in the DDL: from_json would make both null without a word
        form(7, 70, "c", {**row(7, "7.00"), "stock": "many"}),
        form(8, 80, "c", {**row(8, "8.00"), "stock": 2**40}),
    ]


def decoded(spark: Any, records: list[tuple[bytes, bytes]]) -> list[dict[str, Any]]:
    raw = spark.createDataFrame(
        [(k, v, "t", 0, i) for i, (k, v) in enumerate(records)],
        "key binary, value binary, topic string, partition int, offset long",
    )
    decode = dbz.DebeziumDecoder(data_columns=COLUMNS, data_ddl=DATA_DDL, key_column="id")
    rows = decode(raw).orderBy("src_offset").collect()
    # The original bytes (kept for dead letters) differ by form; everything decoded must not.
    return [
        {k: v for k, v in r.asDict(recursive=True).items() if k not in ("src_key", "src_value")} for r in rows
    ]


def test_both_forms_decode_to_the_same_changes_and_errors(spark: Any) -> None:
    enveloped, plain = decoded(spark, changes(True)), decoded(spark, changes(False))
    assert plain == enveloped
    by_offset = {r["src_offset"]: r for r in plain}
    assert [by_offset[i]["entity"] for i in range(5)] == ["1", "1", "2", "3", "3"]
    assert by_offset[1]["keep_fields"] == ["description"] and by_offset[1]["price"] == "1.50"
    assert by_offset[4]["op"] == "delete" and by_offset[4]["set_fields"] == {}
    assert by_offset[0]["position"] < by_offset[1]["position"]
    assert [r["error"] for r in plain[:5]] == [None] * 5
    assert by_offset[5]["error"] == "unsupported Debezium op x"
    assert by_offset[6]["error"] == by_offset[7]["error"] == "value is not a Debezium change event in JSON"
    for unfit in (8, 9):
        assert by_offset[unfit]["error"].startswith("a value does not fit its column's type")
        assert DATA_DDL in by_offset[unfit]["error"]


def test_an_error_row_keeps_its_records_bytes_and_a_change_none(spark: Any) -> None:
    """The bytes a dead letter is written from; a change carries none (they would dominate its size)."""
    records = changes(False)
    raw = spark.createDataFrame(
        [(k, v, "t", 0, i) for i, (k, v) in enumerate(records)],
        "key binary, value binary, topic string, partition int, offset long",
    )
    decode = dbz.DebeziumDecoder(data_columns=COLUMNS, data_ddl=DATA_DDL, key_column="id")
    rows = decode(raw).orderBy("src_offset").collect()
    kept = [(r["src_key"], r["src_value"]) for r in rows]
    assert [r["error"] is None for r in rows] == [True] * 5 + [False] * 5
    assert kept[:5] == [(None, None)] * 5
    assert [(bytes(k), bytes(v)) for k, v in kept[5:]] == records[5:]


def test_real_connector_without_schemas(spark: Any, cdc_source: Any, run_config: Any, endpoints: Any) -> None:
    source = cdc_source(TABLE_DDL)
    pg = source.pg
    for i in (1, 2, 3):
        pg.execute(f"INSERT INTO {source.table} VALUES ({i}, 'p{i}', 'about {i}', {i}.00, {i})")  # type: ignore[arg-type]
    source.start(**SCHEMALESS_JSON)  # snapshot reads of 1..3
    pg.execute(f"UPDATE {source.table} SET price = 9.50, stock = 7 WHERE id = 2")  # type: ignore[arg-type]
    pg.execute(f"DELETE FROM {source.table} WHERE id = 3")  # type: ignore[arg-type]
    pg.execute(f"INSERT INTO {source.table} VALUES (4, 'p4', 'about 4', 4.00, 4)")  # type: ignore[arg-type]
    # 3 snapshot reads, the update, the delete and its tombstone, the insert
    wait_for_end_offset(endpoints, source.topic, 7)
    plan = JobPlan.of(PRODUCTS, run_config(topic=source.topic, table=f"public.{source.table}"))
    run_once(spark, plan)

    values = [json.loads(m.value()) for m in read_all(endpoints, source.topic) if m.value()]
    assert values and all("schema" not in v and "op" in v for v in values)  # really the plain form
    assert [str(d) for d in verify(plan)] == []
    cache = plan.cache()
    assert cache.read("2") == {"name": "p2", "description": "about 2", "price": "9.50", "stock": "7"}
    assert cache.read("3") is None and cache.read("4") is not None


def test_only_a_column_held_as_text_can_be_the_placeholder(spark: Any) -> None:
    """A user's placeholder "7" marks a TOASTed text column, but stock 7 (an int: Postgres never
    TOASTs it) is a value the change sets."""
    records = [
        debezium(7, 70, "u", {**row(7, "7.00"), "stock": 7}, unavailable=("description",), placeholder="7")
    ]
    raw = spark.createDataFrame(
        [(k, v, "t", 0, 0) for k, v in records],
        "key binary, value binary, topic string, partition int, offset long",
    )
    decode = dbz.DebeziumDecoder(
        data_columns=COLUMNS, data_ddl=DATA_DDL, key_column="id", unavailable_placeholder="7"
    )
    (change,) = [r.asDict(recursive=True) for r in decode(raw).collect()]
    assert change["error"] is None
    assert change["keep_fields"] == ["description"] and change["description"] is None
    assert change["stock"] == 7 and change["set_fields"]["stock"] == "7"
