"""An aggregate view: counts, sums, minima, maxima and distinct counts per group and event-time window.

Pure: the definition (`AggregateView`), its validation and its state fingerprint; the Spark job that
runs it is job.py.

Guarantees and assumptions:
- Sources: an event-store topic (`EventSource`: events only add) or a Debezium topic (`CdcSource`:
  the table's rows, an UPDATE or DELETE taking the old row's contribution back; count and sum only,
  a row's own time column as event time).
- Event time is never processing time by default: `event_time` names a field of the event, the event
  store's envelope time (`ENVELOPE_TIME`: the `timestamp` header, epoch ms, the time the command was
  decided) or, only when named explicitly, the Kafka record's timestamp (`KAFKA_TIME`).
- Windows are Spark's: tumbling (`slide` None) or sliding, aligned to the epoch. A window closes
  once the newest event time seen passes its end by `allowed_lateness`. `late_policy="drop"`: that
  is Spark's watermark delay, and a record of a closed window is dropped and counted.
  `late_policy="correct"`: Spark keeps the state `correction_horizon` (> `allowed_lateness`) behind
  instead, so a record of a closed window within the horizon re-opens it and its row is updated,
  each such update counted as a correction; records behind the horizon are dropped and counted.
  The trade-off: state kept longer (horizon / lateness times as many open windows), rows that
  change after they were first final, and the same exactness within the horizon.
- `validate` refuses, before anything starts, whatever Spark would only refuse mid-query or compute
  wrongly, each with a message naming the field and the fix.
- `fingerprint` hashes what Spark's state store depends on (window, slide, group keys, aggregations,
  event time, lateness, derived columns). It is stored beside the checkpoint at the first start; a
  restart with another fingerprint would read state written for another definition, and is refused.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from materializers.errors import (
    BadAggregate,
    BadAggregation,
    BadWindow,
    LatePolicyNotSupported,
    StateIncompatible,
    UnknownColumn,
)

if TYPE_CHECKING:
    from materializers.materializer import Materializer

ENVELOPE_TIME = "@envelope"  # the event store's envelope timestamp (header `timestamp`, epoch ms)
KAFKA_TIME = "@kafka"  # the Kafka record's timestamp: only when asked for by name
WINDOW_COLUMNS = ("window_start", "window_end")
# Over CDC sources: each contribution's sign (+1 a row added, -1 a row taken back), and the rows a
# window and group holds (the sum of signs; kept beside the aggregations, never in the table).
SIGN, ROWS = "_sign", "_rows"
Op = Literal["count", "sum", "min", "max", "approx_count_distinct"]
OPS: tuple[Op, ...] = ("count", "sum", "min", "max", "approx_count_distinct")
NUMERIC_OPS = ("sum", "min", "max")
NUMERIC_TYPES = (
    "tinyint",
    "byte",
    "smallint",
    "short",
    "int",
    "integer",
    "bigint",
    "long",
    "float",
    "double",
)
TIME_TYPES = ("timestamp", "long", "bigint")  # a long event-time field is epoch milliseconds

_UNIT_MS = {
    "ms": 1, "millisecond": 1, "milliseconds": 1,
    "s": 1000, "sec": 1000, "second": 1000, "seconds": 1000,
    "m": 60_000, "min": 60_000, "minute": 60_000, "minutes": 60_000,
    "h": 3_600_000, "hour": 3_600_000, "hours": 3_600_000,
    "d": 86_400_000, "day": 86_400_000, "days": 86_400_000,
}  # fmt: skip
_DURATION = re.compile(r"^\s*(\d+)\s*([a-z]+)\s*$")


@dataclass(frozen=True, slots=True, kw_only=True)
class Aggregation:
    """One output column: `op` over `column` (none for count), named `name` (default `<op>_<column>`)."""

    op: Op
    column: str = ""
    name: str = ""

    @property
    def output(self) -> str:
        return self.name or (f"{self.op}_{self.column}" if self.column else self.op)


@dataclass(frozen=True, slots=True, kw_only=True)
class Derived:
    """A column computed from the event's fields before grouping (Spark SQL `sql`, of Spark type `type`)."""

    name: str
    sql: str
    type: str


