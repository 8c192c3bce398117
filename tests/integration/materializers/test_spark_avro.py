"""`from_avro` with literal options (spark_avro.py), in Spark itself: it reads permissively with a
reader schema, and neither decoder leaves a `map(...)` builder (CreateMap) in its plan — the shared map builder two
views' threads raced on (DUPLICATED_MAP_KEY in CI)."""

from __future__ import annotations

import json
import re
import threading
from collections import OrderedDict
from typing import Any

import pytest
from fastavro import parse_schema
from records import order_schema_text
from test_debezium_avro import SOURCE, captured, known, torture_rows

from materializers.decode import avro_events, event_shape, spark_avro
from materializers.decode import debezium as dbz
from materializers.decode.avro_events import SchemaCache, WriterSchemas

pytestmark = pytest.mark.integration

WRITER = '{"type":"record","name":"r","fields":[{"name":"a","type":"long"},{"name":"b","type":"string"}]}'
READER = '{"type":"record","name":"r","fields":[{"name":"a","type":"long"}]}'


def built_maps(frame: Any) -> list[str]:
    """The `map(k, v, ...)` builders (CreateMap) holding entries in `frame`'s analyzed plan: a
    literal prints as `map(keys: [...], values: [...])`, an empty builder (nothing to race on) as `map()`."""
    return re.findall(r"\bmap\((?!\)|keys: )[^)]*\)", frame._jdf.queryExecution().analyzed().toString())


def decodes_avro(frame: Any) -> bool:
    return "from_avro(" in frame._jdf.queryExecution().analyzed().toString()


def physical_plan(frame: Any) -> str:
    """`frame`'s physical plan, every field printed (Spark truncates long projections by default)."""
    return str(frame._jdf.queryExecution().executedPlan().treeString(False, False, 100_000, False, False))


def interpreted_avro_readers(frame: Any) -> list[str]:
    """The physical operators evaluating `from_avro` outside whole-stage generated code (their line
    of the plan lacks the `*(n)` stage mark): such an operator generates its code in every task, and
    every `from_avro` there parses Hadoop's XML defaults for its options, per task."""
    plan = physical_plan(frame)
    return [
        line[:120] for line in plan.splitlines() if "from_avro(" in line and not re.search(r"\*\(\d+\)", line)
    ]


def test_from_avro_reads_permissively_with_its_reader_schema(spark: Any) -> None:
    from pyspark.sql import functions as F

    bodies = [(1, bytes([2, 4]) + b"hi"), (2, bytes([0x80]))]  # a=1, b="hi"; a varint cut short
    frame = spark.createDataFrame(bodies, "n int, v binary").select(
        "n",
        spark_avro.from_avro(F.col("v"), WRITER).alias("whole"),
        spark_avro.from_avro(F.col("v"), WRITER, READER).alias("cut"),
    )
    rows = {r["n"]: r.asDict(recursive=True) for r in frame.collect()}
    assert rows[1]["whole"] == {"a": 1, "b": "hi"} and rows[1]["cut"] == {"a": 1}
    assert rows[2]["whole"] == {"a": None, "b": None}  # refused as a row, not a failed batch
    assert decodes_avro(frame) and built_maps(frame) == []


def test_the_change_decoder_plans_no_map_builder(spark: Any) -> None:
    texts = {int(k): v for k, v in captured("avro")["schemas"].items()}
    decoder = dbz.DebeziumDecoder(
        data_columns=("c_int", "c_text"), data_ddl="c_int int, c_text string", key_column="id"
    )
    frame = decoder(spark.createDataFrame(torture_rows("avro"), SOURCE), known(texts))
    assert decodes_avro(frame) and built_maps(frame) == []


