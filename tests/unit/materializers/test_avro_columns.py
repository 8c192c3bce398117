"""How Debezium Avro fields map onto a materializer's DDL columns (pure: no Spark, no services)."""

from __future__ import annotations

import base64
import io
import json
from pathlib import Path

import fastavro
import pytest

from materializers.decode.avro_columns import (
    FLAT_PREFIX,
    SourceField,
    avro_name,
    conversion,
    ddl_columns,
    decimal_scale,
    envelope_reader,
    flat_envelope,
    is_envelope,
    reader_schema,
    row_fields,
    spark_type,
)

FIXTURE = Path(__file__).parents[1] / "cdc" / "fixtures" / "debezium_avro_records.json"


def captured_schemas() -> dict[int, str]:
    """The writer schemas of the type-torture table, as Apicurio registered them (captured)."""
    return {int(k): v for k, v in json.loads(FIXTURE.read_text())["schemas"].items()}


def torture_envelope() -> str:
    return next(t for t in captured_schemas().values() if is_envelope(t) and "c_numeric" in t)


def test_ddl_columns_normalizes_spellings_and_keeps_nested_types_whole() -> None:
    ddl = "name string, `price` DECIMAL(12, 2), n integer, big long, tags array<string>, m map<string,int>"
    assert ddl_columns(ddl) == {
        "name": "string",
        "price": "decimal(12,2)",
        "n": "int",
        "big": "bigint",
        "tags": "array<string>",
        "m": "map<string,int>",
    }
    assert decimal_scale("decimal(12,2)") == 2 and decimal_scale("decimal") == 0


def test_avro_names_follow_debeziums_adjustment() -> None:
    assert avro_name("price") == "price"
    assert avro_name("unit-price") == "unit_price"
    assert avro_name("1st") == "_1st"


def test_captured_schemas_split_into_envelopes_and_keys() -> None:
    schemas = captured_schemas()
    envelopes = [i for i, t in schemas.items() if is_envelope(t)]
    keys = [i for i, t in schemas.items() if not is_envelope(t)]
    assert envelopes and keys
    assert all(row_fields(schemas[k]).keys() == {"id"} for k in keys)


def test_row_fields_read_semantic_types_from_the_writer_schema() -> None:
    fields = row_fields(torture_envelope())
    assert fields["c_ts"] == SourceField("long", "io.debezium.time.MicroTimestamp")
    assert fields["c_ts3"] == SourceField("long", "io.debezium.time.Timestamp")
    assert fields["c_date"] == SourceField("int", "io.debezium.time.Date")
    assert fields["c_tstz"] == SourceField("string", "io.debezium.time.ZonedTimestamp")
    assert fields["c_numeric_ps"] == SourceField("string")
    assert fields["c_int_arr"].avro == "array"
    assert fields["c_bytea"] == SourceField("bytes")


@pytest.mark.parametrize(
    ("column", "ddl", "kind"),
    [
        ("c_numeric_ps", "decimal(12,4)", "decimal_text"),
        ("c_numeric_ps", "string", "same"),
        ("c_ts", "timestamp", "micros"),
        ("c_ts3", "timestamp", "millis"),
        ("c_ts", "string", "text"),  # the raw micros, as the JSON path gives them
        ("c_ts", "bigint", "same"),
        ("c_date", "date", "days"),
        ("c_date", "int", "same"),
        ("c_tstz", "timestamp", "cast"),
        ("c_time", "bigint", "same"),
        ("c_int", "bigint", "cast"),
        ("c_bigint", "int", "cast"),  # range checked per value
        ("c_int_arr", "array<int>", "cast"),
        ("c_int_arr", "string", "text"),
        ("c_bytea", "binary", "same"),
        ("c_bytea", "string", "text"),
        ("c_bool", "boolean", "same"),
        ("c_double", "decimal(10,2)", "cast"),
        ("c_smallint", "smallint", "cast"),
        ("c_text", "int", "cast"),  # a numeric text fits, any other is refused per value
    ],
)
def test_conversions_of_the_torture_table(column: str, ddl: str, kind: str) -> None:
    assert conversion(row_fields(torture_envelope())[column], ddl).kind == kind


