"""The migration plan (pure) and its run on the in-process registry: oldest first, same ids, repeatable."""

from __future__ import annotations

import json

from eventstore import EventStore, StoreConfig
from eventstore.migration import migrate, plan
from eventstore.registry import MemoryRegistry, Registered
from eventstore.schemas import Catalog
from eventstore.subjects import StoreSubjects
from shop import order as o

SHOP = StoreConfig(name="shop")
NAMES = StoreSubjects.build(SHOP, o.ORDER, Catalog.for_aggregate(o.ORDER))
CREATED = o.ORDER.schema_text("order.created")
NEW_CREATED = "shop.events-kafkatoolkit.order.OrderCreated"


def with_field(text: str, name: str) -> str:
    """An older version of a schema: one more field, dropped since (so the new one reads old data)."""
    doc = json.loads(text)
    doc["fields"].append({"name": name, "type": "string"})
    return json.dumps(doc)


V1 = with_field(CREATED, "channel")


def test_plan_copies_every_old_version_oldest_first() -> None:
    history = {
        "shop-order.created": (
            Registered("shop-order.created", 2, 8, CREATED),  # listed out of order on purpose
            Registered("shop-order.created", 1, 7, V1),
        )
    }
    steps = plan(NAMES, history)
    assert [(s.old_version, s.new_subject, s.schema_id, s.status) for s in steps] == [
        (1, NEW_CREATED, 7, "to copy"),
        (2, NEW_CREATED, 8, "to copy"),
    ]
    assert [s.text for s in steps] == [V1, CREATED]


def test_plan_skips_versions_already_under_the_new_subject() -> None:
    old = "shop-eventstore.outcome"
    text = Catalog.for_aggregate(o.ORDER).text("eventstore.outcome")
    history = {
        old: (Registered(old, 1, 3, text),),
        # Same schema, other key order: the same version.
        "shop.outcomes-kafkatoolkit.eventstore.Outcome": (
            Registered("x", 1, 3, json.dumps(json.loads(text), sort_keys=True)),
        ),
    }
    steps = plan(NAMES, history)
    assert [(s.new_subject, s.new_version, s.status) for s in steps] == [
        ("shop.outcomes-kafkatoolkit.eventstore.Outcome", 1, "already there"),
        ("shop.replies-kafkatoolkit.eventstore.Outcome", 0, "to copy"),
    ]


def test_plan_of_a_store_without_old_subjects_is_empty() -> None:
    assert plan(NAMES, {}) == ()


def old_store() -> tuple[MemoryRegistry, dict[str, int]]:
    """Every record type under `shop-<type>`, order.created with two versions."""
    registry = MemoryRegistry()
    ids = {"v1": registry.register("shop-order.created", V1)}
    for record_type, text in Catalog.for_aggregate(o.ORDER).texts.items():
        ids[record_type] = registry.register(f"shop-{record_type}", text)
    return registry, ids


def test_migrate_keeps_history_and_ids_and_a_second_run_changes_nothing() -> None:
    registry, ids = old_store()
    steps = migrate(registry, NAMES)
    assert {s.status for s in steps} == {"copied"}
    assert len(steps) == len(NAMES.current) + 1 + 1  # one more old version, one more outcome topic
    assert [(r.version, r.schema_id) for r in registry.versions(NEW_CREATED)] == [
        (1, ids["v1"]),
        (2, ids["order.created"]),
    ]
    for record_type, subjects in NAMES.current.items():
        for subject in subjects:
            latest = registry.latest(subject)
            assert latest is not None and latest.schema_id == ids[record_type]

    before = {s: registry.versions(s) for s in registry.subjects()}
    again = migrate(registry, NAMES)
    assert {s.status for s in again} == {"already there"}
    assert [(s.new_subject, s.new_version) for s in again] == [(s.new_subject, s.new_version) for s in steps]
    assert {s: registry.versions(s) for s in registry.subjects()} == before


def test_after_migration_the_serde_writes_with_the_old_ids() -> None:
    registry, ids = old_store()
    migrate(registry, NAMES)
    serde = EventStore(SHOP, o.ORDER, registry=registry).serde
    value = serde.encode("order.created", {"order_id": "1", "customer_id": "c"})
    assert serde.decode(value)[0] == ids["order.created"]
