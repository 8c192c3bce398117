"""Debezium Avro records (Apicurio's AvroConverter, Confluent framing) decoded in the JVM with from_avro.

Captured records of the cdc type-torture table (tests/unit/cdc/fixtures) check the typed conversions and
that Avro and JSON records decode to the same changes, in one frame; a real `format="avro"` connector
feeds the products materializer on both batch paths, through ADD/DROP COLUMN, with poison records.
"""

from __future__ import annotations

import base64
import io
import json
import struct
from collections import OrderedDict
from datetime import datetime, timedelta
from decimal import Decimal
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from conftest import read_all, run_once, wait_for_end_offset
from fastavro import parse_schema, schemaless_writer

from cdc.connector_spec import ConnectorSpec, DatabaseSpec, RegistrySpec
from kafkakit.positions import parse_start
from kafkakit.settings import Endpoints
from materializers.decode import debezium as dbz
from materializers.decode.avro_columns import FLAT_PREFIX
from materializers.decode.avro_events import SchemaCache, WriterSchemas, learn_topic_schemas
from materializers.decode.event_shape import UNFRAMED_ID
from materializers.ops.verify import verify
from materializers.runtime.job import Job, JobPlan
from shop.products import COLUMNS, DATA_DDL, PRODUCTS, TABLE_DDL

pytestmark = pytest.mark.integration

FIXTURES = Path(__file__).parents[2] / "unit" / "cdc" / "fixtures"
PATHS = pytest.mark.parametrize("small_batch_rows", ["10000", "0"], ids=["driver", "executors"])
SOURCE = "key binary, value binary, topic string, partition int, offset long"


def captured(form: str) -> dict[str, Any]:
    name = "debezium_avro_records.json" if form == "avro" else "debezium_records.json"
    return dict(json.loads((FIXTURES / name).read_text()))


def torture_rows(form: str, first_offset: int = 0) -> list[tuple[Any, ...]]:
    def raw(text: str | None) -> bytes | None:
        if text is None:
            return None
        return base64.b64decode(text) if form == "avro" else text.encode()

    records = captured(form)["torture"]
    return [(raw(r["key"]), raw(r["value"]), "t", 0, first_offset + i) for i, r in enumerate(records)]


def known(texts: dict[int, str]) -> WriterSchemas:
    """Writer schemas as a job that already learned `texts` holds them (the registry is not asked)."""
    return WriterSchemas("http://127.0.0.1:9/unused", True, SchemaCache(found=OrderedDict(texts)))


def decoder_of(ddl: str) -> dbz.DebeziumDecoder:
    return dbz.DebeziumDecoder(
        data_columns=tuple(c.split(" ")[0] for c in ddl.split(", ")), data_ddl=ddl, key_column="id"
    )


def decoded(frame: Any) -> list[dict[str, Any]]:
    return [r.asDict(recursive=True) for r in frame.orderBy("src_offset").collect()]


def decode(
    spark: Any, rows: list[tuple[Any, ...]], ddl: str, schemas: WriterSchemas | None
) -> list[dict[str, Any]]:
    return decoded(decoder_of(ddl)(spark.createDataFrame(rows, SOURCE), schemas))


