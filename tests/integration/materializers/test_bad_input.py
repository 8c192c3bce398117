"""Bad input fails fast with a message naming the problem and the fix, and writes nothing."""

from __future__ import annotations

import socket
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


USER_MODULE = """
from dataclasses import replace
from shop.products import PRODUCTS
from materializers.view import DriverView

class Named(DriverView):
    def __init__(self, name):
        self._name = name
    @property
    def name(self):
        return self._name
    def columns(self):
        return ("entity",)
    def apply_table(self, batch):
        return ()
    def verify(self, truth):
        return []

class NoProtocol:
    name = "half"

NOT_A_MATERIALIZER = 42
HALF_VIEW = replace(PRODUCTS, name="half_view", views=(NoProtocol(),))
TWICE = replace(PRODUCTS, name="twice", views=(Named("mine"), Named("mine")))
SHADOWS_CACHE = replace(PRODUCTS, name="shadows", views=(lambda plan: Named("cache"),))
"""


@pytest.mark.parametrize(
    ("reference", "message"),
    [
        ("no_such_module_xyz:THING", "cannot import module 'no_such_module_xyz'"),
        ("{mod}:MISSING", "has no attribute 'MISSING'"),
        ("{mod}:NOT_A_MATERIALIZER", "is a int, not a materializers.materializer.Materializer"),
        ("{mod}:HALF_VIEW", "does not implement materializers.view.View (missing columns"),
        ("{mod}:TWICE", "more than one view named 'mine'"),
        ("{mod}:SHADOWS_CACHE", "more than one view named 'cache'"),
    ],
    ids=["no-module", "no-attr", "not-a-materializer", "not-a-view", "two-names", "factory-name-clash"],
)
def test_bad_user_materializers(
    cli_env: Path,
    topics: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    reference: str,
    message: str,
) -> None:
    """A module:attr that does not load, is no materializer, or whose views break the protocol: exit 2
    with the cause and the fix, before a Spark session or any state."""
    module = f"bad_user_mats_{tmp_path.name.replace('-', '_')}"
    (tmp_path / f"{module}.py").write_text(USER_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    topic = topics("mat-bad")
    assert main(["start", reference.format(mod=module), "--topic", topic, "--from", "earliest"]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1, err
    assert nothing_written(cli_env)


def test_views_the_materializer_does_not_have(
    cli_env: Path, topics: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    topic = topics("mat-bad")
    assert main(["start", "orders", "--topic", topic, "--views", "cache,search"]) == 2
    assert "has no view 'search'; its views: cache, warehouse" in capsys.readouterr().err
    assert nothing_written(cli_env)


def test_a_spark_master_that_does_not_answer(
    cli_env: Path, topics: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    topic = topics("mat-bad")
    with socket.socket() as closed:  # a port nobody listens on: bound, never listening
        closed.bind(("127.0.0.1", 0))
        master = f"spark://127.0.0.1:{closed.getsockname()[1]}"
        assert main(["start", "products", "--topic", topic, "--master", master, "--from", "earliest"]) == 2
    err = capsys.readouterr().err
    assert f"the Spark master {master} does not answer" in err and "SPARK_MASTER_URL" in err
    assert nothing_written(cli_env)
