"""The history lint (`tools/lint_history.py`, run by `make lint`): the library's comments and docstrings
hold no dated or per-run figures. The real packages must give no finding; planted comments show that the
check does flag a date and a run median, and leaves a constant and a user-facing message alone."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tools import lint_history

PLANTED = '''"""A module whose docstring is clean: 5,000 records per poll, the consumer's default 500."""

LIMIT = 16 << 20  # 16 MiB per partition fetch
# The broker holds an empty fetch for fetch.max.wait.ms (500 ms by default), so we ask for 10 ms.
WAIT_MS = 10
# Measured 2026-12-07 on the bench host.
TRIGGER = "250 ms"
# A 2M-change backfill ran 27.2-33.8 s (median 29.0) with it.
POLL = 5000


def parse(text: str) -> str:
    """Parse `text`; the backfill child went 25.0 / 26.1 -> 23.5 / 24.2 s with this."""
    raise ValueError(f"timestamp {text!r} is not ISO-8601; write e.g. 2026-11-25T10:00:00Z")
'''


def test_the_packages_hold_no_measurement_history() -> None:
    roots = [lint_history.REPO / package for package in lint_history.PACKAGES]
    findings = [
        str(finding)
        for path in lint_history.python_files(roots)
        for finding in lint_history.check_source(path, path.read_text("utf-8"))
    ]
    assert not findings, "\n".join(findings)


def test_planted_figures_are_flagged_and_constants_are_not(tmp_path: Path) -> None:
    path = tmp_path / "planted.py"
    path.write_text(PLANTED)
    found = {finding.line: finding.text for finding in lint_history.check_source(path, PLANTED)}
    assert sorted(found) == [6, 8, 13], found  # the date, the run median, the docstring's arrow
    assert "2026-12-07" in found[6] and "median 29.0" in found[8] and "->" in found[13]


@pytest.mark.parametrize(
    ("sentence", "flagged"),
    [
        ("16 MiB per partition fetch", False),
        ("Kafka's 1 MB default would fail the task", False),
        ("its default 500 ms was most of a live change's wait", False),
        ("the broker holds an empty fetch for fetch.max.wait.ms, so we ask for 10 ms", False),
        ("(field, message) pairs", False),
        ("`decide(command, state) -> events`", False),
        ("measured on 2026-11-30", True),
        ("walCommit + commitOffsets 112 -> 24 ms per batch", True),
        ("p99 0.84 → 0.59 s", True),
        ("the update time fell from 17-20 s to 12-15 s per minute", True),
        ("a session took 5.8 s instead of 2.9", True),
        ("0.59 / 0.63 s in four side-by-side pairs", True),
        ("4 % of the executors' samples", True),
        ("see bench/results/cdc_formats/latest.md", True),
        ("the numbers: bench/results/history.md", False),
    ],
)
def test_what_counts_as_a_measurement(sentence: str, flagged: bool) -> None:
    assert lint_history.is_measurement(sentence) is flagged


def test_the_script_exits_1_with_its_advice_on_a_finding(tmp_path: Path) -> None:
    (tmp_path / "planted.py").write_text(PLANTED)
    script = lint_history.REPO / "tools" / "lint_history.py"
    run = subprocess.run([sys.executable, str(script), str(tmp_path)], capture_output=True, text=True)
    assert run.returncode == 1
    assert f"{tmp_path / 'planted.py'}:6: " in run.stdout
    assert "move the figure to bench/results/history.md, keep the reason in words" in run.stdout
    clean = subprocess.run([sys.executable, str(script)], capture_output=True, text=True)
    assert clean.returncode == 0, clean.stdout


def test_make_lint_runs_it() -> None:
    makefile = (lint_history.REPO / "Makefile").read_text()
    lint = makefile.split("\nlint:", 1)[1].split("\n\n", 1)[0]
    assert "tools/lint_history.py" in lint
