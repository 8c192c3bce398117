"""The driver's memory between batches: Arrow's pool (`choose_arrow_pool`), which keeps the pages a
batch freed for the next (`keep_freed_pages`), and glibc's freed memory given back to the OS
(`release_freed_memory`).

Every batch collects its changes into Arrow on the driver (hundreds of MB in a backfill), frees them,
and the next batch allocates as much again. Arrow's default pool in pyarrow's wheels, mimalloc 3, asks
for transparent huge pages for its arenas (its `allow_thp` option) and gives freed memory back a
second after the free, so each batch faulted its memory in again 2 MiB at a time. Where the host takes
a guest's freed pages back (a VM's balloon with free page reporting, as on our machines), such a fault
is served by the host again, and a huge page is zeroed there far more slowly than a 4 KiB page or a
huge page the guest still held. jemalloc, which Arrow also ships, does not ask for huge pages, and a
backfill's warehouse step no longer slows down once the host has taken the free pages back.

jemalloc as Arrow builds it gave every freed page back at once, so each batch still faulted its few
hundred MB in afresh, a page at a time. With its muzzy decay off (`KEEP_FREED_PAGES`) a freed page is
only marked lazily free (MADV_FREE): the kernel takes it back when it needs the memory, and until
then the next batch writes into it without a fault: fewer faults, a faster backfill. jemalloc reads
its settings once, when pyarrow loads, so `materializers` sets them on import, before pyarrow is
loaded; a process that loaded pyarrow first keeps Arrow's (set JE_ARROW_MALLOC_CONF yourself there).

A search batch is folded in the driver's Python: a collected Arrow table, its rows as Python objects,
and a Tantivy writer whose 50 MB arena lives on threads of its own. All of it is freed after the
batch, but glibc keeps freed heap memory for reuse, per thread arena, and does not give it back on
its own: an indexing driver's anonymous memory kept growing from batch to batch; trimmed after each
batch it stays near flat, for a trim that costs a small fraction of a large batch and less after a
small one (the numbers for all three: bench/results/history.md).
"""

from __future__ import annotations

import ctypes
import os
import sys
from contextlib import suppress

# Arrow's own variable naming its default pool (jemalloc, mimalloc, system): a user's choice stands.
POOL_CHOICE = "ARROW_DEFAULT_MEMORY_POOL"
# The settings of the jemalloc Arrow ships, read when pyarrow loads: a user's setting stands.
JEMALLOC_CONF = "JE_ARROW_MALLOC_CONF"
# Freed pages go lazily free (MADV_FREE) and are never forced back (MADV_DONTNEED).
KEEP_FREED_PAGES = "muzzy_decay_ms:-1"


def keep_freed_pages() -> bool:
    """Set KEEP_FREED_PAGES for Arrow's jemalloc, unless JE_ARROW_MALLOC_CONF is set already or pyarrow
    is loaded (too late: its jemalloc has read its settings); whether it did. Child processes (Spark's
    Python workers) inherit it."""
    if JEMALLOC_CONF in os.environ or "pyarrow" in sys.modules:
        return False
    os.environ[JEMALLOC_CONF] = KEEP_FREED_PAGES
    return True


def choose_arrow_pool() -> str:
    """Make jemalloc Arrow's default pool in this process, unless `ARROW_DEFAULT_MEMORY_POOL` chose
    one or this pyarrow has no jemalloc; the default pool's backend name."""
    import pyarrow

    if not os.environ.get(POOL_CHOICE):
        with suppress(NotImplementedError):  # a build without jemalloc (Windows wheels)
            pyarrow.set_memory_pool(pyarrow.jemalloc_memory_pool())
    return str(pyarrow.default_memory_pool().backend_name)


def release_freed_memory() -> None:
    """Return freed memory of glibc's arenas to the OS (no-op without glibc). Arrow's pool keeps its
    freed pages, lazily free, for the next batch (`keep_freed_pages`)."""
    try:
        malloc_trim = ctypes.CDLL(None).malloc_trim
    except (AttributeError, OSError):  # musl, macOS: no malloc_trim, nothing to do
        return
    malloc_trim(0)
