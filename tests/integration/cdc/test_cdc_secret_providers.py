"""Connector secrets through Kafka config providers, against the stack's real Connect worker.

The worker enables `config.providers=env,file` (devstack's connect_properties): a spec's
`password: {file: PATH, key: K}` reaches Connect as `${file:PATH:K}`, pre-flight resolves it to log in,
and the worker resolves it when it starts the task.

The local Postgres trusts every local login (no password is checked), so a wrong or unresolved
password would still log in: the test asserts on the placeholder Connect stores and on the resolved
value reaching pre-flight's login instead. The *user* comes from the same file through a placeholder
too: an unresolved `${file:...}` user names no role and could not log in, so rows arriving prove the
worker resolved the file.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import psycopg
import pytest
from cdc_helpers import read_topic, spec_doc, unique, write_spec

from cdc.cli import EXIT_OK, EXIT_REFUSED, main
from cdc.connect_client import ConnectClient
from cdc.connector_spec import DatabaseSpec
from devstack.kafka_security import KafkaAccess

pytestmark = pytest.mark.integration

SECRET = "file-provided-Pw-7f3a"


@pytest.fixture
def source_table(pg: psycopg.Connection[tuple[Any, ...]], tables: list[str]) -> str:
    """A captured table with two rows (dropped after the test)."""
    table = f"public.{unique('sec')}"
    tables.append(f"table:{table}")
    pg.execute(f"CREATE TABLE {table} (id int PRIMARY KEY, label text)")
    pg.execute(f"INSERT INTO {table} VALUES (1, 'a'), (2, 'b')")
    return table


def test_a_file_password_reaches_connect_as_a_placeholder_and_the_connector_runs(
    stack: Any,
    kafka: KafkaAccess,
    cli_flags: list[str],
    preflight_flags: list[str],
    source_table: str,
    connect: ConnectClient,
    tmp_path: Path,
    capsys: Any,
    monkeypatch: Any,
) -> None:
    if not stack.backend.startswith("local"):
        pytest.skip(
            f"the file provider reads files on the worker's machine; the {stack.backend} worker sees none of "
            "this test's (and its Postgres asks for its own password, not the test's)"
        )
    table = source_table
    secrets = tmp_path / "pg.properties"  # tmp_path: readable by the worker, a process of this user
    secrets.write_text(f"user={DatabaseSpec.from_dsn(stack.connect_view.pg_dsn).user}\npassword={SECRET}\n")
    name = unique("sec").replace("_", "-")
    doc = spec_doc(stack, name, [table], format="json")
    doc["database"] |= {
        "user": f"${{file:{secrets}:user}}",
        "password": {"file": str(secrets), "key": "password"},
    }
    spec_path = write_spec(tmp_path, doc)
    logins: list[dict[str, Any]] = []
    real_connect = psycopg.connect

    def spy(*args: Any, **kwargs: Any) -> Any:
        logins.append(kwargs)
        return real_connect(*args, **kwargs)

    monkeypatch.setattr(psycopg, "connect", spy)
    try:
        assert main(["apply", str(spec_path), "--json", *cli_flags, *preflight_flags]) == EXIT_OK, (
            capsys.readouterr().err
        )
        out, err = capsys.readouterr()
        assert json.loads(out)["result"] == "created"
        assert SECRET not in out + err
        preflight = next(k for k in logins if k.get("dbname") and k.get("password") is not None)
        assert preflight["password"] == SECRET and preflight["user"] == secrets.read_text().split("\n")[0][5:]

        stored = connect.config(name)
        assert stored["database.password"] == f"${{file:{secrets}:password}}"
        assert stored["database.user"] == f"${{file:{secrets}:user}}"
        assert SECRET not in json.dumps(stored)
        topic = f"{name.replace('-', '_')}.{table}"
        rows = read_topic(kafka, topic, until=lambda got: len(got) >= 2, timeout=90)
        assert len(rows) >= 2  # the worker resolved the file: the placeholder user could not log in
    finally:
        assert main(["delete", name, "--drop-slot", *cli_flags]) == EXIT_OK
    assert name not in connect.list_connectors()


@pytest.mark.parametrize(
    ("password", "expected"),
    [
        ({"env": "TOOLKIT_TEST_UNSET_PG_PASSWORD"}, "TOOLKIT_TEST_UNSET_PG_PASSWORD, which is not set here"),
        ({"file": "/nonexistent/toolkit/pg.properties", "key": "password"}, "cannot be read here"),
        ("key", "which {file} does not have"),
    ],
)
def test_an_unresolvable_placeholder_is_refused_before_connect_sees_it(
    stack: Any,
    connect: ConnectClient,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    cli_flags: list[str],
    password: Any,
    expected: str,
) -> None:
    secrets = tmp_path / "pg.properties"
    secrets.write_text(f"other={SECRET}\n")
    if password == "key":
        password = {"file": str(secrets), "key": "password"}
    monkeypatch.delenv("TOOLKIT_TEST_UNSET_PG_PASSWORD", raising=False)
    monkeypatch.setenv("COLUMNS", "400")  # Rich folds a table's cells to the terminal's width
    name = unique("sec").replace("_", "-")
    doc = spec_doc(stack, name, ["public.nothing_here"], format="json")
    doc["database"]["password"] = password
    spec_path = write_spec(tmp_path, doc)
    for command in ("apply", "validate"):
        assert main([command, str(spec_path), *cli_flags]) == EXIT_REFUSED
        out, err = capsys.readouterr()
        assert "database.password" in err and expected.format(file=secrets) in err
        assert SECRET not in out + err
    assert name not in connect.list_connectors()
