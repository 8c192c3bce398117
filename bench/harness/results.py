"""The one result writer: every scenario's figures land in `<out>/<scenario>/latest.json` + `latest.md`.

Each record carries the run it came from: the scenario, when it began and how long it took, the git
commit (and whether the tree had uncommitted changes), the cores, the load average at the start and
at the end, Python's version and the command line. The figures themselves are the scenario's own
(`results`), unchanged. A new run replaces `latest.*`; what a change did to the numbers, before ->
after, is written by hand into `bench/results/history.md` (one history, in words and figures).

Assumption: run from a git checkout; outside one the commit is recorded as null, never guessed.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.harness.probes import load

REPO = Path(__file__).resolve().parents[2]
RESULTS = REPO / "bench" / "results"
JSON_NAME = "latest.json"
MD_NAME = "latest.md"


def commit() -> dict[str, Any]:
    """HEAD's hash and whether tracked files differ from it; nulls outside a git checkout."""
    try:
        head = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True, check=True, timeout=10
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=REPO, capture_output=True, text=True, check=True, timeout=10,
        ).stdout.strip()  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return {"commit": None, "uncommitted_changes": None}
    return {"commit": head, "uncommitted_changes": bool(dirty)}


@dataclass(frozen=True, slots=True)
class Began:
    """What is known when a scenario starts: taken before its first measurement."""

    at: str = field(default_factory=lambda: time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
    monotonic: float = field(default_factory=time.monotonic)
    load: tuple[float, float, float] = field(default_factory=load)


def run_record(scenario: str, began: Began, argv: Sequence[str]) -> dict[str, Any]:
    return {
        "scenario": scenario,
        "began_at": began.at,
        "took_s": round(time.monotonic() - began.monotonic, 1),
        **commit(),
        "cores": os.cpu_count(),
        "load_at_start": list(began.load),
        "load_at_end": list(load()),
        "python": platform.python_version(),
        "command": list(argv),
    }


def write(
    out_dir: Path,
    results: Mapping[str, Any],
    markdown: str,
    *,
    began: Began,
    argv: Sequence[str] | None = None,
) -> Path:
    """Write `latest.json` ({"run": ..., "results": ...}) and `latest.md` into `out_dir` (created);
    the scenario is the folder's name. Returns the JSON's path."""
    out_dir.mkdir(parents=True, exist_ok=True)
    run = run_record(out_dir.name, began, sys.argv if argv is None else argv)
    path = out_dir / JSON_NAME
    path.write_text(json.dumps({"run": run, "results": results}, indent=2, default=str) + "\n")
    footer = (
        f"_Run {run['began_at']} ({run['took_s']} s), commit {(run['commit'] or 'unknown')[:10]}"
        f"{' with uncommitted changes' if run['uncommitted_changes'] else ''}, {run['cores']} cores, "
        f"load {run['load_at_start'][0]} at the start, {run['load_at_end'][0]} at the end._"
    )
    (out_dir / MD_NAME).write_text(markdown.rstrip("\n") + "\n\n" + footer + "\n")
    return path


def numbers(value: Any) -> list[float]:
    """Every finite number in a JSON value (bools excluded): how a check sees that figures came out."""
    if isinstance(value, bool):
        return []
    if isinstance(value, int | float):
        return [float(value)] if value == value and abs(value) != float("inf") else []
    if isinstance(value, Mapping):
        return [n for v in value.values() for n in numbers(v)]
    if isinstance(value, list | tuple):
        return [n for v in value for n in numbers(v)]
    return []


def previous(out_dir: Path) -> dict[str, Any]:
    """The figures of the last run written into `out_dir` ({} if none): for a scenario that keeps the
    phases or sizes a run leaves out."""
    path = out_dir / JSON_NAME
    if not path.is_file():
        return {}
    found: dict[str, Any] = json.loads(path.read_text()).get("results", {})
    return found
