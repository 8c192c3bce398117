"""Give the memory a batch freed on the driver back to the OS, so freed memory does not pile up there.

A search batch is folded in the driver's Python: a collected Arrow table, its rows as Python objects,
and a Tantivy writer whose 50 MB arena lives on threads of its own. All of it is freed after the
batch, but glibc keeps freed heap memory for reuse, per thread arena, and does not give it back on
its own: an indexing driver's anonymous memory kept growing from batch to batch; trimmed after each
batch it stays near flat, for a trim that costs a small fraction of a large batch and less after a
small one (the numbers: bench/results/history.md).
"""

from __future__ import annotations

import ctypes

import pyarrow


def release_freed_memory() -> None:
    """Return freed memory of Arrow's pool and of glibc's arenas to the OS (no-op without glibc)."""
    pyarrow.default_memory_pool().release_unused()
    try:
        malloc_trim = ctypes.CDLL(None).malloc_trim
    except (AttributeError, OSError):  # musl, macOS: no malloc_trim, nothing to do
        return
    malloc_trim(0)
