"""CLI behaviour that needs no services: help, usage errors, refused specs, unreachable Connect."""

from __future__ import annotations

from pathlib import Path

import pytest

from cdc.cli import EXIT_REFUSED, EXIT_UNAVAILABLE, EXIT_USAGE, main

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
