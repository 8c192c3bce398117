"""Benchmark (not a test): how long a restarted materializer driver takes to be ready, with and without
the JVM class archive (materializers.spark_session), side by side and interleaved in one run.

A driver killed with -9 serves no view until its replacement has a SparkSession and has run its first
job; the demo's recovery line (kill -> first view update) is that plus the first batch's own work. Each
round starts a fresh Python process (as a restart does) that builds the session and runs two small
jobs, once with the archive and once with `MATERIALIZERS_JVM_CACHE=off`, alternating which goes first.
Writes bench/results/materializers-startup.{json,md}.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
PROBE = """
import json, time
t0 = time.monotonic()
from materializers import spark_session
spark = spark_session.build("local[2]", "startup-bench")
t1 = time.monotonic()
spark.range(1000).selectExpr("id % 7 as k").groupBy("k").count().collect()
t2 = time.monotonic()
spark.createDataFrame([(1, '{"a": 1}')], "k int, v string").selectExpr("from_json(v, 'a int') as j").collect()
t3 = time.monotonic()
print(json.dumps({"session_s": t1 - t0, "first_job_s": t2 - t1, "second_job_s": t3 - t2}))
spark.stop()
"""


def measure(archive: bool) -> dict[str, float]:
    env = dict(os.environ)
    if not archive:
        env["MATERIALIZERS_JVM_CACHE"] = "off"
    out = subprocess.run(
        [sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=300, check=True
    )
    found: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    found["ready_s"] = found["session_s"] + found["first_job_s"]
    return found


def summarize(runs: list[dict[str, float]]) -> dict[str, float]:
    return {k: round(statistics.median(r[k] for r in runs), 2) for k in runs[0]}


def render(result: dict[str, Any]) -> str:
    on, off = result["median"]["archive"], result["median"]["no_archive"]
    lines = [
        "# Materializer driver start-up: JVM class archive vs none",
        "",
        f"{result['rounds']} interleaved rounds, a fresh process each (medians, seconds; 2 cores, the local stack running).",
        "",
        "| step | with archive | without | ratio |",
        "|---|---:|---:|---:|",
    ]
    for key in ("session_s", "first_job_s", "second_job_s", "ready_s"):
        lines.append(f"| {key} | {on[key]} | {off[key]} | {on[key] / off[key]:.2f} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--out-dir", type=Path, default=REPO / "bench" / "results")
    args = p.parse_args(argv)
    from materializers.spark_session import warm_class_archive

    warm_class_archive()  # the archive exists before the first measured start, as after `make fetch`
    runs: dict[str, list[dict[str, float]]] = {"archive": [], "no_archive": []}
    for i in range(args.rounds):
        order = (True, False) if i % 2 == 0 else (False, True)
        for archive in order:
            runs["archive" if archive else "no_archive"].append(measure(archive))
    result = {"rounds": args.rounds, "runs": runs, "median": {k: summarize(v) for k, v in runs.items()}}
    args.out_dir.mkdir(parents=True, exist_ok=True)
    (args.out_dir / "materializers-startup.json").write_text(json.dumps(result, indent=2))
    (args.out_dir / "materializers-startup.md").write_text(render(result))
    print(render(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
