"""The `eventstore` CLI against the real stack: init, execute, read, subscribe, schemas."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, ConfigResource  # type: ignore[attr-defined]
from es_helpers import cli_env, in_process_cli

from eventstore import EventStore, StoreConfig
from eventstore.cli import main
from kafkakit.clients import make_admin
from kafkakit.replication import live_brokers
from shop import order as o

pytestmark = pytest.mark.integration


def flags(config: StoreConfig) -> list[str]:
    return [
        "--name",
        config.name,
        "--bootstrap-servers",
        config.bootstrap_servers,
        "--schema-registry-url",
        config.schema_registry_url,
        "--partitions",
        str(config.partitions),
        "--aggregate",
        "shop.order:ORDER",
        "--json",
    ]


def run(capsys: Any, config: StoreConfig, *argv: str) -> tuple[int, list[Any]]:
    """Exit code and the JSON documents printed (one per line)."""
    with in_process_cli(config):
        code = main([*argv, *flags(config)])
    return code, [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.strip()]


def admin_of(config: StoreConfig) -> AdminClient:
    return make_admin({"bootstrap.servers": config.bootstrap_servers}, client_config=config.kafka_client)


def test_init_creates_topics_with_their_retention_and_registers_schemas(
    store_config: Callable[..., StoreConfig], capsys: Any
) -> None:
    config = store_config("es-cli", partitions=2)
    code, [report] = run(capsys, config, "init")
    assert code == 0
    assert report["topics"] == {
        config.events_topic: "created",
        config.commands_topic: "created",
        config.replies_topic: "created",
        config.outcomes_topic: "created",
        config.snapshots_topic: "created",
    }
    assert {s["status"] for s in report["schemas"]} == {"new"}
    assert {s["record_type"] for s in report["schemas"]} == {*o.ORDER.record_types(), "eventstore.outcome"}

    admin = admin_of(config)
    resources = [ConfigResource(ConfigResource.Type.TOPIC, t) for t in report["topics"]]
    described = {r.name: f.result(timeout=30) for r, f in admin.describe_configs(resources).items()}
    events = described[config.events_topic]
    assert (events["cleanup.policy"].value, events["retention.ms"].value) == ("delete", "-1")
    assert described[config.snapshots_topic]["cleanup.policy"].value == "compact"
    outcomes = described[config.outcomes_topic]  # the dedup window: compacted, and deleted when older
    assert (outcomes["cleanup.policy"].value, outcomes["retention.ms"].value) == (
        "compact,delete",
        str(config.dedup_window_ms),
    )
    for transient in (config.commands_topic, config.replies_topic):
        assert described[transient]["cleanup.policy"].value == "delete"
        assert described[transient]["retention.ms"].value == str(7 * 24 * 3600 * 1000)
    topics = admin.list_topics(timeout=30).topics
    assert all(len(topics[t].partitions) == 2 for t in report["topics"])

    code, [again] = run(capsys, config, "init")  # repeatable
    assert code == 0 and set(again["topics"].values()) == {"exists"}
    assert {s["status"] for s in again["schemas"]} == {"unchanged"}

    # The same store with another partition count would move streams: refused, naming the fix.
    code, [error] = run(capsys, replace(config, partitions=3), "init")
    assert code == 7 and error["error"] == "TopicSetupError"
    assert "has 2 partitions" in error["message"] and "--partitions 2" in error["message"]


def test_execute_read_and_subscribe(store: StoreConfig, start_processor: Any, capsys: Any) -> None:
    start_processor()
    create = ["execute", "--command", "order.create", "--data", '{"order_id": "1", "customer_id": "ann"}']
    code, [outcome] = run(capsys, store, *create, "--expected-version", "0", "--command-id", "cli-1")
    assert code == 0 and outcome["status"] == "ok" and outcome["last_version"] == 1
    code, [retried] = run(capsys, store, *create, "--expected-version", "0", "--command-id", "cli-1")
    assert code == 0 and retried == outcome  # a retry with the same id returns the first outcome

    line = '{"order_id": "1", "sku": "x", "quantity": 2, "unit_price_cents": 150}'
    code, [added] = run(capsys, store, "execute", "--command", "order.add_line", "--data", line)
    assert code == 0 and added["last_version"] == 2

    code, [conflict] = run(capsys, store, *create, "--expected-version", "0")
    assert code == 3 and conflict["error"] == "WrongExpectedVersion" and conflict["actual"] == 2
    assert "re-read the stream" in conflict["message"]
    code, [domain] = run(capsys, store, *create)
    assert (
        code == 4 and domain["error"] == "OrderAlreadyExists" and "pick a new order id" in domain["message"]
    )
    code, [bad] = run(capsys, store, "execute", "--command", "order.place", "--data", '{"order_id": 1}')
    assert code == 5 and bad["field"] == "order_id"

    code, events = run(capsys, store, "read", "order-1")
    assert code == 0
    assert [(e["version"], e["event_type"]) for e in events] == [
        (1, "order.created"),
        (2, "order.line_added"),
    ]
    assert events[1]["data"] == {"order_id": "1", "sku": "x", "quantity": 2, "unit_price_cents": 150}
    assert events[0]["command_id"] == "cli-1"

    code, [missing] = run(capsys, store, "read", "order-nope")
    assert code == 8 and missing["error"] == "StreamNotFound"
    assert "check the id" in missing["message"] and "order-42" in missing["message"]

    code, seen = run(capsys, store, "subscribe", "--from", "earliest", "--until-end")
    assert code == 0 and [(e["stream_id"], e["version"]) for e in seen] == [("order-1", 1), ("order-1", 2)]
    code, tail = run(capsys, store, "subscribe", "--from", "latest", "--idle-timeout", "1")
    assert code == 0 and tail == []


def test_schemas_list_check_register(store_config: Callable[..., StoreConfig], capsys: Any) -> None:
    config = store_config("es-cli")
    code, [listed] = run(capsys, config, "schemas", "list")
    assert code == 0 and {r["version"] for r in listed} == {"-"}  # nothing registered yet
    code, [checked] = run(capsys, config, "schemas", "check")
    assert code == 0 and {r["status"] for r in checked} == {"would-register"}
    code, [listed] = run(capsys, config, "schemas", "list")
    assert {r["version"] for r in listed} == {"-"}  # check registers nothing

    code, [registered] = run(capsys, config, "schemas", "register")
    assert code == 0 and {r["status"] for r in registered} == {"new"}
    code, [listed] = run(capsys, config, "schemas", "list")
    assert {r["version"] for r in listed} == {1}
    assert {r["subject"] for r in listed} == {
        s for subjects in EventStore(config, o.ORDER).serde.names.current.values() for s in subjects
    }
    assert {r["record_type"] for r in listed} == {*o.ORDER.record_types(), "eventstore.outcome"}
    code, [checked] = run(capsys, config, "schemas", "check")
    assert code == 0 and {r["status"] for r in checked} == {"unchanged"}


def test_console_script_exit_codes(store: StoreConfig) -> None:
    """The installed entry point, as a user runs it: exit code and a message naming the fix."""
    script = [sys.executable, "-m", "eventstore.cli"]
    unknown = subprocess.run(
        [*script, "execute", "--command", "order.explode", "--data", "{}"],
        env=cli_env(store),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert unknown.returncode == 2 and "unknown command type 'order.explode'" in unknown.stderr
    missing = subprocess.run(
        [*script, "read", "order-none", "--json"],
        env=cli_env(store),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert missing.returncode == 8 and json.loads(missing.stdout)["error"] == "StreamNotFound"


def test_init_refuses_a_replication_factor_beyond_the_live_brokers_and_creates_nothing(
    store_config: Callable[..., StoreConfig], capsys: Any
) -> None:
    config = store_config("es-rf", partitions=2)
    brokers = live_brokers(config.bootstrap_servers, client_config=config.kafka_client)
    with in_process_cli(config):
        code = main(["init", *flags(config), "--replication-factor", str(brokers + 1)])
    assert code != 0
    err = capsys.readouterr().err
    assert "--replication-factor" in err and f"the {brokers} broker(s) alive" in err
    topics = admin_of(config).list_topics(timeout=30).topics
    assert not [t for t in topics if t.startswith(f"{config.name}.")]
