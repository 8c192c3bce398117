from __future__ import annotations

import dataclasses

from demo.aggregates import AHEAD, BROKEN, LATE, AggregateOutcome

EXACT = AggregateOutcome(
    window_rows=26, late_pairs=LATE, late_dropped=3, refused=AHEAD + BROKEN, dead_letters=AHEAD + BROKEN,
    differences=0, verified=True, seconds=60.0,
)  # fmt: skip


def test_the_step_passes_only_when_every_count_is_what_was_injected() -> None:
    assert EXACT.as_expected
    for change in (
        {"verified": False},
        {"late_pairs": LATE - 1},  # a late record counted in, or lost
        {"late_dropped": 0},  # Spark dropped nothing: the counter is not wired
        {"late_dropped": LATE + 1},  # more dropped rows than late records
        {"refused": 1},
        {"dead_letters": 1},  # a refused record not dead-lettered
    ):
        assert not dataclasses.replace(EXACT, **change).as_expected, change