def test_avro_and_json_records_decode_to_the_same_changes_in_one_frame(spark: Any) -> None:
    texts = {int(k): v for k, v in captured("avro")["schemas"].items()}
    ddl = "c_int int, c_bigint bigint, c_numeric_ps string, c_text string, c_bool boolean, c_json string, c_uuid string"
    decoder = decoder_of(ddl)
    source = spark.createDataFrame([*torture_rows("avro"), *torture_rows("json", 100)], SOURCE)
    # Knowing writer schemas, it reads Avro only (no from_json in the query) until it meets JSON:
    # each JSON record is an error row whose schema_id tells the job to decode it again.
    avro_only = decoder(source, known(texts))
    assert not decoder.reads_json and "from_json" not in plan_of(avro_only)
    # and all of it generated code, though seven writer schemas' documents make 135 fields
    # (spark_session.CODEGEN_FIELDS): no interpreted projection
    assert [line[:60] for line in plan_of(avro_only).splitlines() if "*(" not in line] == []
    first = decoded(avro_only)
    assert [r["error"] for r in first if r["src_offset"] < 100] == [None] * 8
    assert {(r["error"], r["schema_id"]) for r in first if r["src_offset"] >= 100} == {
        (dbz.JSON_UNREAD, UNFRAMED_ID)
    }
    decoder.meet_json()
    both = decoder(source, known(texts))
    assert decoder.reads_json and "from_json" in plan_of(both)
    rows = decoded(both)
    avro = [r for r in rows if r["src_offset"] < 100]
    as_json = [r for r in rows if r["src_offset"] >= 100]
    assert len(avro) == len(as_json) == 8  # the tombstone is dropped
    same = (
        "entity",
        "op",
        "set_fields",
        "keep_fields",
        "error",
        "c_int",
        "c_bigint",
        "c_numeric_ps",
        "c_text",
    )
    assert [{k: r[k] for k in same} for r in avro] == [{k: r[k] for k in same} for r in as_json]
    assert all(r["error"] is None for r in rows)
    # schema_id names only an id the decode was not built with: none here, and none for JSON.
    assert {r["schema_id"] for r in rows} == {None}


def plan_of(frame: Any) -> str:
    """`frame`'s physical plan, every field printed."""
    return str(frame._jdf.queryExecution().executedPlan().treeString(False, False, 100_000, False, False))


def test_semantic_types_become_the_ddl_types_exactly(spark: Any) -> None:
    texts = {int(k): v for k, v in captured("avro")["schemas"].items()}
    ddl = (
        "c_numeric_ps decimal(12,4), c_ts timestamp, c_ts3 timestamp, c_date date, c_tstz timestamp, "
        "c_time bigint, c_int_arr array<int>, c_bytea binary, c_smallint smallint"
    )
    columns = tuple(c.split(" ")[0] for c in ddl.split(", "))
    decoder = dbz.DebeziumDecoder(data_columns=columns, data_ddl=ddl, key_column="id")
    frame = decoder(spark.createDataFrame(torture_rows("avro"), SOURCE), known(texts)).selectExpr(
        "src_offset", "error", "c_numeric_ps", "unix_micros(c_ts) AS ts", "unix_micros(c_ts3) AS ts3",
        "unix_date(c_date) AS date", "unix_micros(c_tstz) AS tstz", "c_time", "c_int_arr", "c_bytea", "c_smallint",
    )  # fmt: skip
    got = {r["src_offset"]: r.asDict() for r in frame.collect()}
    # The same rows' JSON payloads carry Connect's raw values: the expected ones, computed in Python.
    for offset, record in enumerate(captured("json")["torture"]):
        after = json.loads(record["value"])["payload"]["after"] if record["value"] else None
        if not after:
            continue
        row = got[offset]
        assert row["error"] is None, row["error"]
        assert row["c_numeric_ps"] == (
            None if after["c_numeric_ps"] is None else Decimal(after["c_numeric_ps"])
        )
        assert row["ts"] == after["c_ts"]
        assert row["ts3"] == (None if after["c_ts3"] is None else after["c_ts3"] * 1000)
        assert row["date"] == after["c_date"] and row["c_time"] == after["c_time"]
        if after["c_tstz"] is not None:
            expected = datetime.fromisoformat(after["c_tstz"]) - datetime.fromisoformat(
                "1970-01-01T00:00:00Z"
            )
            assert row["tstz"] == expected // timedelta(microseconds=1)
        assert row["c_int_arr"] == after["c_int_arr"] and row["c_smallint"] == after["c_smallint"]
        assert row["c_bytea"] == (None if after["c_bytea"] is None else base64.b64decode(after["c_bytea"]))


