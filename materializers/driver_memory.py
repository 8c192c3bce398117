"""Give the memory a batch freed on the driver back to the OS, so the driver's size stays flat.

A search batch is folded in the driver's Python: a collected Arrow table, its rows as Python objects,
and a Tantivy writer whose 50 MB arena lives on threads of its own. All of it is freed after the
batch, but glibc keeps freed heap memory for reuse, per thread arena, and its allocation pattern
changes from batch to batch: over a 2M-row backfill in 250k-row batches the process grew by ~170 MiB
of memory nothing held (Tantivy alone, in one process: 315 -> 486 MiB anonymous; trimmed after each
batch: 10 -> 37 MiB, the index's own growth). Trimming costs well under a millisecond.
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
