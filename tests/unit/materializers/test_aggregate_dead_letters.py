from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from materializers.aggregates.dead_letters import RefusedRecords


def test_refused_batches_owed_after_a_restart_and_after_a_missed_progress(tmp_path: Path) -> None:
    plan = SimpleNamespace(checkpoint=tmp_path)
    owed = RefusedRecords(None, plan, None)  # type: ignore[arg-type]
    assert owed.through == -1
    owed.resume(last_committed=2)  # the counts of batches 0-2 died with the last driver
    owed.saw(3, refused=0)
    owed.saw(5, refused=2)  # 4's progress was missed
    owed.saw(6, refused=0)
    assert sorted(owed.pending) == [0, 1, 2, 4, 5]
    owed.pending.clear()  # as if sent
    assert owed.send() == 0 and owed.through == 6
    assert RefusedRecords(None, plan, None).through == 6  # type: ignore[arg-type]