def test_a_change_with_no_before_is_read_flat_and_a_delete_nested(spark: Any) -> None:
    """Which document each captured body was read into (`AvroForms.documents`): inserts and updates
    (no `before`, an `after`) by the flat form alone, deletes by the nested one alone, and the
    decoded changes carry the values either way (the test above checks them type by type)."""
    from pyspark.sql import functions as F

    from materializers.decode import debezium_avro

    texts = {int(k): v for k, v in captured("avro")["schemas"].items()}
    forms = debezium_avro.AvroForms(texts, ("c_text",), "c_text string", "id")
    frame = spark.createDataFrame(torture_rows("avro"), SOURCE).where("value IS NOT NULL")
    documents = frame.select("offset", "key", "value", *debezium_avro.framing()).select(
        "offset", "key", "value", *forms.documents()
    )
    names = [n for n in forms.document_names() if n.startswith("_v")]
    read = {
        r["offset"]: (r["op"], sorted(n for n in names if r[n] is not None))
        for r in documents.select(
            "offset", F.coalesce(*[F.col(n)["op"] for n in names]).alias("op"), *names
        ).collect()
    }
    assert {op for op, _ in read.values()} >= {"c", "u", "d"}
    for op, into in read.values():
        assert len(into) == 1 and into[0].endswith(debezium_avro.FLAT) == (op != "d"), (op, into)


def envelope_schema(field_type: Any) -> dict[str, Any]:
    row = {
        "type": "record",
        "name": "Value",
        "fields": [{"name": "id", "type": "int"}, {"name": "n", "type": ["null", field_type]}],
    }
    source = {
        "type": "record",
        "name": "Source",
        "fields": [{"name": "lsn", "type": ["null", "long"]}, {"name": "ts_ms", "type": "long"}],
    }
    return {
        "type": "record", "name": "Envelope", "namespace": "t",
        "fields": [
            {"name": "before", "type": ["null", row]}, {"name": "after", "type": ["null", "Value"]},
            {"name": "source", "type": source}, {"name": "op", "type": "string"}, {"name": "ts_ms", "type": ["null", "long"]},
        ],
    }  # fmt: skip


def framed(schema_id: int, schema: dict[str, Any], datum: dict[str, Any]) -> bytes:
    body = io.BytesIO()
    schemaless_writer(body, parse_schema(schema), datum)
    return struct.pack(">bI", 0, schema_id) + body.getvalue()


def test_unfit_refused_unknown_and_undecodable_records_are_error_rows(spark: Any) -> None:
    wide = {"type": "bytes", "logicalType": "decimal", "precision": 64, "scale": 2,
            "connect.name": "org.apache.kafka.connect.data.Decimal"}  # fmt: skip
    schemas = {7001: envelope_schema(wide), 7002: envelope_schema({"type": "long"})}
    key = json.dumps({"id": 1}).encode()  # a JSON key beside an Avro value: read record by record,
    decoder = decoder_of(
        "n int"
    )  # once the decoder has met JSON (the job tells it: DebeziumDecoder.meet_json)
    decoder.meet_json()

    def change(sid: int, n: Any) -> bytes:
        datum = {"after": {"id": 1, "n": n}, "source": {"lsn": 10, "ts_ms": 1}, "op": "c", "ts_ms": 1}
        return framed(sid, schemas[sid], datum)

    good = change(7002, 5)
    rows = [
        (key, change(7001, Decimal("1.50")), "t", 0, 0),  # Connect Decimal(64,2): refused by rule
        (key, change(7002, 2**40), "t", 0, 1),  # does not fit `n int`
        (key, good, "t", 0, 2),
        (key, good[:5] + b"\x02", "t", 0, 3),  # cut short
        (key, b"\x00\x00\x00\x1b\x57" + good[5:], "t", 0, 4),  # an id no registry knows
        (key, good[:8], "t", 0, 5),  # cut short inside a flat body (no `before`, an `after`)
    ]
    texts = {sid: json.dumps(s) for sid, s in schemas.items()}
    out = decoded(decoder(spark.createDataFrame(rows, SOURCE), known(texts)))
    errors = [r["error"] for r in out]
    assert "Connect Decimal(64,2), wider than Spark's 38 digits" in errors[0]
    assert "decimal.handling.mode=string" in errors[0]
    assert errors[1].startswith("a value does not fit its column's type") and "(n int)" in errors[1]
    assert errors[2] is None and out[2]["n"] == 5 and out[2]["entity"] == "1"
    assert good[5:7] == FLAT_PREFIX
    assert (
        errors[3]
        == errors[5]
        == "Avro value does not decode with writer schema id 7002 (not a Debezium change event)"
    )
    assert "schema id 6999 is not in the registry" in errors[4]
    assert out[4]["schema_id"] == 6999  # what the job learns from
    assert [r["schema_id"] for r in out[:4]] == [None] * 4  # known ids: nothing to learn


