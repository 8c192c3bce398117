from __future__ import annotations

from materializers.aggregates.batches import OffsetRange
from materializers.aggregates.replay import offset_options


def test_offset_options_cover_the_ranges_and_leave_other_partitions_at_the_end() -> None:
    ranges = [OffsetRange(0, 4, 6, 2, 0, 1), OffsetRange(0, 6, 9, 3, 0, 1), OffsetRange(2, 0, 1, 3, 0, 1)]
    assert offset_options([0, 1, 2], ranges) == ({"0": 4, "1": -1, "2": 0}, {"0": 9, "1": -1, "2": 1})
