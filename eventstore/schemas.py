"""Avro schemas: loading the package's .avsc files and checking that a new version reads old data.

Pure: no registry access here (see registry.py). Backward compatibility means a consumer using the NEW
schema can read records written with the OLD one. Two local checks run: a structural walk that names the
offending field, then fastavro's own schema resolution over generated sample records of the old schema.
"""

from __future__ import annotations

import io
import json
from collections.abc import Mapping
from dataclasses import dataclass
from importlib.resources import files
from typing import Any

from fastavro import parse_schema, schemaless_reader, schemaless_writer
from fastavro.read import SchemaResolutionError
from fastavro.utils import generate_many

from eventstore.aggregate import Aggregate
from eventstore.errors import SchemaIncompatible, SchemaNotFound

OUTCOME = "eventstore.outcome"
# Numeric promotions Avro allows when a reader's type is wider than the writer's.
PROMOTIONS = {
    ("int", "long"),
    ("int", "float"),
    ("int", "double"),
    ("long", "float"),
    ("long", "double"),
    ("float", "double"),
    ("string", "bytes"),
    ("bytes", "string"),
}
SAMPLES = 25


def store_schema_text(name: str) -> str:
    path = files("eventstore") / "schemas" / f"{name}.avsc"
    if not path.is_file():
        raise SchemaNotFound(f"the event store ships no schema {name!r}; reinstall the package")
    return path.read_text(encoding="utf-8")


@dataclass(frozen=True, slots=True)
class Catalog:
    """Every schema a store uses, by record type: the aggregate's records plus the outcome record."""

    texts: Mapping[str, str]

    @classmethod
    def for_aggregate(cls, aggregate: Aggregate[Any]) -> Catalog:
        texts = {name: aggregate.schema_text(name) for name in aggregate.record_types()}
        texts[OUTCOME] = store_schema_text(OUTCOME)
        return cls(texts)

    def text(self, record_type: str) -> str:
        try:
            return self.texts[record_type]
        except KeyError:
            raise SchemaNotFound(
                f"no schema for record type {record_type!r}; known types: {sorted(self.texts)}"
            ) from None

    def parsed(self, record_type: str) -> Any:
        return parse_text(self.text(record_type))


def parse_text(text: str) -> Any:
    return parse_schema(json.loads(text))


def canonical(text: str) -> str:
    """A stable text form, so re-registering an unchanged schema is a no-op."""
    return json.dumps(json.loads(text), separators=(",", ":"), sort_keys=True)


def check_backward(subject: str, old_text: str, new_text: str) -> None:
    """Raise SchemaIncompatible (naming the field) when `new` cannot read data written with `old`."""
    old, new = json.loads(old_text), json.loads(new_text)
    problem = _structural(old, new, path="")
    if problem is not None:
        field, reason = problem
        raise SchemaIncompatible(
            f"schema for {subject} is not backward compatible: field {field!r} {reason}; "
            "add new fields with a default, or register a new event type instead",
            subject=subject,
            field=field,
        )
    writer, reader = parse_schema(old), parse_schema(new)
    for sample in generate_many(old, SAMPLES):
        buf = io.BytesIO()
        schemaless_writer(buf, writer, sample)
        buf.seek(0)
        try:
            schemaless_reader(buf, writer, reader)
        except SchemaResolutionError as exc:
            raise SchemaIncompatible(
                f"schema for {subject} cannot read old data ({exc}); keep old fields' types and give "
                "new fields defaults",
                subject=subject,
                field=str(exc),
            ) from exc


def _type_name(schema: Any) -> str:
    if isinstance(schema, dict):
        return str(schema.get("type"))
    if isinstance(schema, list):
        return "union"
    return str(schema)


def _structural(old: Any, new: Any, path: str) -> tuple[str, str] | None:
    old_t, new_t = _type_name(old), _type_name(new)
    if "union" in (old_t, new_t):
        return None  # unions are left to fastavro's resolution over samples
    if old_t != new_t and (old_t, new_t) not in PROMOTIONS:
        return path or "<root>", f"changed type from {old_t} to {new_t}"
    if new_t == "record":
        old_fields = {f["name"]: f for f in old["fields"]}
        for field in new["fields"]:
            name = f"{path}.{field['name']}" if path else field["name"]
            aliases = [field["name"], *field.get("aliases", [])]
            match = next((old_fields[a] for a in aliases if a in old_fields), None)
            if match is None:
                if "default" not in field:
                    return name, "was added without a default"
                continue
            found = _structural(match["type"], field["type"], name)
            if found is not None:
                return found
    if new_t == "array":
        return _structural(old["items"], new["items"], f"{path}[]")
    if new_t == "enum":
        missing = set(old["symbols"]) - set(new["symbols"])
        if missing and "default" not in new:
            return path or "<root>", f"lost enum symbols {sorted(missing)} without an enum default"
    return None