def avro_converters(stack: Any) -> dict[str, str]:
    """The converter settings of a `format="avro"` connector spec, for CdcSource.start."""
    spec = ConnectorSpec(
        name="mat-avro",
        database=DatabaseSpec.from_dsn(stack.connect_view.pg_dsn),
        topic_prefix="mat_avro",
        tables=("public.unused",),
        format="avro",
        registry=RegistrySpec.from_url(stack.connect_view.schema_registry_url),
    )
    managed = ("key.converter", "value.converter", "schema.name.adjustment", "field.name.adjustment")
    return {k: v for k, v in spec.to_config().items() if k.startswith(managed)}


def value_ids(kafka: Endpoints, topic: str) -> list[int]:
    return framed_ids([m.value() for m in read_all(kafka, topic) if m.value()])


def key_ids(kafka: Endpoints, topic: str) -> list[int]:
    return framed_ids([m.key() for m in read_all(kafka, topic) if m.key()])


def framed_ids(payloads: list[bytes]) -> list[int]:
    assert payloads and all(p[0] == 0 for p in payloads)  # really Avro in Confluent framing
    return [int.from_bytes(p[1:5], "big") for p in payloads]


@PATHS
def test_products_over_a_real_avro_connector_through_add_and_drop_column(
    spark: Any, stack: Any, cdc_source: Any, run_config: Any, endpoints: Any, small_batch_rows: str
) -> None:
    source = cdc_source(TABLE_DDL)
    pg, table, kafka = source.pg, source.table, endpoints
    for i in range(1, 6):
        pg.execute(
            f"INSERT INTO {table} VALUES (%s, %s, %s, %s, %s)",  # type: ignore[arg-type]
            (i, f"widget {i}", f"a sturdy widget number {i}", f"{i}.50", i * 10),
        )
    source.start(**avro_converters(stack))  # snapshot: 5 reads
    pg.execute(f"UPDATE {table} SET price = 99.99, name = 'gadget two' WHERE id = 2")  # type: ignore[arg-type]
    pg.execute(f"DELETE FROM {table} WHERE id = 4")  # type: ignore[arg-type]
    pg.execute(f"INSERT INTO {table} VALUES (6, 'sprocket', NULL, 0.10, 1)")  # type: ignore[arg-type]
    wait_for_end_offset(kafka, source.topic, 5 + 1 + 2 + 1)
    # What a job knows before its first batch: the writer schemas of the topic's subjects, read from
    # their version documents, each the text the registry serves for its id.
    registry = partial(WriterSchemas, kafka.schema_registry_url, auth=kafka.schema_registry_auth)
    learnt = registry()
    learn_topic_schemas(learnt, source.topic)
    assert set(learnt.known()) == {*value_ids(kafka, source.topic), *key_ids(kafka, source.topic)}
    assert learnt.known() == {i: registry().get(i) for i in learnt.known()}
    plan = JobPlan.of(
        PRODUCTS, run_config(topic=source.topic, table=f"public.{table}", small_batch_rows=small_batch_rows)
    )
    job = Job(spark, plan)
    query = job.start(parse_start("earliest"), available_now=True)
    query.awaitTermination(240)
    assert query.exception() is None and not query.isActive
    # Each record read once: the job fetched the topic's writer schemas before its first batch, which
    # a job knowing none decoded twice (every record refused the first time).
    assert sum(p["numInputRows"] for p in query.recentProgress) == 9
    assert [str(d) for d in verify(plan)] == []
    assert plan.cache().read("2") == {
        "name": "gadget two", "description": "a sturdy widget number 2", "price": "99.99", "stock": "20",
    }  # fmt: skip
    assert plan.cache().read("4") is None and plan.cache().read("6") is not None

    # A new writer schema mid-stream, read by the same job (no restart): a column the view does not
    # keep is added, written, then dropped again.
    pg.execute(f"ALTER TABLE {table} ADD COLUMN colour text")  # type: ignore[arg-type]
    pg.execute(f"INSERT INTO {table} VALUES (7, 'bolt', 'a bolt', 0.05, 100, 'grey')")  # type: ignore[arg-type]
    pg.execute(f"UPDATE {table} SET stock = 11, colour = 'red' WHERE id = 1")  # type: ignore[arg-type]
    pg.execute(f"ALTER TABLE {table} DROP COLUMN colour")  # type: ignore[arg-type]
    pg.execute(f"UPDATE {table} SET price = 3.75 WHERE id = 3")  # type: ignore[arg-type]
    wait_for_end_offset(kafka, source.topic, 9 + 3)
    run_once(spark, plan, job=job)
    assert [str(d) for d in verify(plan)] == []
    assert job.dead_letters == 0
    assert len(set(value_ids(kafka, source.topic))) >= 2  # the records name more than one schema
    assert plan.cache().read("7") == {
        "name": "bolt",
        "description": "a bolt",
        "price": "0.05",
        "stock": "100",
    }


