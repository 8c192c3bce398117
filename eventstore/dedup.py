"""The processor's dedup memory: the first outcome of each command id, for a bounded window.

A retried command id gets its first outcome back and appends nothing, but only within the window: an
outcome older than `window_ms`, or pushed out by `max_outcomes` newer ones, is forgotten, and a
command arriving with that id afterwards is decided again as a new one. Without the bound, every
command id ever seen stays in memory, including the ids of refused commands, which any sender can
make up: memory would grow with traffic forever, and a takeover would load all of it.

The window should cover how long a client keeps retrying (the client gives up after its reply timeout;
a command in the commands topic is retried at most until that topic's retention). The outcomes topic
keeps the same window (`cleanup.policy=compact,delete`, `retention.ms` = the window), so a takeover
reads at most the window's outcomes. Pure: the caller passes the time.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from eventstore.envelope import Outcome

DEFAULT_WINDOW_MS = 7 * 24 * 3600 * 1000  # the commands topic's retention
DEFAULT_MAX_OUTCOMES = 1_000_000  # a few hundred bytes each


@dataclass(slots=True)
class DedupMemory:
    """First outcomes by command id, oldest first (insertion order is decision order)."""

    window_ms: int = DEFAULT_WINDOW_MS
    max_outcomes: int = DEFAULT_MAX_OUTCOMES
    _by_id: dict[str, Outcome] = field(default_factory=dict)

    def get(self, command_id: str, now_ms: int) -> Outcome | None:
        """The first outcome of `command_id` if it is still within the window."""
        found = self._by_id.get(command_id)
        return found if found is not None and found.timestamp_ms >= now_ms - self.window_ms else None

    def remember(self, outcomes: Iterable[tuple[str, Outcome]], now_ms: int) -> None:
        """Add outcomes (in decision order) and forget what fell out of the window or the count."""
        self._by_id.update(outcomes)
        self.forget_older(now_ms)

    def forget_older(self, now_ms: int) -> None:
        oldest_kept = now_ms - self.window_ms
        by_id = self._by_id
        while by_id:
            command_id, outcome = next(iter(by_id.items()))
            if outcome.timestamp_ms >= oldest_kept and len(by_id) <= self.max_outcomes:
                return
            del by_id[command_id]

    def forget(self, matching: Callable[[Outcome], bool]) -> None:
        """Drop the outcomes `matching` says (a revoked partition's)."""
        self._by_id = {c: o for c, o in self._by_id.items() if not matching(o)}

    def __len__(self) -> int:
        return len(self._by_id)