@dataclass(frozen=True, slots=True, kw_only=True)
class EventSource:
    """An event-store topic, the event types the aggregate reads (others are skipped, not counted),
    and the event fields it decodes: name -> Spark type (null where an event type lacks the field)."""

    topic: str
    event_types: tuple[str, ...]
    fields: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True, kw_only=True)
class CdcSource:
    """A Debezium change topic of one Postgres table, aggregated as the table's rows: an INSERT (or a
    snapshot read) adds the row's contribution, an UPDATE takes the old row's back and adds the new
    one's, a DELETE takes the old row's back. The old row is the change's `before` image, which
    Postgres sends in full only for a table with REPLICA IDENTITY FULL (checked at every start).

    `table` is the captured table (`schema.table`), `key_column` its primary key, `fields` the row
    columns the aggregate reads: name -> Spark type, as a CDC materializer's DDL types them.
    """

    topic: str
    table: str
    fields: Mapping[str, str]
    key_column: str = "id"


# Aggregations a retraction can take back exactly: a sum and a count subtract. min, max and a
# distinct-count sketch cannot forget a value, so they are refused over CDC sources.
RETRACTABLE_OPS = ("count", "sum")


@dataclass(frozen=True, slots=True, kw_only=True)
class AggregateView:
    """Aggregations per group and event-time window, kept in a Delta table keyed by
    (window_start, window_end, *group_by). Durations are `<n> <unit>` (ms, s, m, h, d or words)."""

    name: str
    source: EventSource | CdcSource
    event_time: str
    group_by: tuple[str, ...]
    window: str
    aggregations: tuple[Aggregation, ...]
    allowed_lateness: str
    slide: str | None = None
    late_policy: Literal["drop", "correct"] = "drop"
    # late_policy "correct" only: how far behind the newest event time a record may still update its
    # (closed) window; Spark's watermark delay then. Longer than allowed_lateness.
    correction_horizon: str | None = None
    # Also keep each group's newest window in Redis (views/redis_windows.py), for readers that want
    # the current window without querying the table.
    redis_current: bool = False
    derived: tuple[Derived, ...] = ()
    # Event times further ahead of the batch's time are refused: one would move the watermark past
    # every real record. Not part of the state (it only decides which records enter).
    max_ahead: str = "1 hour"

    def columns(self) -> dict[str, str]:
        """Every column the aggregate may name: the decoded fields, then the derived ones (pure)."""
        return {**self.source.fields, **{d.name: d.type for d in self.derived}}

    def output_ddl(self) -> str:
        """The Delta table's columns: window bounds, group keys, aggregations (types as Spark gives them)."""
        columns = self.columns()
        parts = [f"{c} timestamp" for c in WINDOW_COLUMNS]
        parts += [f"`{g}` {columns[g]}" for g in self.group_by]
        parts += [f"`{a.output}` {_output_type(a, columns)}" for a in self.aggregations]
        return ", ".join(parts)


def _output_type(agg: Aggregation, columns: Mapping[str, str]) -> str:
    if agg.op in ("count", "approx_count_distinct"):
        return "bigint"
    kind = _normal_type(columns[agg.column])
    if agg.op == "sum":  # Spark widens integral sums to bigint and fractional ones to double
        return "double" if kind in ("float", "double") else "bigint"
    return kind


def _normal_type(kind: str) -> str:
    aliases = {"byte": "tinyint", "short": "smallint", "integer": "int", "long": "bigint"}
    kind = kind.strip().lower()
    return aliases.get(kind, kind)


