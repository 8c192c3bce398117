"""The EventStore facade without services: bad input refused before anything is written, and the
wiring it hands out (the same subjects the hand-built serde registered)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from eventstore import EventStore, MemoryRegistry, StoreConfig, StoreConfigError
from eventstore.cli import main
from eventstore.schemas import Catalog
from eventstore.subjects import StoreSubjects
from kafkakit.errors import ConfigError
from shop import order as o

SHOP = StoreConfig(name="shop", bootstrap_servers="127.0.0.1:1", schema_registry_url="http://127.0.0.1:1")


def schemas_in(folder: Path, *, skip: tuple[str, ...] = (), text: dict[str, str] | None = None) -> Path:
    """A copy of the order aggregate's schema folder without `skip`, with `text` replacing files."""
    folder.mkdir(exist_ok=True)
    for name in o.ORDER.record_types():
        if name not in skip:
            (folder / f"{name}.avsc").write_text((text or {}).get(name, o.ORDER.schema_text(name)))
    return folder


def refusal(config: StoreConfig, aggregate: Any, **kw: Any) -> str:
    registry = MemoryRegistry()
    with pytest.raises(StoreConfigError) as info:
        EventStore(config, aggregate, registry=registry, **kw)
    assert registry.subjects() == ()  # nothing was registered
    return str(info.value)


def test_an_aggregate_without_event_schemas_is_refused_naming_the_files_and_the_folder(
    tmp_path: Path,
) -> None:
    folder = schemas_in(tmp_path / "schemas", skip=("order.created", "order.placed"))
    message = refusal(SHOP, replace(o.ORDER, schema_dir=folder))
    assert "no Avro schema for order.created, order.placed" in message
    assert str(folder) in message and "add a <type>.avsc file per record type" in message
    assert "nothing was written" in message


def test_an_aggregate_without_event_types_is_refused() -> None:
    message = refusal(SHOP, replace(o.ORDER, event_types=()))
    assert "declares no event_types" in message and "Aggregate(event_types=(...))" in message


def test_unreadable_and_unnamed_schemas_are_named(tmp_path: Path) -> None:
    folder = schemas_in(
        tmp_path / "schemas", text={"order.created": "{not json", "order.placed": '{"type": "string"}'}
    )
    message = refusal(SHOP, replace(o.ORDER, schema_dir=folder))
    assert "order.created.avsc is not a valid Avro schema" in message
    assert "order.placed.avsc must define a named Avro record" in message


def test_two_classes_under_one_type_string_are_refused() -> None:
    message = refusal(SHOP, replace(o.ORDER, event_types=(*o.ORDER.event_types, Twin)))
    assert "OrderCreated and Twin both declare the type 'order.created'" in message


class Twin:
    event_type = "order.created"


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("", "no schema registry URL: set SCHEMA_REGISTRY_URL"),
        ("127.0.0.1:18080", "'127.0.0.1:18080' is not an http(s) URL"),
    ],
)
def test_a_missing_or_malformed_registry_url_is_refused(url: str, expected: str) -> None:
    with pytest.raises(StoreConfigError, match="cannot work") as info:
        EventStore(replace(SHOP, schema_registry_url=url), o.ORDER)
    assert expected in str(info.value) and "http://127.0.0.1:18080/apis/ccompat/v7" in str(info.value)
    assert isinstance(info.value, ConfigError)  # a configuration error: the CLI exits 2


def test_a_given_registry_needs_no_url_but_kafka_needs_servers() -> None:
    EventStore(replace(SHOP, schema_registry_url=""), o.ORDER, registry=MemoryRegistry())
    message = refusal(replace(SHOP, bootstrap_servers=" "), o.ORDER)
    assert "no Kafka bootstrap servers: set KAFKA_BOOTSTRAP_SERVERS" in message


def test_every_problem_is_named_at_once(tmp_path: Path) -> None:
    folder = schemas_in(tmp_path / "schemas", skip=("order.state",))
    config = replace(SHOP, schema_registry_url="")
    with pytest.raises(StoreConfigError) as info:
        EventStore(config, replace(o.ORDER, schema_dir=folder))
    assert "2 problem(s)" in str(info.value)
    assert "no schema registry URL" in str(info.value) and "order.state" in str(info.value)


def test_not_an_aggregate_is_refused() -> None:
    with pytest.raises(StoreConfigError, match=r"needs an eventstore\.Aggregate, got a str"):
        EventStore(SHOP, "shop.order:ORDER")  # type: ignore[arg-type]


def test_the_cli_refuses_an_empty_registry_url_before_touching_a_service(capsys: Any) -> None:
    code = main(
        [
            "init",
            "--bootstrap-servers",
            "127.0.0.1:1",
            "--schema-registry-url",
            " ",
            "--aggregate",
            "shop.order:ORDER",
            "--json",
        ]
    )
    doc = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert code == 2 and doc["error"] == "StoreConfigError"
    assert "set SCHEMA_REGISTRY_URL" in doc["message"]


def test_register_schemas_registers_the_subjects_of_the_store() -> None:
    registry = MemoryRegistry()
    store = EventStore(SHOP, o.ORDER, registry=registry)
    assert {r.status for r in store.register_schemas(dry_run=True)} == {"would-register"}
    assert registry.subjects() == ()
    reports = store.register_schemas()
    names = StoreSubjects.build(SHOP, o.ORDER, Catalog.for_aggregate(o.ORDER))
    expected = {s for subjects in names.current.values() for s in subjects}
    assert {r.subject for r in reports} == set(registry.subjects()) == expected
    assert {r.status for r in store.register_schemas()} == {"unchanged"}


def test_replication_is_the_clusters_unless_named() -> None:
    from eventstore.errors import EventStoreError

    assert (
        StoreConfig().replication_factor is None
        and "EVENTSTORE_REPLICATION_FACTOR" not in StoreConfig().as_env()
    )
    named = StoreConfig.from_env({"EVENTSTORE_REPLICATION_FACTOR": "3"})
    assert named.replication_factor == 3 and StoreConfig.from_env(named.as_env()) == named
    with pytest.raises(EventStoreError, match="replication_factor must be >= 1"):
        StoreConfig(replication_factor=0)