@PATHS
def test_avro_poison_and_unfit_values_are_dead_lettered_and_the_job_goes_on(
    spark: Any,
    stack: Any,
    cdc_source: Any,
    run_config: Any,
    endpoints: Any,
    producer: Any,
    small_batch_rows: str,
) -> None:
    source = cdc_source(TABLE_DDL.replace("stock integer", "stock bigint"))  # wider than the view's int
    pg, table, kafka = source.pg, source.table, endpoints
    pg.execute(f"INSERT INTO {table} VALUES (1, 'fits', 'x', 1.00, 5)")  # type: ignore[arg-type]
    pg.execute(f"INSERT INTO {table} VALUES (2, 'too many', 'x', 1.00, {2**40})")  # type: ignore[arg-type]
    source.start(**avro_converters(stack))
    wait_for_end_offset(kafka, source.topic, 2)
    first = read_all(kafka, source.topic)[0]
    key, value = first.key(), first.value()
    producer.produce(source.topic, key=key, value=b"\x00\x7f\xff\xff\xf0" + value[5:])  # offset 2: unknown id
    producer.produce(source.topic, key=key, value=value[:7])  # offset 3: cut short
    producer.flush()
    pg.execute(f"INSERT INTO {table} VALUES (3, 'after the poison', 'x', 3.00, 3)")  # type: ignore[arg-type]
    wait_for_end_offset(kafka, source.topic, 5)
    plan = JobPlan.of(
        PRODUCTS, run_config(topic=source.topic, table=f"public.{table}", small_batch_rows=small_batch_rows)
    )
    job = run_once(spark, plan)

    cache = plan.cache()
    assert cache.read("1") is not None and cache.read("3") is not None and cache.read("2") is None
    assert job.dead_letters == 3
    letters = {int(dict(m.headers())["dlq-source-offset"]): m for m in read_all(kafka, plan.dlq_topic)}
    assert sorted(letters) == [1, 2, 3]
    headers = {o: {k: v.decode() for k, v in m.headers()} for o, m in letters.items()}
    assert all(
        h["dlq-source-topic"] == source.topic and h["dlq-source-partition"] == "0" for h in headers.values()
    )
    assert headers[1]["dlq-error"].startswith("a value does not fit its column's type")
    assert DATA_DDL in headers[1]["dlq-error"] and "column stock (int)" in headers[1]["dlq-error"]
    assert f"schema id {0x7FFFFFF0} is not in the registry" in headers[2]["dlq-error"]
    assert "does not decode" in headers[3]["dlq-error"]
    assert letters[3].value() == value[:7]  # the original bytes, for a replay
    assert COLUMNS == ("name", "description", "price", "stock")