def duration_ms(text: str, what: str) -> int:
    """`text` (`1 minute`, `30s`, `500 ms`) in milliseconds; BadWindow naming `what` unless positive (pure)."""
    found = _DURATION.match(text.lower())
    unit = _UNIT_MS.get(found.group(2)) if found else None
    if found is None or unit is None or int(found.group(1)) <= 0:
        raise BadWindow(
            f"{what} {text!r} is not a positive duration; write e.g. '1 minute', '30 seconds', '500 ms' "
            "or '2 h' (a whole number, then ms, s, m, h or d)"
        )
    return int(found.group(1)) * unit


def spark_interval(ms: int) -> str:
    """Milliseconds as the interval string Spark's `window` and `withWatermark` take (pure)."""
    return f"{ms} milliseconds"


def is_cdc(view: AggregateView) -> bool:
    return isinstance(view.source, CdcSource)


def validate(view: AggregateView) -> None:
    """Refuse a definition that cannot run or would compute something else than it says (pure)."""
    _check_late_policy(view)
    if isinstance(view.source, CdcSource):
        _check_cdc(view, view.source)
    elif not view.source.event_types:
        raise BadAggregate(
            f"aggregate {view.name!r}: source.event_types is empty; name the event types it reads"
        )
    size = duration_ms(view.window, f"aggregate {view.name!r}: window")
    if view.slide is not None and duration_ms(view.slide, f"aggregate {view.name!r}: slide") > size:
        raise BadWindow(
            f"aggregate {view.name!r}: slide {view.slide!r} is larger than the window {view.window!r}; "
            "records between windows would be counted nowhere: make the slide at most the window size"
        )
    duration_ms(view.max_ahead, f"aggregate {view.name!r}: max_ahead")
    _check_derived(view)
    columns = view.columns()
    _check_event_time(view, columns)
    if not view.group_by:
        raise BadAggregation(
            f"aggregate {view.name!r}: group_by is empty; name at least one column to group by "
            f"(of {_known(columns)})"
        )
    for key in view.group_by:
        _require_column(view, "group_by", key, columns)
    _check_aggregations(view, columns)


def _check_cdc(view: AggregateView, source: CdcSource) -> None:
    """What a row-retracting aggregate cannot do: place a retraction by a time the row does not hold,
    or take a value back out of min, max or a distinct sketch."""
    if "." not in source.table:
        raise BadAggregate(
            f"aggregate {view.name!r}: source.table {source.table!r} names no schema; write it as "
            "schema.table (e.g. public.orders), the table pre-flight checks for REPLICA IDENTITY FULL"
        )
    if view.event_time in (ENVELOPE_TIME, KAFKA_TIME):
        raise BadAggregate(
            f"aggregate {view.name!r}: event_time {view.event_time!r} over a CDC source; name a time column "
            "of the row (e.g. created_at): an UPDATE or DELETE takes the old row's contribution back from "
            "the window of the old row's own time, which a record's time does not give"
        )
    for agg in view.aggregations:
        if agg.op not in RETRACTABLE_OPS:
            raise BadAggregation(
                f"aggregate {view.name!r}: {agg.op}({agg.column}) over a CDC source cannot be kept exact: "
                "an UPDATE or DELETE must take the old row's value back, which count and sum can "
                f"(subtracting) and {agg.op} cannot; use count/sum here, or aggregate an event-store topic "
                "(append-only) for min, max and approx_count_distinct"
            )


def _check_derived(view: AggregateView) -> None:
    for derived in view.derived:
        if derived.name in view.source.fields or derived.name in WINDOW_COLUMNS:
            raise BadAggregation(
                f"aggregate {view.name!r}: derived column {derived.name!r} has the name of an existing "
                "column; give it another name"
            )


def _check_event_time(view: AggregateView, columns: Mapping[str, str]) -> None:
    if view.event_time in (ENVELOPE_TIME, KAFKA_TIME):
        return
    _require_column(view, "event_time", view.event_time, columns)
    if _normal_type(columns[view.event_time]) not in TIME_TYPES:
        raise BadAggregate(
            f"aggregate {view.name!r}: event_time {view.event_time!r} is of type {columns[view.event_time]}; "
            f"name a timestamp or a long (epoch milliseconds) field, or {ENVELOPE_TIME!r} (the event "
            f"store's envelope time), or {KAFKA_TIME!r} (the Kafka record's timestamp)"
        )


