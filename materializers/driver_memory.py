"""The driver's memory between batches: Arrow's pool (`choose_arrow_pool`), and giving freed memory
back to the OS (`release_freed_memory`).

Every batch collects its changes into Arrow on the driver (hundreds of MB in a backfill), frees them,
and the next batch allocates as much again. Arrow's default pool in pyarrow's wheels, mimalloc 3, asks
for transparent huge pages for its arenas (its `allow_thp` option) and gives freed memory back a
second after the free, so each batch faulted its memory in again 2 MiB at a time. Where the host takes
a guest's freed pages back (a VM's balloon with free page reporting, as on our machines), such a fault
costs ~4 ms: 0.47 GB/s zeroed, against 2 GB/s for 4 KiB pages and 8 GB/s for a huge page the guest
still held. jemalloc, which Arrow also ships, does not ask for huge pages: the warehouse step of a
2M-change backfill alone took 2.8-3.1 s with it, 2.8-4.5 s with mimalloc (the most once the host had
taken the free pages back); in the bench's runs 4.3 s, 4.5-5.0 before (bench/results/history.md).

A search batch is folded in the driver's Python: a collected Arrow table, its rows as Python objects,
and a Tantivy writer whose 50 MB arena lives on threads of its own. All of it is freed after the
batch, but glibc keeps freed heap memory for reuse, per thread arena, and does not give it back on
its own: an indexing driver's anonymous memory kept growing from batch to batch; trimmed after each
batch it stays near flat, for a trim that costs a small fraction of a large batch and less after a
small one (the numbers: bench/results/history.md).
"""

from __future__ import annotations

import ctypes
import os
from contextlib import suppress

import pyarrow

# Arrow's own variable naming its default pool (jemalloc, mimalloc, system): a user's choice stands.
POOL_CHOICE = "ARROW_DEFAULT_MEMORY_POOL"


def choose_arrow_pool() -> str:
    """Make jemalloc Arrow's default pool in this process, unless `ARROW_DEFAULT_MEMORY_POOL` chose
    one or this pyarrow has no jemalloc; the default pool's backend name."""
    if not os.environ.get(POOL_CHOICE):
        with suppress(NotImplementedError):  # a build without jemalloc (Windows wheels)
            pyarrow.set_memory_pool(pyarrow.jemalloc_memory_pool())
    return str(pyarrow.default_memory_pool().backend_name)


def release_freed_memory() -> None:
    """Return freed memory of Arrow's pool and of glibc's arenas to the OS (no-op without glibc)."""
    pyarrow.default_memory_pool().release_unused()
    try:
        malloc_trim = ctypes.CDLL(None).malloc_trim
    except (AttributeError, OSError):  # musl, macOS: no malloc_trim, nothing to do
        return
    malloc_trim(0)
