"""Work that runs behind the batches that follow it, one piece at a time, in a thread of its own.

The piece that runs while later batches are written: delta-rs's compaction (it rewrites a day's
history file each time until that reaches delta-rs's 100 MB target; inline it held up every row of
its batch), Tantivy's merges after a commit (a little of every batch, much more of every seventh or
eighth). Its thread is not a daemon: an exiting driver lets it end.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field


@dataclass(slots=True)
class Background:
    """One piece of work at a time in a thread named `name`; what it raised comes back on `settle`."""

    name: str
    _pool: ThreadPoolExecutor | None = field(default=None, init=False, repr=False)
    _running: Future[None] | None = field(default=None, init=False, repr=False)

    def start(self, work: Callable[[], None]) -> None:
        """Run `work` in the background, unless the previous one is still running; raise what the
        previous one raised."""
        if self._running is not None and not self._running.done():
            return
        self.settle()
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix=self.name)
        self._running = self._pool.submit(work)

    def settle(self) -> None:
        """Wait for the running work, if any; raise what it raised."""
        running, self._running = self._running, None
        if running is not None:
            running.result()
