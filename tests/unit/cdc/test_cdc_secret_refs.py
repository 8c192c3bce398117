"""Connector secrets as config-provider placeholders: rendered for Connect, resolved for pre-flight."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from cdc.connector_spec import ConnectorSpec
from cdc.errors import PreflightFailed, SecretUnresolved, SpecError
from cdc.secret_refs import placeholders, reference_text, resolve_fields

SECRET = "pw-Zq81!not-in-messages"


def _spec(password: object, extra: dict[str, object] | None = None) -> ConnectorSpec:
    doc = yaml.safe_load(
        "name: orders\ndatabase: {hostname: db, user: dbz, dbname: shop}\ntopic_prefix: shop\n"
        "tables: [public.orders]\nformat: json\n"
    )
    doc["database"]["password"] = password
    if extra is not None:
        doc["extra"] = extra
    return ConnectorSpec.from_mapping(doc)


def test_references_render_as_kafka_placeholders() -> None:
    assert reference_text({"env": "PG_PASSWORD"}, "f") == "${env:PG_PASSWORD}"
    assert reference_text({"file": "/etc/cdc/pg.properties", "key": "pw"}, "f") == (
        "${file:/etc/cdc/pg.properties:pw}"
    )


def test_connect_gets_the_placeholder_and_repr_shows_no_secret() -> None:
    spec = _spec(
        {"file": "/etc/cdc/pg.properties", "key": "password"}, {"database.sslpassword": {"env": "K"}}
    )
    config = spec.to_config()
    assert config["database.password"] == "${file:/etc/cdc/pg.properties:password}"
    assert config["database.sslpassword"] == "${env:K}"
    assert _spec({"env": "PG_PASSWORD"}).to_config()["database.password"] == "${env:PG_PASSWORD}"


@pytest.mark.parametrize(
    ("reference", "message"),
    [
        ({"env": "1BAD"}, "env must name an environment variable"),
        ({"env": "A", "key": "b"}, r"keys \['env', 'key'\]"),
        ({"file": "relative/pg.properties", "key": "pw"}, "absolute path"),
        ({"file": "/a:b", "key": "pw"}, "without ':'"),
        ({"file": "/etc/pg.properties", "key": ""}, "key must name a property"),
        ({"vault": "x"}, r"\{env: NAME\} or \{file: /absolute/path, key: KEY\}"),
    ],
)
def test_malformed_references_are_refused_at_load(reference: dict[str, object], message: str) -> None:
    with pytest.raises(SpecError, match=message) as info:
        _spec(reference)
    assert "database.password" in str(info.value)


def test_a_password_of_another_type_is_refused_without_echo() -> None:
    with pytest.raises(SpecError, match=r"database.password must be str, got a int") as info:
        _spec(98765432)
    assert "98765432" not in str(info.value)


def test_resolves_env_and_file_anywhere_in_a_value(tmp_path: Path) -> None:
    props = tmp_path / "pg.properties"
    props.write_text(f"# secrets\npassword = {SECRET}\nuser: dbz\n", encoding="utf-8")
    fields = {
        "database.password": f"${{file:{props}:password}}",
        "database.user": "${env:PGUSER}-${file:" + str(props) + ":user}",
        "database.dbname": "shop",
    }
    resolved = resolve_fields(fields, environ={"PGUSER": "app"})
    assert resolved == {"database.password": SECRET, "database.user": "app-dbz", "database.dbname": "shop"}
    assert placeholders(fields["database.user"]) == ["${env:PGUSER}", f"${{file:{props}:user}}"]


def test_every_unresolvable_field_is_named_with_its_fix_and_no_secret(tmp_path: Path) -> None:
    props = tmp_path / "pg.properties"
    props.write_text(f"password={SECRET}\n")
    fields = {
        "database.password": "${env:PG_PASSWORD}",
        "database.user": f"${{file:{tmp_path}/missing.properties:user}}",
        "database.dbname": f"${{file:{props}:dbname}}",
        "database.sslpassword": "${vault:secret/pg:pw}",
        "database.hostname": "${env:A:B}",
    }
    with pytest.raises(SecretUnresolved) as info:
        resolve_fields(fields, environ={"OTHER": SECRET})
    problems = dict(info.value.problems)
    assert isinstance(info.value, PreflightFailed)  # reported like every pre-flight refusal
    assert "PG_PASSWORD, which is not set here: export PG_PASSWORD" in problems["database.password"]
    assert "missing.properties, which cannot be read here" in problems["database.user"]
    assert "`user=...`" in problems["database.user"]
    assert "names the key dbname, which" in problems["database.dbname"]
    assert (
        "'vault'" in problems["database.sslpassword"]
        and "--skip-preflight" in problems["database.sslpassword"]
    )
    assert "has a path" in problems["database.hostname"]
    assert SECRET not in str(info.value)


def test_preflight_logs_in_with_the_resolved_values(tmp_path: Path) -> None:
    props = tmp_path / "pg.properties"
    props.write_text(f"password={SECRET}\n")
    spec = _spec(
        {"file": str(props), "key": "password"},
        {"database.sslmode": "verify-full", "database.sslrootcert": "${env:CA}"},
    )
    conninfo = spec.preflight_conninfo(lambda login: resolve_fields(login, environ={"CA": "/etc/ca.pem"}))
    assert conninfo == {
        "host": "db",
        "port": 5432,
        "user": "dbz",
        "password": SECRET,
        "dbname": "shop",
        "sslmode": "verify-full",
        "sslrootcert": "/etc/ca.pem",
    }
    assert spec.preflight_conninfo()["password"] == f"${{file:{props}:password}}"  # unresolved: literal
