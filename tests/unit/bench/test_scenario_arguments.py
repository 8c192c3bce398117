"""Every registered scenario's arguments parse at both sizes, without a service: the rot a new user hit
(`search_backends` died building `cdc_formats.Settings`) is caught here, not at the start of a run."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

from bench.harness import runner
from bench.scenarios import SCENARIOS, SIZES, Scenario

MODULES = [s for s in SCENARIOS if not s.micro]


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("scenario", MODULES, ids=lambda s: s.name)
def test_arguments_parse(scenario: Scenario, size: str, tmp_path: Path) -> None:
    module = importlib.import_module(scenario.module)
    module.parse(["--out", str(tmp_path), *scenario.arguments(size)])  # type: ignore[arg-type]


@pytest.mark.parametrize("scenario", [s for s in SCENARIOS if s.micro], ids=lambda s: s.name)
def test_micro_benchmarks_exist(scenario: Scenario) -> None:
    assert scenario.test_file.is_file(), f"{scenario.name}: {scenario.test_file} is missing"


def test_names_are_unique_folders() -> None:
    names = [s.name for s in SCENARIOS]
    assert len(names) == len(set(names))
    assert all(n.isidentifier() for n in names)


def test_search_backends_parses_the_reported_command() -> None:
    module = importlib.import_module("bench.scenarios.search_backends")
    settings, backends, _ = module.parse(["--rows", "200000", "--records", "400000"])
    assert (settings.rows, settings.records, settings.backfill_rounds) == (200_000, 400_000, 1)
    assert backends


def test_exit_status_names_what_did_not_run() -> None:
    ok, missing = runner.Outcome("a", "ok", 1.0), runner.Outcome("b", runner.NOT_RUN_CLUSTER, 0.0)
    failed = runner.Outcome("c", "failed: exit 1", 2.0)
    assert runner.exit_status([ok]) == 0
    assert runner.exit_status([ok, missing]) == 2
    assert runner.exit_status([ok, missing, failed]) == 1
    assert "b | not run: needs the cluster topology" in runner.summary([ok, missing], "quick")
