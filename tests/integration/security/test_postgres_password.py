"""The local stack's password-only Postgres role (devstack.postgres_auth): the right password logs in,
a wrong or missing one is refused although every other login is trusted, and `cdc validate` with a
wrong one names the refused login without printing the password."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from cdc.connector_spec import ConnectorSpec, DatabaseSpec
from cdc.preflight import examine
from devstack.postgres_auth import ROLE

pytestmark = pytest.mark.integration

WRONG = "Pg-Wrong-Pw-7tq3"


def test_the_secured_role_logs_in_with_its_password_only(secure_pg_dsn: str) -> None:
    with psycopg.connect(secure_pg_dsn, connect_timeout=5) as conn:
        assert conn.execute("select current_user").fetchone() == (ROLE,)
    for password in (WRONG, ""):  # trust does not apply to this role: no password is refused too
        wrong = make_conninfo(secure_pg_dsn, password=password)
        with pytest.raises(
            psycopg.OperationalError,
            match=f'password authentication failed for user "{ROLE}"|no password supplied',
        ):
            psycopg.connect(wrong, connect_timeout=5).close()


def test_preflight_logs_in_as_the_secured_role(stack: Any, secure_pg_dsn: str) -> None:
    db = DatabaseSpec.from_dsn(secure_pg_dsn)
    login = {"hostname": db.hostname, "port": db.port, "user": db.user, "password": db.password}
    doc = {**_doc(), "database": {**login, "dbname": db.dbname}}
    spec = ConnectorSpec.from_mapping(doc, registry_url=stack.schema_registry_url)
    report = examine(spec, create_heartbeat_table=False)
    assert not [p for p in report.problems if p[0].startswith("database.user")], report.problems


def test_cdc_validate_with_a_wrong_password_names_the_refused_login(
    stack: Any, secure_pg_dsn: str, tmp_path: Path
) -> None:
    parts = conninfo_to_dict(secure_pg_dsn)
    database = {"hostname": parts["host"], "port": int(str(parts["port"])), "user": ROLE, "password": WRONG}
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({**_doc(), "database": {**database, "dbname": "postgres"}}))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KAFKA_", "PG_", "SCHEMA_REGISTRY_"))}
    done = subprocess.run(
        [sys.executable, "-m", "cdc.cli", "validate", str(spec), "--json", "--connect-url",
         stack.kafka_connect_url, "--bootstrap-servers", stack.kafka_bootstrap_servers],
        env=env | {"SCHEMA_REGISTRY_URL": stack.schema_registry_url}, capture_output=True, text=True,
        timeout=60,
    )  # fmt: skip
    said = done.stdout + done.stderr
    assert done.returncode != 0, said
    assert "database.user/database.password" in said and f"as '{ROLE}'" in said, said
    assert "password authentication failed" in said, said
    assert WRONG not in said


def _doc() -> dict[str, Any]:
    return {"name": "secured-login", "topic_prefix": "secured_login", "tables": ["public.cdc_heartbeat"]}