def test_both_decoders_read_avro_in_generated_code(spark: Any) -> None:
    texts = {int(k): v for k, v in captured("avro")["schemas"].items()}
    decoder = dbz.DebeziumDecoder(
        data_columns=("c_int", "c_text"), data_ddl="c_int int, c_text string", key_column="id"
    )
    changes = decoder(spark.createDataFrame(torture_rows("avro"), SOURCE), known(texts))
    events = avro_events.decode(
        event_source(spark, 3), schemas=order_schemas(), wanted={"customer_id": "string"},
        event_types=("order.created",),
    )  # fmt: skip
    for frame in (changes, events):
        assert "from_avro(" in physical_plan(frame)
        assert interpreted_avro_readers(frame) == []
    # Reading Avro only (no JSON record met), the whole change decode is one generated stage: no
    # projection between two stages copying every row (`from_json` has no generated code).
    assert [line for line in physical_plan(changes).splitlines() if not re.search(r"\*\(1\)", line)] == []
    # and they still decode: every torture record but the tombstone is a change or an error row (the
    # test that decodes them value for value: test_debezium_avro), every event decodes
    assert changes.count() == len([r for r in torture_rows("avro") if r[1] is not None])
    assert [r["customer_id"] for r in events.collect()] == ["c"] * 3


def order_schemas() -> WriterSchemas:
    """The order.created writer schema as id 7, trusted (no registry)."""
    found = OrderedDict({7: order_schema_text("order.created")})
    return WriterSchemas("http://127.0.0.1:9/unused", True, SchemaCache(found=found))


def event_source(spark: Any, count: int) -> Any:
    """`count` order.created records (schema id 7) as the Kafka source's rows."""
    from pyspark.sql import functions as F

    schema = parse_schema(json.loads(order_schema_text("order.created")))
    records = [
        event_shape.encode_record(
            stream_id=f"o-{n}", version=1, event_type="order.created", schema_id=7,
            schema=schema, data={"order_id": f"o-{n}", "customer_id": "c"},
        )
        for n in range(count)
    ]  # fmt: skip
    return spark.createDataFrame(
        [(k.encode() if isinstance(k, str) else k, v, h, "t", 0, n) for n, (k, v, h) in enumerate(records)],
        "key binary, value binary, headers array<struct<key: string, value: binary>>, topic string, "
        "partition int, offset long",
    ).withColumn("timestamp", F.current_timestamp())


def test_the_event_decoder_plans_no_map_builder_and_decodes_from_two_threads(spark: Any) -> None:
    from pyspark.sql import functions as F

    frame = avro_events.decode(
        event_source(spark, 20), schemas=order_schemas(), wanted={"customer_id": "string"},
        event_types=("order.created",),
    )  # fmt: skip
    assert decodes_avro(frame) and built_maps(frame) == []

    # Two views' threads planning self-joins of one decoded frame: each copy of the decode reads
    # its options at once (with `map(...)` options this failed 1 to 10 times in 80 plans).
    failures: list[BaseException] = []

    def plan_and_run() -> None:
        for _ in range(10):
            try:
                mine = frame.select("entity", "customer_id")
                joined = mine.join(frame.select("entity").distinct(), "entity", "left_anti")
                assert joined.count() == 0 and mine.where(F.col("customer_id") == "c").count() == 20
            except BaseException as error:  # collected, asserted below
                failures.append(error)

    threads = [threading.Thread(target=plan_and_run) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == []


def test_the_event_decoder_names_an_id_to_learn_only_for_a_record_it_could_not_pick_a_schema_for(
    spark: Any,
) -> None:
    """Ids are compared as the framing's bytes; a record's `schema_id` is the number of an id the
    decode was not built with (what the job learns), null for the others, broken bodies included."""
    from pyspark.sql import functions as F

    source = event_source(spark, 3)
    value = F.col("value")
    unknown = F.concat(F.lit(bytearray(b"\x00\x00\x01\x00\x09")), F.expr("substring(value, 6)"))  # id 65545
    cut = F.expr("substring(value, 1, 6)")  # id 7, one body byte: too short for two strings
    source = source.withColumn(
        "value", F.when(F.col("offset") == 1, unknown).when(F.col("offset") == 2, cut).otherwise(value)
    )
    frame = avro_events.decode(
        source, schemas=order_schemas(), wanted={"customer_id": "string"}, event_types=("order.created",)
    )
    rows = sorted(frame.select("src_offset", "customer_id", "error", "schema_id").collect())
    assert [(r["src_offset"], r["customer_id"], r["schema_id"]) for r in rows] == [
        (0, "c", None),
        (1, None, 65545),
        (2, None, None),
    ]
    assert [r["error"] for r in rows] == [
        None,
        f"schema id 65545{avro_events.NOT_KNOWN}",
        "Avro body does not decode with writer schema id 7",
    ]
