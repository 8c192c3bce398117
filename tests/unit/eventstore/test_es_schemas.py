from __future__ import annotations

import json

import pytest

from eventstore.errors import SchemaIncompatible
from eventstore.schemas import Catalog, check_backward
from shop.order import ORDER

OLD = json.loads(ORDER.schema_text("order.created"))


def variant(**changes: object) -> str:
    doc = json.loads(json.dumps(OLD))
    doc["fields"] = changes.get("fields", doc["fields"])
    return json.dumps(doc)


def test_catalog_covers_every_record_type() -> None:
    catalog = Catalog.for_aggregate(ORDER)
    for name in ORDER.record_types():
        assert catalog.parsed(name)


def test_optional_field_with_default_is_compatible() -> None:
    new = variant(fields=[*OLD["fields"], {"name": "channel", "type": ["null", "string"], "default": None}])
    check_backward("s", json.dumps(OLD), new)


def test_field_without_default_is_refused_naming_it() -> None:
    new = variant(fields=[*OLD["fields"], {"name": "channel", "type": "string"}])
    with pytest.raises(SchemaIncompatible, match="channel") as info:
        check_backward("s", json.dumps(OLD), new)
    assert info.value.field == "channel"


def test_type_change_is_refused_naming_it() -> None:
    new = variant(fields=[{"name": "order_id", "type": "int"}, OLD["fields"][1]])
    with pytest.raises(SchemaIncompatible, match="order_id"):
        check_backward("s", json.dumps(OLD), new)


def test_promotion_and_removal_are_compatible() -> None:
    old = {
        "type": "record",
        "name": "R",
        "fields": [{"name": "n", "type": "int"}, {"name": "x", "type": "string"}],
    }
    new = {"type": "record", "name": "R", "fields": [{"name": "n", "type": "long"}]}
    check_backward("s", json.dumps(old), json.dumps(new))


def test_union_narrowing_caught_by_fastavro_resolution() -> None:
    old = {"type": "record", "name": "R", "fields": [{"name": "n", "type": ["null", "string"]}]}
    new = {"type": "record", "name": "R", "fields": [{"name": "n", "type": ["null", "int"]}]}
    with pytest.raises(SchemaIncompatible):
        check_backward("s", json.dumps(old), json.dumps(new))
