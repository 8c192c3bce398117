"""Keeping Python's cyclic garbage collector off the processor's cached state.

The processor holds every owned stream's state and the dedup memory in memory: a large, growing heap of
long-lived, acyclic objects. CPython's full collections scan all of it again each time the heap has grown
by a quarter, to find nothing: on the order workload that was a large share of the processor's time
per command (the numbers: bench/results/history.md).

After each committed batch the processor collects the young generations (so a cycle that has just become
garbage is still freed) and freezes the survivors: `gc.freeze()` moves them to the permanent generation,
which collections never scan. Frozen objects are still freed by reference counting when their last
reference goes (a state replaced by a newer one, a revoked partition's cache); only a reference cycle
that becomes garbage after being frozen waits for the next full collection, which runs every
`full_every_s` and on every rebalance.

The collector's generations are per process: the processor owns its process (`eventstore processor`);
an application that embeds one turns this off (`CommandProcessor(..., settle_heap=False)`).
"""

from __future__ import annotations

import gc
import time
from dataclasses import dataclass, field


@dataclass(slots=True)
class HeapSettler:
    full_every_s: float = 600.0
    enabled: bool = True
    _last_full: float = field(default_factory=time.monotonic)

    def settle(self) -> None:
        """After a committed batch: free the young cycles, freeze what survives."""
        if not self.enabled:
            return
        if time.monotonic() - self._last_full >= self.full_every_s:
            self.full()  # collects every generation and freezes too
            return
        gc.collect(1)
        gc.freeze()

    def full(self) -> None:
        """Everything scanned once more (frozen cycles that became garbage are freed), then frozen."""
        if not self.enabled:
            return
        gc.unfreeze()
        gc.collect()
        gc.freeze()
        self._last_full = time.monotonic()

    def release(self) -> None:
        """The processor stops: its process's objects are the collector's again."""
        if self.enabled:
            gc.unfreeze()