def _check_aggregations(view: AggregateView, columns: Mapping[str, str]) -> None:
    if not view.aggregations:
        raise BadAggregation(
            f"aggregate {view.name!r}: aggregations is empty; add at least one (count, sum, min, max, "
            "approx_count_distinct)"
        )
    for agg in view.aggregations:
        if agg.op not in OPS:
            raise BadAggregation(f"aggregate {view.name!r}: unknown aggregation {agg.op!r}; use one of {OPS}")
        if agg.op == "count" and agg.column:
            raise BadAggregation(
                f"aggregate {view.name!r}: count takes no column (it counts events; got {agg.column!r}); "
                "use approx_count_distinct for distinct values"
            )
        if agg.op != "count":
            _require_column(view, f"{agg.op}", agg.column, columns)
        if agg.op in NUMERIC_OPS and _normal_type(columns[agg.column]) not in NUMERIC_TYPES:
            raise BadAggregation(
                f"aggregate {view.name!r}: {agg.op}({agg.column}) over a non-numeric column (type "
                f"{columns[agg.column]}); aggregate a numeric field, or use count/approx_count_distinct"
            )
    names = [*WINDOW_COLUMNS, *view.group_by, *(a.output for a in view.aggregations)]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise BadAggregation(
            f"aggregate {view.name!r}: output column(s) {', '.join(twice)} named twice (window bounds, group "
            "keys and aggregations share the table); give the aggregations distinct `name`s"
        )


def _require_column(view: AggregateView, role: str, name: str, columns: Mapping[str, str]) -> None:
    if name not in columns:
        raise UnknownColumn(
            f"aggregate {view.name!r}: {role} names column {name!r}, which the source does not decode; "
            f"known: {_known(columns)} (add it to source.fields or derived)"
        )


def _known(columns: Mapping[str, str]) -> str:
    return ", ".join(columns) or "none"


def _check_late_policy(view: AggregateView) -> None:
    lateness = duration_ms(view.allowed_lateness, f"aggregate {view.name!r}: allowed_lateness")
    if view.late_policy not in ("drop", "correct"):
        raise LatePolicyNotSupported(
            f"aggregate {view.name!r}: late_policy {view.late_policy!r}; use 'drop' or 'correct'"
        )
    if view.late_policy == "drop":
        if view.correction_horizon is not None:
            raise LatePolicyNotSupported(
                f"aggregate {view.name!r}: correction_horizon is set but late_policy is 'drop', which "
                "corrects nothing; set late_policy='correct' or remove correction_horizon"
            )
        return
    if view.correction_horizon is None:
        raise LatePolicyNotSupported(
            f"aggregate {view.name!r}: late_policy='correct' needs correction_horizon, how far behind the "
            "newest event time a record may still correct its window (e.g. '1 hour'); longer than "
            "allowed_lateness"
        )
    horizon = duration_ms(view.correction_horizon, f"aggregate {view.name!r}: correction_horizon")
    if horizon <= lateness:
        raise LatePolicyNotSupported(
            f"aggregate {view.name!r}: correction_horizon {view.correction_horizon!r} is not longer than "
            f"allowed_lateness {view.allowed_lateness!r}: nothing could be corrected; make it longer"
        )


def watermark_delay_ms(view: AggregateView) -> int:
    """Spark's watermark delay: how long the state of a window is kept after the newest event time
    passed its end (pure)."""
    if view.late_policy == "correct" and view.correction_horizon is not None:
        return duration_ms(view.correction_horizon, "correction_horizon")
    return duration_ms(view.allowed_lateness, "allowed_lateness")


