"""The `cdc` CLI end to end: apply, status, tail, pause/resume, health, delete --drop-slot."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import psycopg
import pytest
from cdc_helpers import unique

from cdc.cli import EXIT_OK, main
from cdc.connect_client import ConnectClient
from cdc.connector_spec import DatabaseSpec

pytestmark = pytest.mark.integration


def test_cli_lifecycle(
    stack: Any,
    pg: psycopg.Connection[tuple[Any, ...]],
    tables: list[str],
    connect: ConnectClient,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    table = f"public.{unique('cli')}"
    tables.append(f"table:{table}")
    pg.execute(f"CREATE TABLE {table} (id int PRIMARY KEY, label text)")  # type: ignore[arg-type]
    pg.execute(f"INSERT INTO {table} VALUES (1, 'a'), (2, 'ü')")  # type: ignore[arg-type]
    name = unique("cli").replace("_", "-")
    db = DatabaseSpec.from_dsn(stack.pg_dsn)
    spec_path = tmp_path / "spec.yaml"
    spec_path.write_text(
        f"name: {name}\n"
        f"database: {{hostname: '{db.hostname}', port: {db.port}, user: {db.user}, dbname: {db.dbname}}}\n"
        f"topic_prefix: {name.replace('-', '_')}\n"
        f"tables: [{table}]\n"
        "heartbeat: {interval_ms: 1000}\n"
    )
    flags = ["--connect-url", stack.kafka_connect_url, "--bootstrap-servers", stack.kafka_bootstrap_servers]
    flags += ["--pg-dsn", stack.pg_dsn]
    topic = f"{name.replace('-', '_')}.{table}"
    try:
        assert main(["validate", str(spec_path), *flags]) == EXIT_OK
        assert "is valid" in capsys.readouterr().out
        assert main(["apply", str(spec_path), "--json", *flags]) == EXIT_OK
        assert json.loads(capsys.readouterr().out)["result"] == "created"
        assert main(["apply", str(spec_path), "--json", *flags]) == EXIT_OK  # idempotent update
        assert json.loads(capsys.readouterr().out)["result"] == "updated"
        connect.wait_snapshot_complete(name, timeout=60)  # the topic exists once the snapshot wrote to it

        assert (
            main(["tail", topic, "--from-beginning", "--max", "2", "--idle-timeout", "60", *flags]) == EXIT_OK
        )
        lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
        assert [(doc["op"], doc["after"]["label"]) for doc in lines] == [("READ", "a"), ("READ", "ü")]
        assert main(["tail", topic, "--offset", "0:1", "--max", "1", *flags]) == EXIT_OK
        assert json.loads(capsys.readouterr().out)["key"] == {"id": 2}

        assert main(["pause", name, *flags]) == EXIT_OK
        assert main(["resume", name, *flags]) == EXIT_OK
        connect.wait_running(name, timeout=60)
        assert main(["restart", name, "--only-failed", *flags]) == EXIT_OK
        capsys.readouterr()
        assert main(["health", name, "--json", *flags]) in (0, 3)
        report = json.loads(capsys.readouterr().out)
        (entry,) = report["connectors"]
        assert entry["slot"]["slot_name"] == f"dbz_{name.replace('-', '_')}"
        assert entry["slot"]["retained_bytes"] >= 0
        assert {e["topic"] for e in entry["topic_ends"]} >= {topic}
    finally:
        assert main(["delete", name, "--drop-slot", *flags]) == EXIT_OK
    assert name not in connect.list_connectors()
    slot = pg.execute(
        "SELECT 1 FROM pg_replication_slots WHERE slot_name = %s", (f"dbz_{name.replace('-', '_')}",)
    )
    assert slot.fetchone() is None
