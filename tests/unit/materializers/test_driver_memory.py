from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from materializers.driver_memory import POOL_CHOICE

# Run in a fresh interpreter: in a process that has already run other tests, the heap's earlier holes
# and glibc's adjusted thresholds decide where the blocks land, and free() alone sometimes gave them
# back (a full `make test` once measured 214 -> 199 MiB: nothing left for the release to return).
PROBE = """
import json
from pathlib import Path
from materializers.driver_memory import release_freed_memory

def anonymous_mib():
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("RssAnon:"):
            return int(line.split()[1]) // 1024

# 64 kB blocks come from the heap, not from mmap; a small block after each (`pins`, alive until the
# end) pins the heap's top, so free() cannot shrink it: the pages stay resident.
blocks, pins = [], []
for _ in range(3000):
    blocks.append(bytearray(64_000))
    pins.append(bytearray(600))
del blocks
held = anonymous_mib()
release_freed_memory()
print(json.dumps({"held": held, "released": anonymous_mib(), "pins": len(pins)}))
"""


def test_freed_heap_memory_goes_back_to_the_os() -> None:
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, check=True).stdout
    probe = json.loads(out)
    assert probe["held"] - probe["released"] >= 150, (
        f"the ~190 MiB of freed blocks were not given back: {probe}"
    )


# A backfill batch's worth of Arrow memory (two 200 MB arrays in the default pool, every page
# written), and how much of the process's anonymous memory is in transparent huge pages then.
ARROW_PROBE = """
import json
from pathlib import Path
import pyarrow.compute as pc
from materializers.driver_memory import choose_arrow_pool

backend = choose_arrow_pool()
batch = pc.add(pc.random(25_000_000), 1.0)
assert 1.0 <= pc.min(batch).as_py() < 2.0
huge = [line for line in Path("/proc/self/smaps_rollup").read_text().splitlines() if line.startswith("AnonHugePages:")]
print(json.dumps({"backend": backend, "huge_mib": int(huge[0].split()[1]) // 1024}))
"""
THP_MODE = Path("/sys/kernel/mm/transparent_hugepage/enabled")


def _arrow_probe(**env: str) -> dict[str, Any]:
    environ = {k: v for k, v in os.environ.items() if k != POOL_CHOICE} | env
    run = subprocess.run([sys.executable, "-c", ARROW_PROBE], capture_output=True, text=True, env=environ)
    assert run.returncode == 0, run.stderr
    probe: dict[str, Any] = json.loads(run.stdout)
    return probe


def _thp_mode() -> str:
    """The kernel's THP mode (always, madvise, never), or "" where it cannot be read."""
    text = THP_MODE.read_text() if THP_MODE.exists() else ""
    return text.split("[", 1)[1].split("]", 1)[0] if "[" in text else ""


def test_arrow_batches_use_jemalloc_whose_pages_are_not_huge() -> None:
    probe = _arrow_probe()
    assert probe["backend"] == "jemalloc", probe
    if _thp_mode() == "madvise":  # huge only where asked for, and jemalloc does not ask
        assert probe["huge_mib"] == 0, probe


def test_a_pool_the_user_chose_stands() -> None:
    probe = _arrow_probe(**{POOL_CHOICE: "mimalloc"})
    assert probe["backend"] == "mimalloc", probe
    if _thp_mode() in ("madvise", "always"):  # the pool jemalloc replaces: its arenas are huge
        assert probe["huge_mib"] >= 100, probe
