"""Run scenarios one after the other on one stack, each in a process of its own, and report each outcome.

Guarantees: scenarios never run at once (on 2 cores two would measure each other); a scenario's
outcome is `ok` only when its process exited 0 *and* wrote `<out>/<name>/latest.json` during this run;
a scenario that needs the cluster topology while `.stack-cluster/env` is absent is reported by name as
`not run` with the reason, never passed over in silence. The stack is reused when one runs, else
started for the run and stopped after it (`harness.stack.services`).

Exit status: 0 every scenario ran and wrote its results; 1 one failed; 2 none failed but one or more
could not run (the cluster topology missing).
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.harness import results
from bench.harness.stack import REPO, cluster_env, services
from bench.scenarios import Scenario, Size

NOT_RUN_CLUSTER = "not run: needs the cluster topology (make up-cluster; .stack-cluster/env not found)"


@dataclass(frozen=True, slots=True)
class Outcome:
    name: str
    status: str  # "ok", "failed: ...", or "not run: ..."
    took_s: float

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def not_run(self) -> bool:
        return self.status.startswith("not run")


def exit_status(outcomes: Sequence[Outcome]) -> int:
    if any(not o.ok and not o.not_run for o in outcomes):
        return 1
    return 2 if any(o.not_run for o in outcomes) else 0


def run_all(scenarios: Sequence[Scenario], size: Size, out: Path) -> list[Outcome]:
    outcomes: list[Outcome] = []
    with services() as env:
        for scenario in scenarios:
            print(f"=== {scenario.name} ({size}) ===", flush=True)
            outcome = run_one(scenario, size, out, env)
            print(f"--- {scenario.name}: {outcome.status} ({outcome.took_s:.0f} s)", flush=True)
            outcomes.append(outcome)
    return outcomes


def run_one(scenario: Scenario, size: Size, out: Path, env: Mapping[str, str]) -> Outcome:
    if scenario.needs == "cluster" and cluster_env() is None:
        return Outcome(scenario.name, NOT_RUN_CLUSTER, 0.0)
    began = results.Began()
    where = out / scenario.name
    if scenario.micro:
        code = run_micro(scenario, size, where, env, began)
    else:
        command = [sys.executable, "-m", scenario.module, "--out", str(where), *scenario.arguments(size)]
        code = subprocess.call(command, env={**env, "PYTHONUNBUFFERED": "1"}, cwd=REPO)
    took = time.monotonic() - began.monotonic
    written = where / results.JSON_NAME
    fresh = written.is_file() and written.stat().st_mtime >= time.time() - took - 1
    if code != 0:
        return Outcome(scenario.name, f"failed: exit {code}", took)
    if not fresh:
        return Outcome(scenario.name, f"failed: no {written} written", took)
    return Outcome(scenario.name, "ok", took)


def run_micro(
    scenario: Scenario, size: Size, where: Path, env: Mapping[str, str], began: results.Began
) -> int:
    """The scenario's pytest-benchmark file under its own pytest run (never the test suite's); the
    figures pytest-benchmark measured go through the one writer."""
    with tempfile.TemporaryDirectory(prefix="bench-micro-") as tmp:
        found = Path(tmp) / "benchmark.json"
        command = [sys.executable, "-m", "pytest", str(scenario.test_file), "-q", "-p", "no:cacheprovider",
                   f"--bench-size={size}", "--benchmark-only", f"--benchmark-json={found}"]  # fmt: skip
        code = subprocess.call(command, env={**env, "PYTHONUNBUFFERED": "1"}, cwd=REPO)
        if code != 0 or not found.is_file():
            return code or 1
        figures = micro_figures(json.loads(found.read_text()))
    results.write(where, figures, micro_markdown(scenario, figures), began=began, argv=command)
    return 0


def micro_figures(raw: Mapping[str, Any]) -> dict[str, Any]:
    """pytest-benchmark's JSON, kept to each benchmark's statistics (ms) and its extra figures."""
    return {
        "machine": raw.get("machine_info", {}).get("cpu", {}).get("brand_raw"),
        "benchmarks": [
            {
                "name": b["name"],
                "group": b.get("group"),
                "rounds": b["stats"]["rounds"],
                **{
                    f"{k}_ms": round(b["stats"][k] * 1000, 2)
                    for k in ("min", "median", "mean", "max", "stddev")
                },
                "extra": b.get("extra_info", {}),
            }
            for b in raw.get("benchmarks", [])
        ],
    }


def micro_markdown(scenario: Scenario, figures: Mapping[str, Any]) -> str:
    rows = [
        f"| {b['name']} | {b['rounds']} | {b['min_ms']} | {b['median_ms']} | {b['mean_ms']} | {b['max_ms']} |"
        for b in figures["benchmarks"]
    ]
    return "\n".join([
        f"# {scenario.name}: {scenario.about}", "",
        f"pytest-benchmark, `{scenario.test_file.relative_to(REPO)}`; ms per round.", "",
        "| benchmark | rounds | min | median | mean | max |", "|---|---:|---:|---:|---:|---:|", *rows, "",
    ])  # fmt: skip


def summary(outcomes: Sequence[Outcome], size: Size) -> str:
    rows = [f"| {o.name} | {o.status} | {o.took_s:.0f} s |" for o in outcomes]
    return "\n".join(
        [f"Benchmarks, {size} size:", "", "| scenario | outcome | took |", "|---|---|---:|", *rows]
    )


def record_in_history(outcomes: Sequence[Outcome], history: Path) -> None:
    """A full run's outcomes, one line per scenario, at the end of the one history file."""
    commit = (results.commit()["commit"] or "unknown")[:10]
    at = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    heading = "## Runs of `make bench`"
    text = history.read_text() if history.is_file() else "# Measurement history\n"
    if heading not in text:
        text = (
            text.rstrip("\n")
            + f"\n\n{heading}\n\nOne line per scenario and full run (`python -m bench run`).\n"
        )
    lines = [f"- {at}, commit {commit}: {o.name} {o.status} in {o.took_s:.0f} s" for o in outcomes]
    history.write_text(text.rstrip("\n") + "\n" + "\n".join(lines) + "\n")
