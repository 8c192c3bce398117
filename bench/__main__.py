"""`python -m bench list` | `python -m bench run [NAME ...] [--size quick|full] [--out DIR]`.

`run` with no name runs every scenario (`make bench`; `make bench QUICK=1` is `--size quick`). Full
runs write into bench/results/<scenario>/ and add a line per scenario to bench/results/history.md;
quick runs write into bench/results/quick/ (not kept in git) unless `--out` names another folder.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from bench.harness import runner
from bench.harness.results import RESULTS
from bench.scenarios import BY_NAME, SCENARIOS, SIZES


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("list", help="every scenario, its needs and what it measures")
    run = commands.add_parser("run", help="run scenarios (all when none is named), one after the other")
    run.add_argument("names", nargs="*", metavar="NAME", choices=[[], *BY_NAME], help="scenarios to run")
    run.add_argument("--size", choices=SIZES, default="full")
    run.add_argument("--out", type=Path, help="results folder (bench/results; quick: bench/results/quick)")
    args = parser.parse_args(argv)
    if args.command == "list":
        for s in SCENARIOS:
            kind = "micro, pytest-benchmark" if s.micro else f"needs the {s.needs}"
            print(f"{s.name:<24} {s.about} ({kind})")
        return 0
    chosen = [BY_NAME[n] for n in args.names] or list(SCENARIOS)
    out = args.out or (RESULTS / "quick" if args.size == "quick" else RESULTS)
    outcomes = runner.run_all(chosen, args.size, out)
    print(runner.summary(outcomes, args.size))
    if args.size == "full" and out == RESULTS:
        runner.record_in_history(outcomes, RESULTS / "history.md")
    return runner.exit_status(outcomes)


if __name__ == "__main__":
    sys.exit(main())
