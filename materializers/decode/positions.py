"""Source positions of view rows, and where a job starts reading (pure).

A position orders the versions of ONE entity: the Postgres LSN for CDC rows, the stream version for
event-sourced aggregates. Positions are stored as fixed-width decimal strings so that Redis (Lua,
whose numbers are doubles and lose precision above 2**53), Tantivy and Delta all compare them the same
way: as strings. LSNs are 64-bit, so the width is 20 digits.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from enum import Enum

from kafkakit.errors import BadStartPosition
from kafkakit.positions import Edge, Offsets, StartPosition, Timestamp

WIDTH = 20
MAX_POSITION = 2**64 - 1


def encode(position: int) -> str:
    """123 -> '00000000000000000123' (lexicographic order == numeric order)."""
    if not 0 <= position <= MAX_POSITION:
        raise ValueError(f"position {position} is outside 0..2**64-1")
    return str(position).zfill(WIDTH)


def decode(text: str) -> int:
    return int(text[:WIDTH])


def cdc(lsn: int, *, snapshot: bool) -> str:
    """A CDC row's position: its LSN, then 0 for a snapshot read, 1 for a streamed change.

    A snapshot read carries the slot's consistent point as its LSN, and the first change streamed
    after it can start at exactly that LSN; the suffix makes that change win.
    """
    return encode(lsn) + ("0" if snapshot else "1")


class Decision(Enum):
    APPLY = "apply"
    SKIP = "skip"  # the view already reflects this position or a newer one (replay, duplicate, late)
    GAP = "gap"  # a patch would skip versions the view has not seen: the fold would be wrong


def decide(stored: str | None, incoming: str, *, sequential: bool) -> Decision:
    """Whether a change at `incoming` may be applied over a view entry last written at `stored`.

    `sequential` is for event folds (patches): only the very next version applies. Full-row upserts
    (CDC) apply whenever they are newer. This is the same rule the Redis Lua script enforces.
    """
    if stored is not None and incoming <= stored:
        return Decision.SKIP
    if sequential and decode(incoming) != (decode(stored) if stored is not None else 0) + 1:
        return Decision.GAP
    return Decision.APPLY


def spark_range_options(bounds: Sequence[tuple[str, int, int, int]]) -> dict[str, str]:
    """Spark Kafka batch-read options for the records `low` to `high` (both included) of each
    `(topic, partition, low, high)`; every partition named once."""
    assign: dict[str, list[int]] = {}
    starting: dict[str, dict[str, int]] = {}
    ending: dict[str, dict[str, int]] = {}
    for topic, partition, low, high in bounds:
        if low < 0 or high < low or str(partition) in starting.get(topic, {}):
            raise ValueError(f"not one range of offsets of {topic}-{partition}: {low}..{high}")
        assign.setdefault(topic, []).append(partition)
        starting.setdefault(topic, {})[str(partition)] = low
        ending.setdefault(topic, {})[str(partition)] = high + 1  # Spark's ending offsets are exclusive
    return {
        "assign": json.dumps(assign, sort_keys=True),
        "startingOffsets": json.dumps(starting, sort_keys=True),
        "endingOffsets": json.dumps(ending, sort_keys=True),
    }


def spark_start_options(start: StartPosition, partitions: Mapping[str, Sequence[int]]) -> dict[str, str]:
    """Spark Kafka source options for a start position over the job's input topics.

    Spark needs every partition of every subscribed topic in a startingOffsets JSON, so partitions
    the user did not name start at earliest (-2). A bare `P:N` list (no topic) applies to every topic.
    """
    if isinstance(start, Edge):
        return {"startingOffsets": start.which}
    if isinstance(start, Timestamp):
        return {"startingTimestamp": str(start.epoch_ms)}
    assert isinstance(start, Offsets)
    named = {t for t, _, _ in start.by_partition if t is not None}
    unknown = named - set(partitions)
    if unknown:
        raise BadStartPosition(
            f"offsets name topic(s) {sorted(unknown)} that this job does not read; its topics are {sorted(partitions)}"
        )
    chosen: dict[str, dict[str, int]] = {t: {str(p): -2 for p in ps} for t, ps in partitions.items()}
    for topic, part, offset in start.by_partition:
        for t in [topic] if topic is not None else list(partitions):
            if part not in partitions[t]:
                raise BadStartPosition(f"topic {t!r} has no partition {part}; it has {sorted(partitions[t])}")
            chosen[t][str(part)] = offset
    return {"startingOffsets": json.dumps(chosen, sort_keys=True)}
