"""Registry subjects on the real Apicurio: `<topic>-<record full name>` for a fresh store, and the
upgrade of a store registered under the old `<store>-<record type>` subjects (refused until
`eventstore schemas migrate`, then working with the ids its old records carry)."""

from __future__ import annotations

import io
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from es_helpers import in_process_cli
from fastavro import schemaless_writer

from eventstore import EventStore, StoreConfig, SubjectsNeedMigration
from eventstore.cli import main
from eventstore.registry import Registry
from eventstore.schemas import Catalog, parse_text
from eventstore.serde import H_STREAM, H_TYPE, H_VERSION, frame
from eventstore.topics import ensure_topics, partition_for
from kafkakit.clients import make_producer
from shop import order as o

pytestmark = pytest.mark.integration

# Written out, not derived by the code under test: what a TopicRecordNameStrategy client looks up.
FULL_NAMES = {
    "commands": ("CreateOrder", "AddLine", "RemoveLine", "PlaceOrder", "CancelOrder"),
    "events": ("OrderCreated", "LineAdded", "LineRemoved", "OrderPlaced", "OrderCancelled"),
    "snapshots": ("OrderState",),
}


def expected_subjects(name: str) -> set[str]:
    order = {f"{name}.{topic}-kafkatoolkit.order.{n}" for topic, names in FULL_NAMES.items() for n in names}
    return order | {f"{name}.{topic}-kafkatoolkit.eventstore.Outcome" for topic in ("outcomes", "replies")}


def listed_subjects(config: StoreConfig) -> set[str]:
    """The store's subjects, old and new, that the registry holds: asked one by one, since Apicurio's
    /subjects listing stops at 1000 entries (apicurio.ccompat.max-subjects) on a long-lived registry."""
    registry = registry_of(config)
    return {s for s in legacy(config) | expected_subjects(config.name) if registry.latest(s) is not None}


def registry_of(config: StoreConfig) -> Registry:
    return EventStore(config, o.ORDER).registry


def forget_subjects(config: StoreConfig) -> None:
    """Keep the shared registry small: hard-delete this test store's subjects (absent ones answer 404)."""
    with httpx.Client(base_url=config.schema_registry_url, timeout=10) as http:
        for subject in legacy(config) | expected_subjects(config.name):
            http.delete(f"/subjects/{subject}")
            http.delete(f"/subjects/{subject}", params={"permanent": "true"})


def flags(config: StoreConfig) -> list[str]:
    return [
        "--name", config.name, "--bootstrap-servers", config.bootstrap_servers,
        "--schema-registry-url", config.schema_registry_url, "--partitions", str(config.partitions),
        "--aggregate", "shop.order:ORDER",
    ]  # fmt: skip


def run_json(capsys: Any, config: StoreConfig, *argv: str) -> tuple[int, Any]:
    with in_process_cli(config):
        code = main([*argv, *flags(config), "--json"])
    return code, json.loads(capsys.readouterr().out.splitlines()[-1])


def test_a_fresh_init_registers_topic_record_name_subjects(
    store_config: Callable[..., StoreConfig], capsys: Any
) -> None:
    config = store_config("es-new", partitions=2)
    try:
        code, report = run_json(capsys, config, "init")
        assert code == 0 and {s["status"] for s in report["schemas"]} == {"new"}
        assert {s["subject"] for s in report["schemas"]} == expected_subjects(config.name)
        # The registry's own listing: the new subjects, and no `<store>-<record type>` ones.
        assert listed_subjects(config) == expected_subjects(config.name)
        registry = registry_of(config)
        outcomes, replies = (
            registry.latest(f"{config.name}.{t}-kafkatoolkit.eventstore.Outcome")
            for t in ("outcomes", "replies")
        )
        assert outcomes is not None and replies is not None and outcomes.schema_id == replies.schema_id
    finally:
        forget_subjects(config)


OLD_CREATED = json.loads(o.ORDER.schema_text("order.created"))
OLD_CREATED["fields"].append({"name": "channel", "type": "string"})  # dropped since: v2 reads v1 data


