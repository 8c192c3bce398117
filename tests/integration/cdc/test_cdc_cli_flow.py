"""The `cdc` CLI end to end: apply, status, tail, pause/resume, health, delete --drop-slot; and a spec
naming no format nor registry, registered as Avro with the registry from SCHEMA_REGISTRY_URL."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import psycopg
import pytest
from cdc_helpers import decode_all, read_topic, spec_doc, unique, write_spec
from cdc_torture import mismatches, torture_table

from cdc.cli import EXIT_OK, main
from cdc.connect_client import ConnectClient
from cdc.connector_spec import AVRO_CONVERTER, RegistrySpec
from cdc.registry_client import RegistryClient
from cdc.render import event_json
from devstack.kafka_security import KafkaAccess

pytestmark = pytest.mark.integration


def test_cli_lifecycle(
    stack: Any,
    pg: psycopg.Connection[tuple[Any, ...]],
    tables: list[str],
    connect: ConnectClient,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    cli_flags: list[str],
    preflight_flags: list[str],
) -> None:
    """Every Kafka client of the CLI (apply's broker count, tail, health's topic ends) goes through
    the stack's SASL_SSL listener where it has one (tests/conftest.py), configured as a user would."""
    table = f"public.{unique('cli')}"
    tables.append(f"table:{table}")
    pg.execute(f"CREATE TABLE {table} (id int PRIMARY KEY, label text)")  # type: ignore[arg-type]
    pg.execute(f"INSERT INTO {table} VALUES (1, 'a'), (2, 'ü')")  # type: ignore[arg-type]
    name = unique("cli").replace("_", "-")
    # Avro (the default format), with the registry as the Connect worker reaches it; `tail` reads it here.
    in_spec = {"url": stack.connect_view.schema_registry_url}
    registry = ["--registry-url", stack.schema_registry_url]
    spec_path = write_spec(tmp_path, spec_doc(stack, name, [table], registry=in_spec))
    topic = f"{name.replace('-', '_')}.{table}"
    try:
        assert main(["validate", str(spec_path), *cli_flags, *preflight_flags]) == EXIT_OK
        assert "is valid" in capsys.readouterr().out
        assert main(["apply", str(spec_path), "--json", *cli_flags, *preflight_flags]) == EXIT_OK
        assert json.loads(capsys.readouterr().out)["result"] == "created"
        assert (
            main(["apply", str(spec_path), "--json", *cli_flags, *preflight_flags]) == EXIT_OK
        )  # idempotent update
        assert json.loads(capsys.readouterr().out)["result"] == "updated"
        connect.wait_snapshot_complete(name, timeout=60)  # the topic exists once the snapshot wrote to it

        assert (
            main(
                [
                    "tail",
                    topic,
                    "--from-beginning",
                    "--max",
                    "2",
                    "--idle-timeout",
                    "60",
                    *cli_flags,
                    *registry,
                ]
            )
            == EXIT_OK
        )
        lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
        assert [(doc["op"], doc["after"]["label"]) for doc in lines] == [("READ", "a"), ("READ", "ü")]
        assert main(["tail", topic, "--offset", "0:1", "--max", "1", *cli_flags, *registry]) == EXIT_OK
        assert json.loads(capsys.readouterr().out)["key"] == {"id": 2}

        assert main(["pause", name, *cli_flags]) == EXIT_OK
        assert main(["resume", name, *cli_flags]) == EXIT_OK
        connect.wait_running(name, timeout=60)
        assert main(["restart", name, "--only-failed", *cli_flags]) == EXIT_OK
        capsys.readouterr()
        assert main(["health", name, "--json", *cli_flags]) in (0, 3)
        report = json.loads(capsys.readouterr().out)
        (entry,) = report["connectors"]
        assert entry["slot"]["slot_name"] == f"dbz_{name.replace('-', '_')}"
        assert entry["slot"]["retained_bytes"] >= 0
        assert {e["topic"] for e in entry["topic_ends"]} >= {topic}
    finally:
        assert main(["delete", name, "--drop-slot", *cli_flags]) == EXIT_OK
    assert name not in connect.list_connectors()
    slot = pg.execute(
        "SELECT 1 FROM pg_replication_slots WHERE slot_name = %s", (f"dbz_{name.replace('-', '_')}",)
    )
    assert slot.fetchone() is None


def test_a_spec_naming_no_format_is_registered_as_avro_with_the_registry_from_the_environment(
    stack: Any,
    pg: psycopg.Connection[tuple[Any, ...]],
    tables: list[str],
    connect: ConnectClient,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    kafka: KafkaAccess,
    cli_flags: list[str],
    preflight_flags: list[str],
) -> None:
    """No `format`, no `registry`: `cdc apply` registers Avro with SCHEMA_REGISTRY_URL (Connect's view of
    the registry: the converter registers the schemas), every key and value is Confluent-framed with no
    Debezium context headers, and `cdc tail` prints the torture table's values exactly as psycopg
    reads them."""
    table, expected = torture_table(pg, tables)
    name = unique("cliavro").replace("_", "-")
    spec_path = write_spec(tmp_path, spec_doc(stack, name, [table]))
    monkeypatch.setenv("SCHEMA_REGISTRY_URL", stack.connect_view.schema_registry_url)
    try:
        assert main(["apply", str(spec_path), "--json", *cli_flags, *preflight_flags]) == EXIT_OK
        assert json.loads(capsys.readouterr().out)["state"] == "RUNNING"
        config = connect.config(name)
        assert config["value.converter"] == AVRO_CONVERTER
        registry_api = RegistrySpec(url=stack.connect_view.schema_registry_url).v2_api_url
        assert config["value.converter.apicurio.registry.url"] == registry_api
        topic = f"{name.replace('-', '_')}.{table}"
        records = read_topic(kafka, topic, until=lambda rs: len(rs) >= 4)
        # Confluent framing: magic byte 0, then the 4-byte id of the writer schema, for keys and values.
        assert [(r.key[:1], r.value[:1]) for r in records if r.key and r.value] == [(b"\0", b"\0")] * 4
        # Debezium's context headers are off (`extended.headers.enabled`): the records carry none.
        assert config["extended.headers.enabled"] == "false"
        assert [r.headers for r in records] == [()] * len(records)
        with RegistryClient(stack.schema_registry_url) as registry:
            items = decode_all(records, registry)
        assert mismatches(expected, items) == []

        tail = ["tail", topic, "--from-beginning", "--max", "4", "--idle-timeout", "60", "--json", *cli_flags]
        assert main([*tail, "--registry-url", stack.schema_registry_url]) == EXIT_OK
        printed = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
        assert printed == [event_json(i) for i in items]  # the same exact values, as JSON
    finally:
        assert main(["delete", name, "--drop-slot", *cli_flags]) == EXIT_OK
