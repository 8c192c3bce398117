"""Naming the columns behind a schema the registry's compatibility rule refused (pure)."""

from __future__ import annotations

from cdc.failures import failure_cause
from cdc.schema_refusal import Column, column_changes, refused_artifact, registered_columns, table_of

TRACE = (
    "org.apache.kafka.connect.errors.ConnectException: Tolerance exceeded in error handler\n"
    "Caused by: io.apicurio.registry.rest.client.exception.RuleViolationException: Incompatible "
    "artifact: shop.public.items-value [AVRO], num of incompatible diffs: {1}, list of diff types: "
    "[reader union lacking writer type: RECORD at /fields/1/type/1]\n"
)


def _field(name: str, source: str, *, optional: bool) -> dict[str, object]:
    typed = {"type": "string", "connect.parameters": {"__debezium.source.column.type": source}}
    return {"name": name, "type": ["null", typed] if optional else typed}


VALUE = {
    "type": "record",
    "name": "Value",
    "fields": [_field("id", "INT4", optional=False), _field("v", "TEXT", optional=True)],
}
ENVELOPE = {
    "type": "record",
    "name": "Envelope",
    "fields": [{"name": "before", "type": ["null", VALUE]}, {"name": "after", "type": ["null", "Value"]}],
}


def test_the_refused_artifact_and_its_table_come_from_the_trace() -> None:
    assert refused_artifact(TRACE) == "shop.public.items-value"
    assert refused_artifact("java.lang.NullPointerException") is None
    assert table_of("shop.public.items-value", "shop") == "public.items"
    assert table_of("other.public.items-value", "shop") is None


def test_registered_columns_read_the_source_types_from_the_first_definition_of_the_row() -> None:
    after_defined = {
        **ENVELOPE,
        "fields": [{"name": "before", "type": "null"}, {"name": "after", "type": VALUE}],
    }
    assert registered_columns(ENVELOPE) == {"id": "INT4", "v": "TEXT"}  # Debezium's: `after` names it
    assert registered_columns(after_defined) == {"id": "INT4", "v": "TEXT"}
    assert registered_columns(VALUE) == {"id": "INT4", "v": "TEXT"}  # a key schema is the row itself


def test_changes_name_type_changes_added_and_dropped_columns() -> None:
    now = [
        Column("id", "INT4", False, False),
        Column("v", "INT4", True, False),
        Column("w", "INT8", False, False),
        Column("z", "TEXT", False, True),
    ]
    assert column_changes({"id": "INT4", "v": "TEXT", "gone": "TEXT"}, now) == (
        "v TEXT -> INT4",
        "w added NOT NULL without a default",
        "z added",
        "gone dropped",
    )


def test_the_cause_of_a_refusal_says_what_changed_and_what_to_do() -> None:
    cause = failure_cause(TRACE, {}, ("v TEXT -> INT4",)) or ""
    assert "refused the table's new schema under the subject's compatibility rule" in cause
    assert "the table changed: v TEXT -> INT4;" in cause and "cdc restart" in cause
    assert "the table changed" not in (failure_cause(TRACE, {}) or "")
