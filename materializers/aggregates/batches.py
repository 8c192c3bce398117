"""The aggregate job's batch log: which source records each micro-batch read, and by which watermark
and clock it judged them, kept so `aggregate_verify` can decide, record by record, what Spark decided.

Why a log of our own: Spark's offset log (`offsets/<n>`: the batch's end offsets, `batchWatermarkMs`,
`batchTimestampMs`) holds exactly this, but Spark deletes all but the last
`spark.sql.streaming.minBatchesToRetain` (100) batches, so a verify after a day could not place an
old record in its batch. `batches.jsonl` (beside job.json in the checkpoint) keeps one line per
batch, about 150 bytes: `{"batch": n, "ends": {"topic": {"partition": next offset}},
"late_watermark_ms": w, "timestamp_ms": t}`, appended by foreachBatch before the batch's MERGE, so
every committed batch has its line (a batch run again appends it again; the last line of an id wins).

What the fields decide (Spark 4.2): a record of batch n is late for a window when the window ends at
or before the watermark Spark filters late input by in batch n, the eviction watermark of batch n-1
(`batchWatermarkMs` of `offsets/<n-1>`; 0 for the first batch); it is refused as too far ahead when
its event time is past `timestamp_ms` (the batch's `current_timestamp()`) plus `max_ahead`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from materializers.errors import CheckpointMismatch
from materializers.runtime.checkpoint import Offsets, parse_offsets

LOG_FILE = "batches.jsonl"


@dataclass(frozen=True, slots=True)
class BatchRecord:
    batch: int
    ends: Offsets  # the batch's end offsets (exclusive), per topic and partition
    late_watermark_ms: int
    timestamp_ms: int


@dataclass(frozen=True, slots=True)
class OffsetRange:
    """Records [begin, end) of one partition, read by one batch."""

    partition: int
    begin: int
    end: int
    batch: int
    late_watermark_ms: int
    timestamp_ms: int


def _metadata(checkpoint: Path, batch: int) -> dict[str, int]:
    lines = [line for line in (checkpoint / "offsets" / str(batch)).read_text().splitlines() if line.strip()]
    found = json.loads(lines[1])
    return {"watermark": int(found.get("batchWatermarkMs", 0)), "timestamp": int(found["batchTimestampMs"])}


def record_of(checkpoint: Path, batch: int) -> BatchRecord:
    """Batch `batch` as Spark's offset log describes it (read while the batch runs: its file and the
    previous one's are there)."""
    ends = parse_offsets((checkpoint / "offsets" / str(batch)).read_text())
    previous = _metadata(checkpoint, batch - 1)["watermark"] if batch > 0 else 0
    return BatchRecord(batch, ends, previous, _metadata(checkpoint, batch)["timestamp"])


def append(checkpoint: Path, record: BatchRecord) -> None:
    line = {
        "batch": record.batch,
        "ends": record.ends,
        "late_watermark_ms": record.late_watermark_ms,
        "timestamp_ms": record.timestamp_ms,
    }
    with (checkpoint / LOG_FILE).open("a", encoding="utf-8") as out:
        out.write(json.dumps(line, sort_keys=True) + "\n")


def read(checkpoint: Path) -> list[BatchRecord]:
    """The logged batches in id order, the last line of each id kept (an empty list: no log)."""
    path = checkpoint / LOG_FILE
    if not path.is_file():
        return []
    by_id: dict[int, BatchRecord] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue  # a line cut short by a crash is the batch's re-run's to write again
        try:
            doc = json.loads(line)
        except json.JSONDecodeError:
            continue
        ends = {t: {str(p): int(o) for p, o in parts.items()} for t, parts in doc["ends"].items()}
        by_id[int(doc["batch"])] = BatchRecord(
            int(doc["batch"]), ends, int(doc["late_watermark_ms"]), int(doc["timestamp_ms"])
        )
    return [by_id[b] for b in sorted(by_id)]


def initial_offsets(checkpoint: Path) -> Offsets:
    """Where the query's first batch began: the Kafka source's `sources/0/0` (a zero byte, `v1`, JSON)."""
    path = checkpoint / "sources" / "0" / "0"
    text = path.read_bytes().decode("utf-8", "replace") if path.is_file() else ""
    start = text.find("{")
    if start < 0:
        raise CheckpointMismatch(
            f"{path} does not hold the Kafka source's initial offsets; this checkpoint was not written by "
            "this Spark version's Kafka source, so its batches cannot be verified"
        )
    found = json.loads(text[start:])
    return {t: {str(p): int(o) for p, o in parts.items()} for t, parts in found.items()}


def ranges(
    topic: str, initial: Mapping[str, Mapping[str, int]], log: Iterable[BatchRecord]
) -> list[OffsetRange]:
    """The offset range each logged batch read of `topic`, per partition, from `initial` on (pure).

    Raises:
        CheckpointMismatch: the log skips a batch id (its records could not be placed).
    """
    begins = {int(p): int(o) for p, o in initial.get(topic, {}).items()}
    found: list[OffsetRange] = []
    for expected, record in enumerate(log):
        if record.batch != expected:
            raise CheckpointMismatch(
                f"the batch log has no line for batch {expected} (next: {record.batch}); it was started "
                "before this version logged batches: verify a view rebuilt from --from earliest"
            )
        for part, end in sorted(((int(p), int(o)) for p, o in record.ends.get(topic, {}).items())):
            begin = begins.get(part, 0)
            if end > begin:
                found.append(
                    OffsetRange(part, begin, end, record.batch, record.late_watermark_ms, record.timestamp_ms)
                )
            begins[part] = max(begin, end)
    return found
