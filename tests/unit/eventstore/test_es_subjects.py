"""Subject naming (TopicRecordNameStrategy) and the refusal of stores still under the old subjects."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from eventstore import EventStore, MemoryRegistry, StoreConfig
from eventstore.errors import SchemaNotFound, SubjectsNeedMigration
from eventstore.schemas import Catalog
from eventstore.subjects import (
    StoreSubjects,
    full_name,
    record_topics,
    require_migrated,
    unmigrated,
)
from shop import order as o

SHOP = StoreConfig(name="shop")
NAMES = StoreSubjects.build(SHOP, o.ORDER, Catalog.for_aggregate(o.ORDER))
EVERY_CURRENT = {s for subjects in NAMES.current.values() for s in subjects}
EVERY_LEGACY = set(NAMES.legacy.values())
OUTCOME_RECORD = {"command_id": "c", "stream_id": "s", "status": "ok", "first_version": 0, "last_version": 0}


def record(name: str, namespace: str | None = None) -> str:
    doc = {"type": "record", "name": name, "fields": []}
    return json.dumps(doc if namespace is None else {**doc, "namespace": namespace})


def test_full_name_is_namespace_dot_name() -> None:
    assert full_name(record("OrderCreated", "kafkatoolkit.order")) == "kafkatoolkit.order.OrderCreated"
    assert full_name(record("OrderCreated")) == "OrderCreated"
    # Avro: a dotted name is already full, its namespace attribute is ignored.
    assert full_name(record("a.b.OrderCreated", "ignored.ns")) == "a.b.OrderCreated"


def test_each_record_type_is_named_after_the_topic_it_is_written_to() -> None:
    assert NAMES.of("order.created") == ("shop.events-kafkatoolkit.order.OrderCreated",)
    assert NAMES.of("order.create") == ("shop.commands-kafkatoolkit.order.CreateOrder",)
    assert NAMES.of("order.state") == ("shop.snapshots-kafkatoolkit.order.OrderState",)
    # The outcome is written to two topics: one subject per topic.
    assert NAMES.of("eventstore.outcome") == (
        "shop.outcomes-kafkatoolkit.eventstore.Outcome",
        "shop.replies-kafkatoolkit.eventstore.Outcome",
    )
    assert set(NAMES.current) == {*o.ORDER.record_types(), "eventstore.outcome"}
    assert len(EVERY_CURRENT) == len(NAMES.current) + 1
    assert NAMES.legacy["order.created"] == "shop-order.created"


def test_a_type_in_two_roles_gets_a_subject_per_topic() -> None:
    both = replace(o.ORDER, event_types=(*o.ORDER.event_types, o.OrderState))
    assert record_topics(SHOP, both)["order.state"] == ("shop.events", "shop.snapshots")


def test_an_unknown_record_type_is_named() -> None:
    with pytest.raises(SchemaNotFound, match=r"order\.exploded"):
        NAMES.of("order.exploded")


def test_a_fresh_store_needs_no_migration_and_costs_one_question_per_type() -> None:
    asked: list[str] = []

    def exists(subject: str) -> bool:
        asked.append(subject)
        return False

    assert unmigrated(NAMES, exists) == ()
    assert sorted(asked) == sorted(EVERY_LEGACY)


def test_only_old_subjects_need_migration_all_of_them_named() -> None:
    assert unmigrated(NAMES, EVERY_LEGACY.__contains__) == tuple(sorted(EVERY_LEGACY))
    with pytest.raises(SubjectsNeedMigration) as info:
        require_migrated(NAMES, EVERY_LEGACY.__contains__)
    assert info.value.subjects == tuple(sorted(EVERY_LEGACY)) and info.value.store == "shop"
    assert "shop-order.created" in str(info.value)
    assert "eventstore schemas migrate --name shop" in str(info.value)


def test_migrated_and_partly_migrated_stores() -> None:
    everything = EVERY_LEGACY | EVERY_CURRENT
    assert unmigrated(NAMES, everything.__contains__) == ()
    require_migrated(NAMES, everything.__contains__)  # no error
    # An interrupted migration: the outcome reached one of its two topics only.
    partial = everything - {"shop.replies-kafkatoolkit.eventstore.Outcome"}
    assert unmigrated(NAMES, partial.__contains__) == ("shop-eventstore.outcome",)
    # A record type added after the migration has neither subject yet: nothing to migrate.
    added = everything - {"shop-order.placed", "shop.events-kafkatoolkit.order.OrderPlaced"}
    assert unmigrated(NAMES, added.__contains__) == ()


def test_serde_registers_new_subjects_and_refuses_an_old_store() -> None:
    fresh = MemoryRegistry()
    serde = EventStore(SHOP, o.ORDER, registry=fresh).serde
    serde.encode("eventstore.outcome", OUTCOME_RECORD)
    assert set(fresh.subjects()) == set(NAMES.of("eventstore.outcome"))

    old = MemoryRegistry()
    old.register("shop-order.created", o.ORDER.schema_text("order.created"))
    with pytest.raises(SubjectsNeedMigration, match=r"shop-order\.created"):
        EventStore(SHOP, o.ORDER, registry=old).serde.encode(
            "order.created", {"order_id": "1", "customer_id": "c"}
        )
    assert old.subjects() == ("shop-order.created",)  # nothing registered under the new names
