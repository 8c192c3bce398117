"""`make bench`: every benchmark, one after the other, on one stack; a summary in bench/results/SUMMARY.md.

Each benchmark compares ours with its named baseline side by side in its own run and writes
`bench/results/<name>.json` + `.md`. The stack is reused if one is running (`.stack/env`), else
started for the run and stopped after it. `--quick` (make bench QUICK=1) runs small sizes into
`bench/results/quick/` (not kept in git): a smoke run of the scripts, not numbers to quote. Benchmarks run one at a time: on 2 cores, two at once
would measure each other.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
QUICK = RESULTS / "quick"

MATERIALIZERS_QUICK = ("--records", "200000", "--seconds", "20", "--table-rows", "5000")
# name, script, output option + the file it names (a dir for "-dir" options), quick-size arguments,
# arguments of every run
BENCHES: tuple[tuple[str, str, str, str, tuple[str, ...], tuple[str, ...]], ...] = (
    ("cdc", "cdc_bench.py", "--out-dir", "cdc.md", ("--quick", "--rows", "100000"), ()),
    ("cdc_formats", "cdc_formats.py", "--out-dir", "cdc-formats.md", ("--quick",), ()),
    ("eventstore", "eventstore_bench.py", "--out-dir", "eventstore.md", ("--quick",), ()),
    (
        "materializers",
        "materializers_bench.py",
        "--out",
        "materializers.json",
        MATERIALIZERS_QUICK,
        (),
    ),
    (
        "materializers_noschema",
        "materializers_bench.py",
        "--out",
        "materializers-noschema.json",
        MATERIALIZERS_QUICK,
        ("--no-json-schemas",),
    ),
    (
        "materializers_restore",
        "materializers_restore.py",
        "--out",
        "materializers_restore.json",
        ("--records", "5000", "--tail", "500", "--entities", "1000"),
        (),
    ),
    (
        "aggregate",
        "aggregate_bench.py",
        "--out",
        "aggregate.json",
        ("--groups", "10000", "--minutes", "2", "--probes", "3"),
        (),
    ),
    # Needs the cluster topology running too (make up-cluster); reads both stacks' env files itself.
    ("cluster_scaling", "cluster_scaling.py", "--out-dir", "cluster-scaling.md", ("--quick",), ()),
)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="small sizes: check the scripts run")
    parser.add_argument("--only", action="append", choices=[b[0] for b in BENCHES], help="run just these")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(HERE.parent))
    from devstack.session import open_stack

    rows: list[str] = []
    failed = 0
    with open_stack() as stack:
        env = {**os.environ, **stack.endpoints.as_env()}
        for name, script, out_flag, output, quick, always in BENCHES:
            if args.only and name not in args.only:
                continue
            print(f"=== {name} ({'quick' if args.quick else 'full size'}) ===", flush=True)
            began = time.monotonic()
            where = QUICK if args.quick else RESULTS
            out = where if out_flag.endswith("-dir") else where / output
            sized = quick if args.quick else ()
            command = [sys.executable, str(HERE / script), out_flag, str(out), *always, *sized]
            code = subprocess.call(command, env=env)
            took = time.monotonic() - began
            failed += code != 0
            rows.append(
                f"| {name} | {'ok' if code == 0 else f'exit {code}'} | {took:.0f} s | [{output}]({output}) |"
            )
    where = QUICK if args.quick else RESULTS
    where.mkdir(parents=True, exist_ok=True)
    summary = [
        "# Benchmarks (`make bench`)",
        "",
        f"Run {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}, {'quick sizes' if args.quick else 'full size'}, "
        f"{os.cpu_count()} CPUs, load average at the end {os.getloadavg()[0]:.1f}.",
        "",
        "| benchmark | result | took | details |",
        "|---|---|---:|---|",
        *rows,
        "",
    ]
    (where / "SUMMARY.md").write_text("\n".join(summary))
    print("\n".join(summary))
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
