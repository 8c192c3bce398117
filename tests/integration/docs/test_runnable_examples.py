"""Every runnable example in docs/examples/ run as a user would run it: a subprocess with the stack's
addresses in its environment. Each must exit 0 and print the outcome its docstring promises (versions,
refusals, rows); a script added there without expectations here fails `test_every_example_is_run`.
The two Spark ones start a driver each, one after the other (`available_now` over a few records)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from devstack.session import StackHandle

pytestmark = pytest.mark.integration
EXAMPLES = Path(__file__).resolve().parents[3] / "docs" / "examples"
# script -> lines (regular expressions) its standard output must hold, in this order
EXPECTED = {
    "cdc_capture.py": [
        r"^created: True$",
        r"^READ A: on_hand 10, price Decimal\('2\.50'\)$",
        r"^READ B: on_hand 2, price Decimal\('19\.99'\)$",
        r"^UPDATE B: on_hand 1, price Decimal\('19\.99'\)$",
        r"^DELETE A$",
    ],
    "event_store.py": [
        r"^topics: \S+\.events created, .*\.snapshots created$",
        r"^placed: version 3$",
        r"^events: 1:order\.created 2:order\.line_added 3:order\.placed$",
        r"^state: version 3, placed, total 500$",
        r"^init again: \['exists'\]$",
    ],
    "command_processor.py": [
        r"^first: 13 commands in \d+ transactions, versions 2\.\.13$",
        r"^retried line-0: version 2 \(its first outcome\)$",
        r"^stream version: 13$",
        r"^rebuild: [1-9]\d* snapshots read, \d+ events decoded$",
    ],
    "event_store_client.py": [
        r"^created: version 1$",
        r"^conflict: expected 0, stream at 1$",
        r"^refused: order\.empty$",
        r"^invalid: not sent$",
        r"^pipelined: versions \[2, 3, 4\]$",
        r"^retry of add-A: version \d$",
        r"^stream: \[1, 2, 3, 4\]$",
    ],
    "aggregate.py": [
        r"^pure: Tally\(total=4\)$",
        r"^add 4: version 1$",
        r"^add 5: version 2$",
        r"^add 3: refused, tally\.over_limit$",
        r"^total: 9$",
    ],
    "materializer_job.py": [
        r"^run returned 0$",
        r"^batches committed: [1-9]\d*$",
        r"^orders cached: 4$",
        r"^order-2: \{.*'line:A-1': '2x250'.*'status': 'placed', 'total_cents': '500'\}$",
        r"^differences from the fold of the topic: 0$",
    ],
    "view.py": [
        r"^run returned 0$",
        r"^statuses: \{'order-1': 'cancelled', 'order-2': 'placed', 'order-3': 'cancelled', "
        r"'order-4': 'placed', 'order-5': 'cancelled'\}$",
        r"^differences from the fold of the topic: 0$",
    ],
}


def test_every_example_is_run() -> None:
    scripts = {p.name for p in EXAMPLES.glob("*.py") if not p.name.startswith("_")}
    assert scripts == set(EXPECTED), "docs/examples/ and EXPECTED name different scripts"


@pytest.mark.parametrize("script", sorted(EXPECTED))
def test_example_prints_its_outcome(script: str, toolkit_stack: StackHandle) -> None:
    env = {**os.environ, **toolkit_stack.endpoints.as_env(), "PYTHONUNBUFFERED": "1"}
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / script)], env=env, capture_output=True, text=True, timeout=180
    )
    assert done.returncode == 0, f"{script} exited {done.returncode}:\n{done.stdout}\n{done.stderr[-4000:]}"
    lines = done.stdout.splitlines()
    at = 0
    for pattern in EXPECTED[script]:
        found = next((i for i in range(at, len(lines)) if re.search(pattern, lines[i])), None)
        assert found is not None, (
            f"{script} printed no line matching {pattern!r} after line {at}:\n{done.stdout}"
        )
        at = found + 1
