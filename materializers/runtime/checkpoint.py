"""What a Spark streaming checkpoint says was committed: the last batch and the offsets it reached.

Spark writes `offsets/<n>` (the planned end offsets of batch n) BEFORE running the batch and
`commits/<n>` AFTER the sink (our foreachBatch, i.e. every view) finished it. So the offsets a view is
guaranteed to reflect are those of the highest n that has BOTH files. A batch planned but not
committed (a crash or a kill in between) may already be in the views too; replaying it is harmless
because every view is idempotent on positions (see job.py).

`offsets/<n>` is text: line 1 a version (`v1`), line 2 the batch metadata JSON, then one line per
source (our jobs have exactly one, the Kafka source): `{"topic": {"partition": next_offset}}`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from materializers.errors import CheckpointMismatch

Offsets = dict[str, dict[str, int]]


@dataclass(frozen=True, slots=True)
class Committed:
    """The last committed batch id (-1 = none) and the source offsets it ended at."""

    batch_id: int
    offsets: Offsets
    planned_batch_id: int  # highest offsets/<n>; > batch_id when a batch was planned but not committed


def parse_offsets(text: str) -> Offsets:
    """The Kafka source's offsets from an `offsets/<n>` file's text (pure)."""
    lines = [line for line in text.splitlines() if line.strip()]
    if len(lines) < 3 or not lines[0].startswith("v"):
        raise CheckpointMismatch(
            "a Spark offsets file has an unknown layout (expected a version line, metadata and one source "
            "line); it was not written by this Spark version's Kafka source — start from a new checkpoint"
        )
    found = json.loads(lines[2])
    return {t: {str(p): int(o) for p, o in parts.items()} for t, parts in found.items()}


def initial_offsets(text: str) -> Offsets:
    """The offsets the Kafka source started the query at, from its `sources/0/0` file's text (pure):
    a NUL byte, a version line (`v1`), then `{"topic": {"partition": offset}}`."""
    lines = [line for line in text.lstrip("\0").splitlines() if line.strip()]
    if len(lines) != 2 or not lines[0].startswith("v"):
        raise CheckpointMismatch(
            "the Kafka source's initial offsets file (sources/0/0) has an unknown layout (expected a "
            "version line and one JSON line); it was not written by this Spark version's Kafka source "
            "— start from a new checkpoint"
        )
    found = json.loads(lines[1])
    return {t: {str(p): int(o) for p, o in parts.items()} for t, parts in found.items()}


def batch_ids(directory: Path) -> list[int]:
    """The batch ids a checkpoint log directory holds (Spark also keeps .crc and temp files there)."""
    if not directory.is_dir():
        return []
    return sorted(int(p.name) for p in directory.iterdir() if p.name.isdigit())


def committed(checkpoint: Path) -> Committed:
    """Read the last committed batch and its end offsets from a checkpoint directory."""
    planned = batch_ids(checkpoint / "offsets")
    done = set(batch_ids(checkpoint / "commits")) & set(planned)
    if not done:
        return Committed(-1, {}, planned[-1] if planned else -1)
    last = max(done)
    offsets = parse_offsets((checkpoint / "offsets" / str(last)).read_text())
    return Committed(last, offsets, planned[-1])


def behind(offsets: Offsets, ends: Offsets) -> dict[str, int]:
    """{"topic[p]": records between the committed offset and the end offset}, per partition (pure)."""
    return {
        f"{topic}[{part}]": max(0, end - offsets.get(topic, {}).get(part, 0))
        for topic, parts in ends.items()
        for part, end in parts.items()
    }


def lag(offsets: Offsets, ends: Offsets) -> int:
    """Records between the committed offsets and the topics' end offsets (pure)."""
    return sum(behind(offsets, ends).values())


def records_ahead(starts: Mapping[int, int], bounds: Mapping[int, tuple[int, int]]) -> int:
    """Records from each partition's start to its end offset (pure). `bounds`: (first retained, end)
    offset per partition; `starts`: an offset, or Spark's -2 (earliest) / -1 (latest); a partition
    without one starts at earliest, as Spark starts a partition its offsets do not name."""
    total = 0
    for partition, (low, high) in bounds.items():
        start = starts.get(partition, -2)
        begin = low if start == -2 else high if start == -1 else max(start, low)
        total += max(0, high - begin)
    return total


def planned_records(checkpoint: Path, batch_id: int) -> int | None:
    """At most how many records batch `batch_id` reads: its planned end offsets minus where it began,
    known before the batch runs (Spark writes `offsets/<n>` first). The first batch begins at the
    offsets the Kafka source resolved when the query started (`sources/0/0`), a later one where the
    batch before it ended. None when unknown: a partition the batch before did not have, or files
    already cleaned up. Compaction and transaction markers make the true count lower."""
    try:
        ends = parse_offsets((checkpoint / "offsets" / str(batch_id)).read_text())
        begins = (
            initial_offsets((checkpoint / "sources" / "0" / "0").read_text())
            if batch_id == 0
            else parse_offsets((checkpoint / "offsets" / str(batch_id - 1)).read_text())
        )
    except FileNotFoundError:
        return None
    total = 0
    for topic, parts in ends.items():
        for part, end in parts.items():
            begin = begins.get(topic, {}).get(part)
            if begin is None:
                return None
            total += max(0, end - begin)
    return total