def json_change(entity: int, name: str) -> tuple[bytes, bytes]:
    """A products insert as Connect's JsonConverter without schemas writes it: (key, value)."""
    after = {"id": entity, "name": name, "description": "from json", "price": "1.50", "stock": 3}
    value = {"before": None, "after": after, "source": {"lsn": 5, "ts_ms": 1}, "op": "c", "ts_ms": 1}
    return json.dumps({"id": entity}).encode(), json.dumps(value).encode()


def steps_of(job: Job, batches: int = 10) -> list[str]:
    return [step for b in range(batches) for step in job.clock.take(b)]


@pytest.fixture
def avro_products(stack: Any, cdc_source: Any) -> Any:
    """An empty products table captured by a `format="avro"` connector (started)."""
    source = cdc_source(TABLE_DDL)
    source.start(**avro_converters(stack))
    return source


@pytest.mark.parametrize(
    ("small_batch_rows", "views"),
    [("10000", ""), ("0", ""), ("0", "cache")],
    ids=["driver", "executors", "single-pass"],
)
def test_json_records_in_an_avro_topic_are_decoded_again_then_read_by_the_restarted_query(
    spark: Any,
    avro_products: Any,
    run_config: Any,
    endpoints: Any,
    producer: Any,
    small_batch_rows: str,
    views: str,
) -> None:
    """A connector moved from JSON to Avro leaves JSON records in its topic. The job knows the topic's
    writer schemas, so its query reads Avro only (one generated stage); a JSON record there is decoded
    again reading JSON (nothing dead-lettered that JSON reads), and the job's query, restarted,
    reads both."""
    source = avro_products
    pg, table, kafka = source.pg, source.table, endpoints
    pg.execute(f"INSERT INTO {table} VALUES (1, 'avro one', 'x', 1.00, 1)")  # type: ignore[arg-type]
    wait_for_end_offset(kafka, source.topic, 1)
    for key, value in (json_change(10, "json ten"), (b"not json", b"{not json")):  # offsets 1, 2
        producer.produce(source.topic, key=key, value=value)
    producer.flush()
    pg.execute(f"INSERT INTO {table} VALUES (2, 'avro two', 'x', 2.00, 2)")  # type: ignore[arg-type]
    wait_for_end_offset(kafka, source.topic, 4)
    plan = JobPlan.of(
        PRODUCTS,
        run_config(
            topic=source.topic,
            table=f"public.{table}",
            small_batch_rows=small_batch_rows,
            **({"views": views} if views else {}),
        ),
    )
    job = run_once(spark, plan)

    cache = plan.cache()
    assert cache.read("1")["name"] == "avro one" and cache.read("2")["name"] == "avro two"  # type: ignore[index]
    assert cache.read("10") == {"name": "json ten", "description": "from json", "price": "1.50", "stock": "3"}
    letters = read_all(kafka, plan.dlq_topic)
    assert job.dead_letters == 1 and [dict(m.headers())["dlq-source-offset"] for m in letters] == [b"2"]
    assert dict(letters[0].headers())["dlq-error"].decode() == "value is not a Debezium change event in JSON"
    assert job.stale()  # its query read Avro only: a runner restarts it between batches
    if not views:  # the one-pass path decodes them again without a step of its own
        assert "decode_again" in steps_of(job)

    key, value = json_change(11, "json eleven")
    producer.produce(source.topic, key=key, value=value)
    producer.flush()
    wait_for_end_offset(kafka, source.topic, 5)
    run_once(spark, plan, job=job)  # started again: the query reads JSON too
    assert cache.read("11") is not None and job.dead_letters == 1 and not job.stale()
    assert "decode_again" not in steps_of(job)