@pytest.fixture
def store(store_config: Callable[..., StoreConfig]) -> Iterator[StoreConfig]:
    """A store as the toolkit left it before: schemas under `<store>-<record type>` (order.created with
    two versions) and the event `order-old` v1 written with the older version's schema id."""
    config = store_config(
        "es-old", partitions=3, snapshot_every=5, transaction_timeout_ms=10_000, reply_timeout_s=60
    )
    ensure_topics(config)  # topics only: the facade's init() would register the new subjects
    registry = registry_of(config)
    v1 = registry.register(f"{config.name}-order.created", json.dumps(OLD_CREATED))
    for record_type, text in Catalog.for_aggregate(o.ORDER).texts.items():
        registry.register(f"{config.name}-{record_type}", text)
    body = io.BytesIO()
    schemaless_writer(
        body, parse_text(json.dumps(OLD_CREATED)), {"order_id": "old", "customer_id": "c", "channel": "web"}
    )
    producer = make_producer(
        {"bootstrap.servers": config.bootstrap_servers}, client_config=config.kafka_client
    )
    producer.produce(
        config.events_topic,
        key=b"order-old",
        value=frame(v1, body.getvalue()),
        partition=partition_for("order-old", config.partitions),
        headers=[(H_TYPE, "order.created"), (H_STREAM, "order-old"), (H_VERSION, "1")],
    )
    assert producer.flush(30) == 0
    yield config
    forget_subjects(config)


def legacy(config: StoreConfig) -> set[str]:
    return {f"{config.name}-{t}" for t in Catalog.for_aggregate(o.ORDER).texts}


def test_an_old_store_is_refused_until_migrated(
    store: StoreConfig, start_processor: Any, capsys: Any, tmp_path: Path
) -> None:
    for action in (["init"], ["schemas", "register"], ["schemas", "check"]):
        code, error = run_json(capsys, store, *action)
        assert code == 7 and error["error"] == "SubjectsNeedMigration", action
        assert set(error["subjects"]) == legacy(store)
        assert f"{store.name}-order.created" in error["message"]
        assert f"eventstore schemas migrate --name {store.name}" in error["message"]

    with EventStore(store, o.ORDER).client() as client, pytest.raises(SubjectsNeedMigration):
        client.send(o.AddLine(order_id="old", sku="x", quantity=1, unit_price_cents=5))

    processor = start_processor()
    assert processor.wait(60) == 7
    assert "SubjectsNeedMigration" in (tmp_path / "processor-p0-0.log").read_text()

    assert listed_subjects(store) == legacy(store)  # nothing registered under the new names


def test_migrate_moves_an_old_store_and_it_works_after(
    store: StoreConfig, start_processor: Any, capsys: Any
) -> None:
    registry = registry_of(store)
    old_versions = [(r.version, r.schema_id) for r in registry.versions(f"{store.name}-order.created")]
    assert len(old_versions) == 2

    code, done = run_json(capsys, store, "schemas", "migrate")
    assert code == 0 and {s["status"] for s in done["steps"]} == {"copied"}
    # 12 record types under 13 subjects (the outcome has two topics), plus order.created's older version.
    assert done["copied"] == len(done["steps"]) == 14
    assert listed_subjects(store) == legacy(store) | expected_subjects(store.name)
    created = f"{store.events_topic}-kafkatoolkit.order.OrderCreated"
    assert [(r.version, r.schema_id) for r in registry.versions(created)] == old_versions  # oldest first
    history = {s: registry.versions(s) for s in expected_subjects(store.name)}

    code, again = run_json(capsys, store, "schemas", "migrate")
    assert code == 0 and again["copied"] == 0 and {s["status"] for s in again["steps"]} == {"already there"}
    assert {s: registry.versions(s) for s in expected_subjects(store.name)} == history
    with in_process_cli(store):
        assert main(["schemas", "migrate", *flags(store)]) == 0
    assert "nothing to do" in capsys.readouterr().out

    code, report = run_json(capsys, store, "init")
    assert code == 0 and {s["status"] for s in report["schemas"]} == {"unchanged"}

    start_processor()
    with EventStore(store, o.ORDER).client() as client:
        line = o.AddLine(order_id="old", sku="x", quantity=1, unit_price_cents=5)
        assert client.execute(line, expected_version=1).last_version == 2
        assert client.execute(o.CreateOrder(order_id="new", customer_id="c")).last_version == 1
        old, added = client.read_stream("order-old")
    assert old.event == o.OrderCreated(order_id="old", customer_id="c")
    assert old.schema_id == old_versions[0][1]  # written before the migration, read by its old id
    line_added = registry.latest(f"{store.events_topic}-kafkatoolkit.order.LineAdded")
    assert line_added is not None and added.schema_id == line_added.schema_id
    old_line = registry.latest(f"{store.name}-order.line_added")
    assert old_line is not None and old_line.schema_id == line_added.schema_id  # the same id as before
    # Neither init nor the processor and client added versions beside the migrated ones.
    assert {s: registry.versions(s) for s in expected_subjects(store.name)} == history
