"""The password-only Postgres role's pg_hba rules and password file (devstack.postgres_auth), pure."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from devstack import postgres_auth

INITDB_HBA = """# PostgreSQL Client Authentication Configuration File
# TYPE  DATABASE        USER            ADDRESS                 METHOD

# "local" is for Unix domain socket connections only
local   all             all                                     trust
host    all             all             127.0.0.1/32            trust
host    replication     all             127.0.0.1/32            trust
"""


def test_the_rules_come_before_every_trust_rule_and_are_added_once() -> None:
    hba = postgres_auth.with_rules(INITDB_HBA)
    rules = [line for line in hba.splitlines() if line.strip() and not line.startswith("#")]
    secured = [r for r in rules if postgres_auth.ROLE in r]
    assert rules[: len(secured)] == secured and len(secured) == 6
    assert all(r.split()[-1] == "scram-sha-256" for r in secured)
    assert {r.split()[0] for r in secured} == {"local", "host"}
    assert {r.split()[1] for r in secured} == {"all", "replication"}
    assert hba.startswith("# PostgreSQL Client Authentication")  # the header stays first
    assert postgres_auth.with_rules(hba) == hba
    assert INITDB_HBA.splitlines()[-3:] == hba.splitlines()[-3:]  # the trust rules kept, after


def test_the_password_is_drawn_once_owner_only_and_goes_into_the_dsn(tmp_path: Path) -> None:
    first = postgres_auth.password(tmp_path)
    assert len(first) >= 20 and postgres_auth.password(tmp_path) == first
    mode = stat.S_IMODE(postgres_auth.password_file(tmp_path).stat().st_mode)
    assert mode == 0o600
    dsn = postgres_auth.secure_dsn(5432, tmp_path)
    assert dsn == f"postgresql://{postgres_auth.ROLE}:{first}@127.0.0.1:5432/postgres"
    assert postgres_auth.password(tmp_path / "other") != first


def test_devstack_up_prints_the_secured_dsn_masked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from devstack import cli, stack

    dsn = postgres_auth.secure_dsn(55432, tmp_path)
    found = {"PG_DSN": "postgresql://postgres@127.0.0.1:55432/postgres", postgres_auth.SECURE_DSN_ENV: dsn}
    monkeypatch.setattr(stack, "up", lambda config: stack.UpResult(found, {"postgres": 0.5}, 0.5))
    monkeypatch.setenv("STACK_DIR", str(tmp_path))
    assert cli.main(["up"]) == 0
    said = capsys.readouterr()
    assert postgres_auth.password(tmp_path) not in said.out + said.err
    assert f"export PG_SECURE_DSN=postgresql://{postgres_auth.ROLE}:***@127.0.0.1:55432/postgres" in said.out