@pytest.mark.parametrize(
    ("column", "ddl", "reason"),
    [
        ("c_time", "timestamp", "time of day"),
        ("c_date", "timestamp", "does not turn into timestamp"),
        ("c_ts", "date", "does not turn into date"),
        ("c_bool", "timestamp", "does not turn into timestamp"),
        ("c_int_arr", "int", "does not turn into int"),
    ],
)
def test_pairs_outside_the_table_are_refused_with_the_reason(column: str, ddl: str, reason: str) -> None:
    found = conversion(row_fields(torture_envelope())[column], ddl)
    assert found.kind == "refuse" and reason in found.reason


def test_a_column_the_writer_schema_lacks_is_absent() -> None:
    assert conversion(None, "int").kind == "absent"


DECIMAL_64 = {
    "type": "bytes",
    "scale": 2,
    "precision": 64,
    "connect.name": "org.apache.kafka.connect.data.Decimal",
    "logicalType": "decimal",
}
DECIMAL_12 = {**DECIMAL_64, "precision": 12}


def envelope(*fields: tuple[str, object]) -> str:
    row = {"type": "record", "name": "Value", "fields": [{"name": n, "type": ["null", t]} for n, t in fields]}
    return json.dumps(
        {
            "type": "record",
            "name": "Envelope",
            "fields": [
                {"name": "before", "type": ["null", row]},
                {"name": "after", "type": ["null", "Value"]},
                {"name": "source", "type": {"type": "record", "name": "Source", "fields": []}},
                {"name": "op", "type": "string"},
            ],
        }
    )


def test_connect_decimal_beyond_38_digits_is_refused_and_unreadable_schema_parts_are_stripped() -> None:
    text = envelope(
        ("wide", DECIMAL_64), ("narrow", DECIMAL_12), ("day", {"type": "int", "logicalType": "date"})
    )
    fields = row_fields(text)  # `after` refers to the Value record by name
    assert fields["wide"] == SourceField("bytes", "org.apache.kafka.connect.data.Decimal", 64, 2)
    refused = conversion(fields["wide"], "decimal(38,2)")
    assert refused.kind == "refuse" and "wider than Spark's 38 digits" in refused.reason
    assert "decimal.handling.mode=string" in refused.reason
    assert conversion(fields["wide"], "string").kind == "refuse"
    assert conversion(fields["narrow"], "decimal(12,2)").kind == "same"
    assert conversion(fields["narrow"], "decimal(10,2)").kind == "cast"  # exactness checked per value
    assert conversion(fields["narrow"], "string").kind == "text"
    assert spark_type(fields["wide"]) == "binary" and spark_type(fields["narrow"]) == "decimal(12,2)"
    # from_avro would refuse the whole schema for the wide decimal; the date stays Connect's days
    stripped = json.dumps(json.loads(reader_schema(text)))
    assert stripped.count('"logicalType"') == 1 and '"precision": 12' in stripped


def test_variable_scale_decimal_is_refused() -> None:
    variable = {
        "type": "record",
        "name": "VariableScaleDecimal",
        "fields": [{"name": "scale", "type": "int"}, {"name": "value", "type": "bytes"}],
        "connect.name": "io.debezium.data.VariableScaleDecimal",
    }
    found = conversion(row_fields(envelope(("n", variable)))["n"], "decimal(20,4)")
    assert found.kind == "refuse" and "VariableScaleDecimal" in found.reason


def test_the_envelope_reader_keeps_only_what_the_decoder_reads() -> None:
    writer_text = torture_envelope()
    columns = ["c_numeric", "c_text", "c_uuid"]
    reader = json.loads(envelope_reader(writer_text, columns))
    fields = {f["name"]: f["type"] for f in reader["fields"]}
    assert list(fields) == ["before", "after", "source", "op", "ts_ms"]
    assert sorted(f["name"] for f in fields["source"]["fields"]) == ["lsn", "ts_ms"]
    row = next(t for t in fields["before"] if t != "null")  # `before` and `after` share one record
    assert sorted(f["name"] for f in row["fields"]) == columns and fields["after"] == ["null", row["name"]]


