"""Bad input fails fast with a message naming the problem and the fix, and writes nothing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from materializers.cli import main

pytestmark = pytest.mark.integration


def nothing_written(home: Path) -> bool:
    return not any(p.is_file() for p in home.rglob("*")) if home.exists() else True


def test_unknown_materializer(cli_env: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["start", "prodcuts"]) == 2
    err = capsys.readouterr().err
    assert "no materializer named 'prodcuts'" in err and "orders, products" in err
    assert nothing_written(cli_env)


def test_bad_offsets(cli_env: Path, topics: Any, capsys: pytest.CaptureFixture[str]) -> None:
    topic = topics("mat-bad")
    assert main(["start", "products", "--topic", topic, "--from", '{"x": {"0": 1']) == 2
    assert "offsets JSON is malformed" in capsys.readouterr().err
    assert main(["start", "products", "--topic", topic, "--from", '{"other": {"0": 1}}']) == 2
    assert "does not read" in capsys.readouterr().err
    assert main(["start", "products", "--topic", "mat-no-such-topic", "--from", "earliest"]) == 2
    assert "input topic 'mat-no-such-topic' does not exist" in capsys.readouterr().err
    assert nothing_written(cli_env)


def test_checkpoint_of_another_query(
    cli_env: Path, topics: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    topic = topics("mat-bad")
    foreign = tmp_path / "foreign"
    (foreign / "offsets").mkdir(parents=True)
    (foreign / "metadata").write_text('{"id": "some-other-query"}')
    assert (
        main(["start", "products", "--topic", topic, "--checkpoint", str(foreign), "--from", "earliest"]) == 2
    )
    assert "written by a different query" in capsys.readouterr().err
    (foreign / "job.json").write_text('{"materializer": "orders", "topic": "t", "app_id": "x"}')
    assert (
        main(["start", "products", "--topic", topic, "--checkpoint", str(foreign), "--from", "earliest"]) == 2
    )
    assert "belongs to materializer 'orders'" in capsys.readouterr().err
    assert nothing_written(cli_env)


def test_missing_redis(
    cli_env: Path, topics: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    topic = topics("mat-bad")
    monkeypatch.setenv("REDIS_URL", "redis://127.0.0.1:1/0")
    assert main(["start", "products", "--topic", topic, "--from", "earliest"]) == 2
    err = capsys.readouterr().err
    assert "Redis at redis://127.0.0.1:1/0 does not answer" in err and "REDIS_URL" in err
    assert nothing_written(cli_env)
