"""The dedup memory is a window: by age and by count (pure)."""

from __future__ import annotations

from eventstore.dedup import DedupMemory
from eventstore.envelope import Outcome


def _outcome(command_id: str, at_ms: int, stream: str = "s") -> Outcome:
    return Outcome(
        command_id=command_id,
        stream_id=stream,
        status="ok",
        first_version=1,
        last_version=1,
        timestamp_ms=at_ms,
    )


def test_a_retry_within_the_window_gets_the_first_outcome_and_an_older_one_is_forgotten() -> None:
    memory = DedupMemory(window_ms=1_000, max_outcomes=10)
    memory.remember([("a", _outcome("a", 0)), ("b", _outcome("b", 600))], now_ms=600)
    assert memory.get("a", now_ms=1_000) == _outcome("a", 0)
    assert memory.get("a", now_ms=1_001) is None  # past the window: decided again as a new command
    memory.remember([("c", _outcome("c", 1_700))], now_ms=1_700)
    assert len(memory) == 1 and memory.get("c", now_ms=1_700) is not None  # a and b evicted


def test_the_count_bounds_memory_whatever_ids_senders_make_up() -> None:
    memory = DedupMemory(window_ms=10**9, max_outcomes=3)
    memory.remember(((f"junk-{i}", _outcome(f"junk-{i}", i)) for i in range(1_000)), now_ms=1_000)
    assert len(memory) == 3 and memory.get("junk-999", now_ms=1_000) is not None
    assert memory.get("junk-0", now_ms=1_000) is None


def test_a_revoked_partitions_outcomes_are_dropped() -> None:
    memory = DedupMemory()
    memory.remember([("a", _outcome("a", 5, "mine")), ("b", _outcome("b", 5, "theirs"))], now_ms=5)
    memory.forget(lambda o: o.stream_id == "theirs")
    assert memory.get("a", 5) is not None and memory.get("b", 5) is None