def test_real_records_resolve_through_the_envelope_reader_to_the_whole_schemas_values() -> None:
    """Every captured change (all writer schema versions) read with the cut reader schema gives,
    for each kept field, what the whole schema gives."""
    schemas = captured_schemas()
    columns = ["id", "c_numeric", "c_text", "c_uuid", "c_added"]
    changes = [r for r in json.loads(FIXTURE.read_text())["torture"] if r["value"]]  # not tombstones
    for record in changes:
        body = base64.b64decode(record["value"])
        writer_text = schemas[int.from_bytes(body[1:5], "big")]
        writer = fastavro.parse_schema(json.loads(reader_schema(writer_text)))
        cut = fastavro.parse_schema(json.loads(envelope_reader(writer_text, columns)))
        whole = fastavro.schemaless_reader(io.BytesIO(body[5:]), writer)
        read = fastavro.schemaless_reader(io.BytesIO(body[5:]), writer, cut)
        assert isinstance(whole, dict) and isinstance(read, dict)
        for side in ("before", "after"):
            kept = whole[side] and {c: v for c, v in whole[side].items() if c in columns}
            assert read[side] == kept
        assert read["source"] == {"lsn": whole["source"]["lsn"], "ts_ms": whole["source"]["ts_ms"]}
        assert (read["op"], read["ts_ms"]) == (whole["op"], whole["ts_ms"])
    assert len(changes) >= 8


def test_the_envelope_reader_keeps_the_whole_schema_when_a_cut_would_orphan_a_named_type() -> None:
    doc = json.loads(envelope(("name", "string")))
    shared = {"type": "record", "name": "Block", "fields": [{"name": "id", "type": "string"}]}
    doc["fields"] += [
        {"name": "transaction", "type": ["null", shared]},
        {"name": "ts_ms", "type": ["null", "Block"]},  # a kept field naming a type only a cut one defines
    ]
    text = json.dumps(doc)
    assert envelope_reader(text, ["name"]) == reader_schema(text)
    doc["fields"][-1]["type"] = ["null", "long"]
    cut = json.loads(envelope_reader(json.dumps(doc), ["name"]))
    assert [f["name"] for f in cut["fields"]] == ["before", "after", "source", "op", "ts_ms"]


def test_a_body_with_the_flat_prefix_reads_flat_exactly_as_nested() -> None:
    """Every captured change whose body starts with FLAT_PREFIX (`before` null, `after` a row) read
    with the flat schemas gives, field for field, what the nested envelope reader gives; the others
    (deletes: `after` null) keep the nested read. Both kinds are among the records the Spark tests
    decode."""
    schemas = captured_schemas()
    columns = ["id", "c_numeric", "c_text", "c_uuid", "c_added"]
    changes = [r for r in json.loads(FIXTURE.read_text())["torture"] if r["value"]]
    kinds = {True: 0, False: 0}
    for record in changes:
        framed = base64.b64decode(record["value"])
        body, writer_text = framed[5:], schemas[int.from_bytes(framed[1:5], "big")]
        forms = flat_envelope(writer_text, columns)
        assert forms is not None
        kinds[body.startswith(FLAT_PREFIX)] += 1
        if not body.startswith(FLAT_PREFIX):
            continue
        writer = fastavro.parse_schema(json.loads(reader_schema(writer_text)))
        nested = fastavro.schemaless_reader(
            io.BytesIO(body), writer, fastavro.parse_schema(json.loads(envelope_reader(writer_text, columns)))
        )
        flat_writer, flat_reader = (fastavro.parse_schema(json.loads(t)) for t in forms)
        flat = fastavro.schemaless_reader(io.BytesIO(body), flat_writer, flat_reader)
        assert isinstance(nested, dict) and isinstance(flat, dict) and nested["before"] is None
        assert flat == {
            **{f"after__{c}": v for c, v in nested["after"].items()},
            **{f"source__{c}": v for c, v in nested["source"].items()},
            "op": nested["op"],
            "ts_ms": nested["ts_ms"],
        }
    assert kinds[True] >= 5 and kinds[False] >= 1


def test_an_envelope_without_the_flat_layout_has_no_flat_form() -> None:
    assert flat_envelope(envelope(("name", "string")), ["name"]) is not None
    swapped = json.loads(envelope(("name", "string")))
    swapped["fields"][1]["type"] = ["Value", "null"]  # a non-null `after` is branch 0 here
    assert flat_envelope(json.dumps(swapped), ["name"]) is None
    reordered = json.loads(envelope(("name", "string")))
    reordered["fields"][:2] = reordered["fields"][1::-1]
    assert flat_envelope(json.dumps(reordered), ["name"]) is None
    point = {"type": "record", "name": "Point", "fields": [{"name": "x", "type": "double"}]}
    assert flat_envelope(envelope(("name", "string"), ("at", point)), ["name"]) is None  # a named type
    clash = json.loads(envelope(("name", "string")))
    clash["fields"].append({"name": "after__name", "type": "string"})
    assert flat_envelope(json.dumps(clash), ["name"]) is None