def state_definition(view: AggregateView) -> dict[str, Any]:
    """What Spark's state for the view depends on, in canonical form: durations in ms (so '60 s' and
    '1 minute' are one state), a tumbling window as a slide equal to its size (pure)."""
    size = duration_ms(view.window, "window")
    found: dict[str, Any] = {
        "window_ms": size,
        "slide_ms": duration_ms(view.slide, "slide") if view.slide else size,
        "group_by": list(view.group_by),  # the order is the state key's schema
        "aggregations": [[a.op, a.column, a.output] for a in view.aggregations],
        "event_time": view.event_time,
        "allowed_lateness_ms": duration_ms(view.allowed_lateness, "allowed_lateness"),
        "derived": [[d.name, d.sql, _normal_type(d.type)] for d in view.derived],
    }
    if view.late_policy == "correct":  # only then: a drop view's fingerprint stays what it was
        found["correction_horizon_ms"] = watermark_delay_ms(view)
    if isinstance(view.source, CdcSource):  # signed contributions: another state than the events'
        found["source"] = ["cdc", view.source.key_column]
    return found


def fingerprint(view: AggregateView) -> str:
    """A stable hash of `state_definition` (pure): equal for equal state, different otherwise."""
    text = json.dumps(state_definition(view), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def check_compatible(view: AggregateView, stored: Mapping[str, Any] | None, where: str, fix: str) -> None:
    """Refuse state `stored` (a `{"fingerprint", "state"}` record found at `where`) built by another
    definition; None = no state yet (pure)."""
    if stored is None or stored.get("fingerprint") == fingerprint(view):
        return
    before = stored.get("state", {})
    now = state_definition(view)
    changed = [f"{k}: {before.get(k)!r} -> {now[k]!r}" for k in now if before.get(k) != now[k]]
    raise StateIncompatible(
        f"aggregate {view.name!r}: the state at {where} was built by another definition (state fingerprint "
        f"{str(stored.get('fingerprint'))[:12]}, now {fingerprint(view)[:12]}; changed: "
        f"{'; '.join(changed) or 'unknown'}). Spark cannot carry that state over: {fix}. Nothing was "
        "started or written"
    )


def state_record(view: AggregateView) -> dict[str, Any]:
    """What is stored beside the checkpoint at the first start (pure)."""
    return {"aggregate": view.name, "fingerprint": fingerprint(view), "state": state_definition(view)}


def materializer(view: AggregateView) -> Materializer:
    """The view as a catalog entry (`kind="aggregate"`), so `materializers start NAME`, `status` and
    `stop` treat it like any materializer; validated here, at import of the module defining it."""
    from materializers.materializer import Materializer

    validate(view)
    return Materializer(
        name=view.name,
        kind="aggregate",
        default_topic=view.source.topic,
        default_table=view.source.table if isinstance(view.source, CdcSource) else "",
        data_ddl=view.output_ddl(),
        decoder=_no_decoder,
        sequential=False,
        builtin_views=(),
        event_types=view.source.event_types if isinstance(view.source, EventSource) else (),
        key_column=view.source.key_column if isinstance(view.source, CdcSource) else "id",
        aggregate=view,
    )


def _no_decoder() -> Any:
    raise BadAggregate("an aggregate view is run by materializers.aggregates.job, not decoded by a Job")


# Late records dropped and records refused (no event time, undecodable), per batch, from Spark's
# progress: the names aggregate_job observes its input under.
OBSERVED = "aggregate_input"


def batch_counts(progress: Mapping[str, Any]) -> tuple[int, int]:
    """(late rows dropped by the watermark, records refused) of one query progress (pure)."""
    dropped = sum(int(op.get("numRowsDroppedByWatermark") or 0) for op in progress.get("stateOperators", []))
    observed = (progress.get("observedMetrics") or {}).get(OBSERVED) or {}
    if hasattr(observed, "asDict"):  # PySpark hands the observed metrics over as a Row
        observed = observed.asDict()
    return dropped, int(observed.get("refused") or 0)
