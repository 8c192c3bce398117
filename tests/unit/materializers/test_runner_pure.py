"""Several materializers in one driver: per-job flags and the refusal of shared state (pure)."""

from __future__ import annotations

from pathlib import Path

import pytest

from materializers.catalog import lookup
from materializers.cli import main, per_job_flags
from materializers.config import RunConfig
from materializers.errors import ConflictingJobs
from materializers.runtime.driver_loop import check_distinct
from materializers.runtime.job import JobPlan


def test_per_job_flags_take_name_value_pairs() -> None:
    given = {"topic": ["products=a", "orders=b"], "table": ["products=s.p"], "checkpoint": None}
    assert per_job_flags(["products", "orders"], given) == {
        "products": {"topic": "a", "table": "s.p"},
        "orders": {"topic": "b"},
    }
    assert per_job_flags(["products"], {"topic": ["t"]}) == {"products": {"topic": "t"}}
    with pytest.raises(ConflictingJobs, match="NAME=VALUE, NAME one of products, orders"):
        per_job_flags(["products", "orders"], {"topic": ["t"]})


def test_plans_that_would_share_state_are_refused(tmp_path: Path) -> None:
    config = RunConfig(home=tmp_path)
    products, orders = lookup("products"), lookup("orders")
    check_distinct([JobPlan.of(products, config), JobPlan.of(orders, config)])
    with pytest.raises(ConflictingJobs, match="'products' is named 2 times"):
        check_distinct([JobPlan.of(products, config), JobPlan.of(products, config)])
    shared = config.with_overrides(checkpoint=str(tmp_path / "cp"))
    with pytest.raises(ConflictingJobs, match="products and orders would share the checkpoint"):
        check_distinct([JobPlan.of(products, shared), JobPlan.of(orders, shared)])


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["start", "products", "nope"], "no materializer named 'nope'"),
        (["start", "products", "products"], "named 2 times"),
        (["start", "products", "orders", "--topic", "t"], "NAME=VALUE"),
        (
            ["start", "products", "orders", "--checkpoint", "products=/x", "--checkpoint", "orders=/x"],
            "share the checkpoint",
        ),
    ],
)
def test_bad_start_exits_2_before_anything_is_written(
    argv: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    home, shared = tmp_path / "home", tmp_path / "x"
    assert main(["--home", str(home), *[a.replace("=X", f"={shared}") for a in argv]]) == 2
    assert message in capsys.readouterr().err
    assert not home.exists() and not (tmp_path / "x").exists()
