"""Job status: what a running driver publishes (a JSON file beside its checkpoint) and its summary.

The driver rewrites `status.json` after every progress update; `materializers status` reads it and
adds the lag, measured when asked (`materializers.ops.lag`): Spark's own progress cannot give it, since
a batch without a cap plans up to the offsets it saw and so always "ends" at its latest offset (its
lag read 0 while a demo's views were far behind), and a stopped or dead driver publishes nothing.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

STATUS_FILE = "status.json"


@dataclass(frozen=True, slots=True, kw_only=True)
class JobStatus:
    name: str
    state: str  # starting | running | stopped | failed
    pid: int
    app_id: str = ""
    # Where the query reads and commits, so a reader can measure its lag without the driver.
    topic: str = ""
    checkpoint: str = ""
    batch_id: int = -1
    # Filled by readers (materializers.ops.lag), not by the driver; None = unknown (nothing committed yet).
    lag: dict[str, int] | None = None
    input_rows_per_second: float = 0.0
    processed_rows_per_second: float = 0.0
    last_batch_ms: int = 0
    dead_letters: int = 0
    # Aggregate views (aggregates/job.py): late (window, group) rows Spark dropped behind the watermark
    # (`numRowsDroppedByWatermark`: late records of one window and group in a batch count once), and
    # records refused (undecodable, no event time, too far ahead).
    late_dropped: int = 0
    refused: int = 0
    # late_policy "correct": updates of windows that had closed (per window and group row and batch)
    corrected: int = 0
    last_error: str = ""
    updated_at: float = 0.0

    @property
    def total_lag(self) -> int | None:
        return None if self.lag is None else sum(self.lag.values())


def from_progress(base: JobStatus, progress: dict[str, Any]) -> JobStatus:
    """Fold one query progress into the status (pure)."""
    durations = progress.get("durationMs", {})
    return JobStatus(
        **{
            **asdict(base),
            "batch_id": int(progress.get("batchId", base.batch_id)),
            "input_rows_per_second": float(progress.get("inputRowsPerSecond") or 0.0),
            "processed_rows_per_second": float(progress.get("processedRowsPerSecond") or 0.0),
            "last_batch_ms": int(durations.get("triggerExecution", base.last_batch_ms)),
        }
    )


def write(job_dir: Path, status: JobStatus) -> None:
    """Atomic replace, so a reader never sees half a file."""
    job_dir.mkdir(parents=True, exist_ok=True)
    tmp = job_dir / f".{STATUS_FILE}.{os.getpid()}"
    tmp.write_text(json.dumps(asdict(status), sort_keys=True))
    tmp.replace(job_dir / STATUS_FILE)


def read(job_dir: Path) -> JobStatus | None:
    path = job_dir / STATUS_FILE
    if not path.is_file():
        return None
    return JobStatus(**json.loads(path.read_text()))


def alive(pid: int) -> bool:
    """Whether the driver process still runs; an exited but not yet reaped (zombie) process does not."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        # `kill 0` succeeds on a zombie: its parent (e.g. whoever started the driver) has not waited
        # for it yet. The state letter follows the parenthesised command name in /proc/<pid>/stat.
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True  # no procfs (not Linux): trust kill 0
    return stat.rpartition(")")[2].split()[:1] != ["Z"]


COLUMNS = (  # title, field, alignment+width, number format
    ("NAME", "name", "<12", ""),
    ("STATE", "state", "<8", ""),
    ("BATCH", "batch_id", ">6", ""),
    ("LAG", "total_lag", ">8", ""),  # "-": nothing committed yet, or Kafka did not answer
    ("IN/S", "input_rows_per_second", ">8", ".1f"),
    ("OUT/S", "processed_rows_per_second", ">8", ".1f"),
    ("LAST MS", "last_batch_ms", ">8", ""),
    ("DLQ", "dead_letters", ">5", ""),
    ("LATE", "late_dropped", ">6", ""),  # aggregate views: late (window, group) rows Spark dropped
    ("CORR", "corrected", ">6", ""),  # aggregate views, late_policy "correct": closed windows updated
)


def table(rows: list[dict[str, Any]]) -> str:
    """The human view of `materializers status`: one line per job, last error cut to 60 chars (pure)."""
    header = " ".join(f"{title:{width}}" for title, _key, width, _fmt in COLUMNS) + "  LAST ERROR"
    lines = [header]
    for row in rows:
        cells = " ".join(
            f"{'-' if row.get(key) is None else row[key]:{width}{fmt}}" for _title, key, width, fmt in COLUMNS
        )
        error = " ".join(str(row.get("last_error", "")).split())[:60]
        lines.append(f"{cells}  {error}")
    return "\n".join(lines)
