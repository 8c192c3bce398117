"""Every benchmark scenario at its quick size, as `make bench QUICK=1` runs them: a subprocess
`python -m bench run --size quick --out <tmp>` on the session's stack, so the committed results in
bench/results/ are never overwritten. Each scenario must have written `<tmp>/<name>/latest.json` with
the run's record (commit, cores, load) and real numbers; a scenario that needs the cluster topology
while it is not up must be reported by name as not run (exit status 2), never passed over in silence.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bench.harness import results, runner
from bench.harness.stack import REPO, cluster_env
from bench.scenarios import SCENARIOS
from devstack.session import StackHandle

pytestmark = pytest.mark.integration
QUICK_RUN_TIMEOUT_S = 1200


def test_every_scenario_runs_at_its_quick_size(stack: StackHandle, tmp_path: Path) -> None:
    env = {**os.environ, **stack.endpoints.as_env(), "PYTHONUNBUFFERED": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "bench", "run", "--size", "quick", "--out", str(tmp_path)],
        env=env, cwd=REPO, capture_output=True, text=True, timeout=QUICK_RUN_TIMEOUT_S,
    )  # fmt: skip
    told = f"exit {done.returncode}\n{done.stdout[-6000:]}\n{done.stderr[-4000:]}"
    cluster_up = cluster_env() is not None
    assert done.returncode == (0 if cluster_up else 2), told
    for scenario in SCENARIOS:
        written = tmp_path / scenario.name / results.JSON_NAME
        if scenario.needs == "cluster" and not cluster_up:
            assert f"| {scenario.name} | {runner.NOT_RUN_CLUSTER} |" in done.stdout, told
            assert not written.exists()
            continue
        assert f"| {scenario.name} | ok |" in done.stdout, told
        record = json.loads(written.read_text())
        run = record["run"]
        assert run["scenario"] == scenario.name
        assert run["cores"] == os.cpu_count() and len(run["load_at_start"]) == 3
        assert run["commit"], f"{scenario.name}: no commit recorded"
        figures = results.numbers(record["results"])
        assert any(n > 0 for n in figures), f"{scenario.name}: no positive figure in {written}"
        assert (tmp_path / scenario.name / results.MD_NAME).read_text().strip()
