from __future__ import annotations

from pathlib import Path

from materializers.driver_memory import release_freed_memory


def anonymous_mib() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("RssAnon:"):
            return int(line.split()[1]) // 1024
    raise AssertionError("no RssAnon in /proc/self/status")


def test_freed_heap_memory_goes_back_to_the_os() -> None:
    # 64 kB blocks come from the heap, not from mmap; a small block after each (`pins`, alive until
    # the test returns) pins the heap's top, so free() cannot shrink it: the pages stay resident.
    blocks, pins = [], []
    for _ in range(3000):
        blocks.append(bytearray(64_000))
        pins.append(bytearray(600))
    del blocks
    freed_but_held = anonymous_mib()

    release_freed_memory()

    assert freed_but_held - anonymous_mib() >= 150, "the ~190 MiB of freed blocks were not given back"
