"""`verify` for an aggregate view: the same aggregate recomputed as one Spark batch job over the source,
compared with the Delta table window by window.

The recomputation reads the topic from the query's first offsets to the end offsets of the last
committed batch (what the table reflects), decodes and refuses records as the stream does
(`aggregate_plan.events` / `refusal`, each record judged against its own batch's clock), places every
record in the batch that read it (`aggregate_batches`) and drops, per (record, window), what Spark
dropped as late: the window ended at or before the watermark that batch filtered late input by. The
rest, grouped and aggregated alike, must equal the table: every window and group, every value (a
double sum within 1e-9 relative, Spark adding in another order; everything else exactly).

What it reports besides: the (record, window) pairs dropped as late and the windows they fell in,
the records refused, and the status counters beside them. Spark counts the late rows it dropped
after pre-aggregating a batch per partition (`late_dropped`: at most the pairs, equal when no two
late records of one batch, partition, window and group meet), so the counters are shown, not
required equal.

Assumptions: the writer schemas are the topic's subjects' now (the job learned them at its start: a
schema registered while it ran is decoded here and was refused there, a difference shown as such).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from materializers.aggregates import batches as aggregate_batches
from materializers.aggregates.declaration import ROWS, WINDOW_COLUMNS, AggregateView, is_cdc
from materializers.aggregates.job import table_path, view_of
from materializers.aggregates.plan import aggregations, output, refusal, reported_refusal, window_of
from materializers.aggregates.replay import placed
from materializers.plan import JobPlan
from materializers.runtime import checkpoint, status

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

SHOWN = 20  # differences listed (all are counted)
DOUBLE_TOLERANCE = 1e-9


@dataclass(frozen=True, slots=True)
class WindowDifference:
    key: dict[str, str]  # window bounds and group keys, as text
    expected: dict[str, str] | None  # None: the recomputation has no such window and group
    found: dict[str, str] | None  # None: the table has none

    def __str__(self) -> str:
        return f"{self.key}: expected {self.expected}, found {self.found}"


@dataclass(frozen=True, slots=True)
class AggregateCheck:
    batches: int  # committed batches verified
    windows: int  # window-and-group rows the recomputation expects
    differences: tuple[WindowDifference, ...]  # the first SHOWN
    difference_count: int
    late_pairs: int  # (record, window) pairs dropped as late
    late_windows: int  # distinct windows and groups those fell in
    refused: int  # records refused
    counted_late: int  # the status counters, for comparison
    counted_refused: int

    def summary(self) -> str:
        return (
            f"{self.batches} batch(es), {self.windows} window row(s) recomputed, {self.difference_count} "
            f"difference(s); late: {self.late_pairs} record-window pair(s) in {self.late_windows} window "
            f"row(s) (status: {self.counted_late} dropped rows as Spark counts them); refused: "
            f"{self.refused} record(s) (status: {self.counted_refused})"
        )


def verify_aggregate(spark: SparkSession, plan: JobPlan) -> AggregateCheck:
    view = view_of(plan)
    done = checkpoint.committed(plan.checkpoint).batch_id
    log = [r for r in aggregate_batches.read(plan.checkpoint) if r.batch <= done]
    current = status.read(plan.job_dir)
    counted = (current.late_dropped, current.refused) if current is not None else (0, 0)
    if not log:
        return AggregateCheck(0, 0, (), 0, 0, 0, 0, *counted)
    ranges = aggregate_batches.ranges(plan.topic, aggregate_batches.initial_offsets(plan.checkpoint), log)
    found = placed(spark, plan, view, ranges)
    from pyspark.sql import functions as F

    clock = F.timestamp_millis(F.col("_ts"))
    refused = refusal(view, clock)
    windows = found.where(~refused).select("*", window_of(view).alias("window"))
    late = F.col("window.end") <= F.timestamp_millis(F.col("_late_wm"))
    groups = [F.col(f"`{g}`") for g in view.group_by]
    expected = output(windows.where(~late).groupBy("window", *groups).agg(*aggregations(view)), view)
    if is_cdc(view):  # a window and group whose rows were all taken back is no row of the table
        expected = expected.where(F.col(ROWS) != 0)
    late_rows = windows.where(late)
    shown, count, rows = _compare(expected, spark.read.format("delta").load(str(table_path(plan))), view)
    return AggregateCheck(
        batches=len(log),
        windows=rows,
        differences=shown,
        difference_count=count,
        late_pairs=late_rows.count(),
        late_windows=late_rows.select("window", *groups).distinct().count(),
        refused=found.where(reported_refusal(view, clock).isNotNull()).count(),  # as the status counts
        counted_late=counted[0],
        counted_refused=counted[1],
    )


def _compare(
    expected: DataFrame, table: DataFrame, view: AggregateView
) -> tuple[tuple[WindowDifference, ...], int, int]:
    """(the first SHOWN differences, how many, the expected rows) of a full outer join on the keys."""
    from pyspark.sql import functions as F

    keys = [*WINDOW_COLUMNS, *view.group_by]
    values = [a.output for a in view.aggregations]
    kinds = dict(expected.dtypes)
    e, t = expected.alias("e"), table.alias("t")
    joined = e.join(t, on=[F.col(f"e.`{k}`").eqNullSafe(F.col(f"t.`{k}`")) for k in keys], how="full_outer")
    present_e = F.col(f"e.`{keys[0]}`").isNotNull()
    present_t = F.col(f"t.`{keys[0]}`").isNotNull()
    differs = ~present_e | ~present_t
    for name in values:
        differs = differs | ~_same(F.col(f"e.`{name}`"), F.col(f"t.`{name}`"), kinds[name])
    found = joined.where(differs)
    shown = tuple(_difference(row, keys, values) for row in found.limit(SHOWN).collect())
    return shown, found.count(), expected.count()


def _same(a: Column, b: Column, kind: str) -> Column:
    from pyspark.sql import functions as F

    if kind in ("double", "float"):
        scale = F.greatest(F.abs(a), F.abs(b), F.lit(1.0))
        return a.eqNullSafe(b) | (F.abs(a - b) <= F.lit(DOUBLE_TOLERANCE) * scale)
    return a.eqNullSafe(b)


def _difference(row: Any, keys: list[str], values: list[str]) -> WindowDifference:
    """One joined row as text (`e` columns first, then `t`: the select order of the join)."""
    width = len(keys) + len(values)
    cells = list(row)
    mine, theirs = cells[:width], cells[width:]
    names = [*keys, *values]
    e = dict(zip(names, (str(v) for v in mine), strict=True))
    t = dict(zip(names, (str(v) for v in theirs), strict=True))
    key = {k: e[k] if mine[0] is not None else t[k] for k in keys}
    return WindowDifference(
        key=key,
        expected={v: e[v] for v in values} if mine[0] is not None else None,
        found={v: t[v] for v in values} if theirs[0] is not None else None,
    )
