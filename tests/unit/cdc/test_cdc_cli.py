"""CLI behaviour that needs no services: help, usage errors, refused specs, unreachable Connect, and the
registry a spec naming none gets (Connect replaced by a recorder)."""

from __future__ import annotations

from pathlib import Path

import pytest

import cdc.cli
from cdc.cli import EXIT_OK, EXIT_REFUSED, EXIT_UNAVAILABLE, EXIT_USAGE, main
from cdc.connect_client import ValidationResult
from cdc.connector_spec import AVRO_CONVERTER

COMMANDS = ["validate", "apply", "status", "pause", "resume", "restart", "delete", "tail", "health"]


@pytest.mark.parametrize("argv", [[], *([c] for c in COMMANDS)])
def test_help_everywhere_documents_exit_codes(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main([*argv, "--help"])
    assert info.value.code == 0
    assert "exit codes:" in capsys.readouterr().out


def test_usage_error_exits_2() -> None:
    with pytest.raises(SystemExit) as info:
        main(["tail", "t", "--from-beginning", "--offset", "0:1"])
    assert info.value.code == EXIT_USAGE


def test_bad_spec_exits_1_and_names_the_key(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "s.yaml"
    path.write_text("name: x\nbogus: 1\n")
    assert main(["apply", str(path)]) == EXIT_REFUSED
    assert "bogus" in capsys.readouterr().err


def test_unreachable_connect_exits_4(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["status", "--connect-url", "http://127.0.0.1:9"]) == EXIT_UNAVAILABLE
    assert "unreachable" in capsys.readouterr().err


def test_bad_start_position_exits_1(capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        main(["tail", "t", "--timestamp", "yesterday", "--bootstrap-servers", "127.0.0.1:9"]) == EXIT_REFUSED
    )
    assert "ISO-8601" in capsys.readouterr().err


# ---- the registry of a spec that names none ------------------------------------------------------
SPEC_WITHOUT_FORMAT = (
    "name: shop\ndatabase: {hostname: db, user: u, dbname: d}\ntopic_prefix: shop\ntables: [public.t]\n"
)


class _RecordingConnect:
    """Stands in for ConnectClient: accepts every config and keeps what it was asked to validate/apply."""

    def __init__(self) -> None:
        self.validated: list[dict[str, str]] = []
        self.applied: list[str] = []

    def __enter__(self) -> _RecordingConnect:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def validate(self, config: dict[str, str]) -> ValidationResult:
        self.validated.append(config)
        return ValidationResult(connector_class="x", field_errors=(), known_options=frozenset())

    def apply(self, name: str, config: dict[str, str]) -> None:
        self.applied.append(name)


@pytest.fixture
def connect(monkeypatch: pytest.MonkeyPatch) -> _RecordingConnect:
    recorder = _RecordingConnect()
    monkeypatch.setattr(cdc.cli, "ConnectClient", lambda url, auth=None: recorder)
    monkeypatch.delenv("SCHEMA_REGISTRY_URL", raising=False)
    return recorder


@pytest.mark.parametrize(
    ("env", "flag", "converter_url"),
    [
        ("http://env:1/apis/ccompat/v7", "http://flag:2", "http://flag:2/apis/registry/v2"),
        ("http://env:1/apis/ccompat/v7", None, "http://env:1/apis/registry/v2"),
        (None, None, "http://127.0.0.1:18080/apis/registry/v2"),  # kafkakit.settings.Endpoints' default
    ],
)
def test_a_spec_naming_no_format_is_avro_with_the_registry_of_flag_then_env_then_default(
    connect: _RecordingConnect,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    env: str | None,
    flag: str | None,
    converter_url: str,
) -> None:
    if env is not None:
        monkeypatch.setenv("SCHEMA_REGISTRY_URL", env)
    path = tmp_path / "s.yaml"
    path.write_text(SPEC_WITHOUT_FORMAT)
    argv = ["validate", str(path), "--skip-preflight", *(["--registry-url", flag] if flag else [])]
    assert main(argv) == EXIT_OK
    (config,) = connect.validated
    assert config["value.converter"] == AVRO_CONVERTER
    assert config["value.converter.apicurio.registry.url"] == converter_url


def test_a_registry_url_that_is_no_url_is_refused_and_nothing_registered(
    connect: _RecordingConnect, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(SPEC_WITHOUT_FORMAT)
    argv = ["apply", str(path), "--skip-preflight", "--registry-url", "apicurio:8080"]
    assert main(argv) == 2  # bad input, refused before anything starts (kafkakit.environment)
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        "cdc: --registry-url='apicurio:8080' is not valid: expected an http:// or https:// URL, "
        "e.g. --registry-url http://127.0.0.1:18080/apis/ccompat/v7"
    ]
    assert connect.validated == [] and connect.applied == []
