from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from materializers.spark.memory import JEMALLOC_CONF, KEEP_FREED_PAGES, POOL_CHOICE, keep_freed_pages

# Run in a fresh interpreter: in a process that has already run other tests, the heap's earlier holes
# and glibc's adjusted thresholds decide where the blocks land, and free() alone sometimes gave them
# back (a full `make test` once measured 214 -> 199 MiB: nothing left for the release to return).
PROBE = """
import json
from pathlib import Path
from materializers.spark.memory import release_freed_memory

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
from materializers.spark.memory import choose_arrow_pool

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


# Two batches' worth of Arrow memory, one after the other, and the page faults each took: `first`
# names what the fresh interpreter imports first.
REUSE_PROBE = """
import json, os, sys
import {first}
import pyarrow.compute as pc
from materializers.spark.memory import JEMALLOC_CONF, choose_arrow_pool

def faults():
    return int(open("/proc/self/stat").read().rsplit(")", 1)[1].split()[7])

choose_arrow_pool()
taken = []
for _ in range(2):
    before = faults()
    batch = pc.add(pc.random(25_000_000), 1.0)  # two 200 MB arrays, every page written
    assert 1.0 <= pc.min(batch).as_py() < 2.0
    del batch
    taken.append(faults() - before)
print(json.dumps({{"faults": taken, "conf": os.environ.get(JEMALLOC_CONF)}}))
"""


def _reuse_probe(first: str) -> dict[str, Any]:
    environ = {k: v for k, v in os.environ.items() if k not in (POOL_CHOICE, JEMALLOC_CONF)}
    probe = REUSE_PROBE.format(first=first)
    run = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=environ)
    assert run.returncode == 0, run.stderr
    result: dict[str, Any] = json.loads(run.stdout)
    return result


def test_the_next_batch_reuses_the_pages_the_last_one_freed() -> None:
    probe = _reuse_probe("materializers")
    first, second = probe["faults"]
    assert probe["conf"] == KEEP_FREED_PAGES, probe
    assert first >= 100, probe  # ~100k pages of 4 KiB; ~200 where the kernel makes them all huge
    assert second <= first // 10, probe


def test_pyarrow_loaded_first_keeps_arrows_setting_and_the_faults() -> None:
    probe = _reuse_probe("pyarrow")
    first, second = probe["faults"]
    assert probe["conf"] is None, probe
    assert second >= first // 2, probe  # every freed page went back and was faulted in again


def test_a_jemalloc_setting_the_user_made_stands(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(sys.modules, "pyarrow", raising=False)  # as if not loaded yet: the setting decides
    monkeypatch.setenv(JEMALLOC_CONF, "dirty_decay_ms:0")
    assert keep_freed_pages() is False
    assert os.environ[JEMALLOC_CONF] == "dirty_decay_ms:0"
