"""The Spark plan of an aggregate view, pure of I/O but for the registry's schema list: raw Kafka rows
-> the view's events decoded (avro_events) -> event time -> refused or not -> window and group ->
aggregations, and the table's columns. The streaming job (aggregate_job) and the batch replays of
its committed batches (aggregate_replay: verify, dead letters) build from the same pieces, so a
record is judged alike by both.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from materializers.aggregates.declaration import (
    ENVELOPE_TIME,
    KAFKA_TIME,
    OBSERVED,
    ROWS,
    SIGN,
    AggregateView,
    CdcSource,
    duration_ms,
    is_cdc,
    spark_interval,
    watermark_delay_ms,
)
from materializers.decode import avro_events, debezium, event_shape
from materializers.decode.avro_events import WriterSchemas

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

# The event store's envelope time header (eventstore/serde.py H_TIMESTAMP), epoch milliseconds.
ENVELOPE_TIME_HEADER = "timestamp"
EVENT_TIME = "_event_time"


def aggregate(raw: DataFrame, view: AggregateView, schemas: WriterSchemas) -> DataFrame:
    """The streaming plan from raw Kafka rows to the aggregate's rows (window_start, window_end,
    *group_by, *aggregations); refused records counted under the observation `OBSERVED`."""
    from pyspark.sql import functions as F

    decoded = events(raw, view, schemas)
    # Judged against the batch's own timestamp (logged with its offsets, so a re-run batch judges alike).
    now = F.current_timestamp()
    refused = refusal(view, now)
    reported = reported_refusal(view, now).isNotNull()
    observed = decoded.observe(
        OBSERVED, F.count(F.lit(1)).alias("records"), F.sum(F.when(reported, 1).otherwise(0)).alias("refused")
    )
    grouped = (
        observed.where(~refused)
        .withWatermark(EVENT_TIME, spark_interval(watermark_delay_ms(view)))
        .groupBy(window_of(view), *[F.col(f"`{g}`") for g in view.group_by])
        .agg(*aggregations(view))
    )
    return output(grouped, view)


def events(raw: DataFrame, view: AggregateView, schemas: WriterSchemas) -> DataFrame:
    """The records as contributions: the view's fields, its derived columns and `EVENT_TIME` (and,
    over CDC, `SIGN`); a record that cannot contribute is one row with its `error`."""
    from pyspark.sql import functions as F

    if isinstance(view.source, CdcSource):
        decoded = row_contributions(raw, view, view.source, schemas)
    else:
        decoded = _events(raw, view, schemas)
    for derived in view.derived:
        decoded = decoded.withColumn(derived.name, F.expr(derived.sql).cast(derived.type))
    return decoded.withColumn(EVENT_TIME, _event_time(view, decoded))


def _events(raw: DataFrame, view: AggregateView, schemas: WriterSchemas) -> DataFrame:
    """The view's event types decoded (avro_events.decode)."""
    from pyspark.sql import functions as F

    assert not isinstance(view.source, CdcSource)
    types = view.source.event_types
    # Other event types are not this view's business: skipped before decoding, not refused.
    mine = raw.where(event_shape.event_type().isNull() | event_shape.event_type().isin(*types))
    if view.event_time == ENVELOPE_TIME:  # decode passes the record's `timestamp` on as event_ts
        envelope_ms = event_shape.header(ENVELOPE_TIME_HEADER).cast("long")
        mine = mine.withColumn("timestamp", F.timestamp_millis(envelope_ms))
    return avro_events.decode(mine, schemas=schemas, wanted=dict(view.source.fields), event_types=types)


def row_contributions(
    raw: DataFrame, view: AggregateView, source: CdcSource, schemas: WriterSchemas
) -> DataFrame:
    """Debezium changes as signed row contributions (`SIGN` +1: the row after, -1: the row before):
    a create or snapshot read adds its row, an update takes its `before` back and adds its `after`,
    a delete takes its `before` back. An unchanged TOAST value in `after` is the `before`'s (the
    column did not change). A change that cannot be taken back exactly is one error row: an update
    or delete without a `before` image (the table's REPLICA IDENTITY is not FULL), or a value still a
    TOAST placeholder in both images."""
    from pyspark.sql import functions as F

    names = tuple(source.fields)
    ddl = ", ".join(f"`{n}` {t}" for n, t in source.fields.items())
    decoder = debezium.DebeziumDecoder(  # its query is never rebuilt, so it reads JSON from the start
        data_columns=names, data_ddl=ddl, key_column=source.key_column, with_before=True, json_before_met=True
    )
    decoded = decoder(raw, schemas)
    before, op = F.col(debezium.BEFORE), F.col(debezium.CHANGE_OP)
    placeholder = decoder.unavailable_placeholder
    after_values = [
        F.when(F.array_contains("keep_fields", n), before[n]).otherwise(F.col(f"`{n}`")).alias(n)
        for n in names
    ]
    still_toasted = F.lit(False)
    for n in names:
        still_toasted = still_toasted | (before[n].cast("string") == placeholder)
    problem = (
        F.when(F.col("error").isNotNull(), F.col("error"))
        .when(
            op.isin("u", "d") & before.isNull(),
            F.concat(
                F.lit("the change ("), op, F.lit(f") carries no before image, so the old row of {source.table} "
                f"cannot be taken back; run ALTER TABLE {source.table} REPLICA IDENTITY FULL and rebuild the "
                "view from a fresh snapshot"),
            ),
        )
        .when(
            still_toasted,
            F.lit(f"a column the aggregate reads is an unchanged TOAST value in both images of the change "
                  f"({placeholder}); run ALTER TABLE {source.table} REPLICA IDENTITY FULL"),
        )
    )  # fmt: skip
    ok = problem.isNull()
    nulls = [F.lit(None).cast(t).alias(n) for n, t in source.fields.items()]
    contributions = F.array(
        F.when(ok & (F.col("op") == "upsert"), F.struct(F.lit(1).alias(SIGN), *after_values)),
        F.when(ok & op.isin("u", "d"), F.struct(F.lit(-1).alias(SIGN), *[before[n].alias(n) for n in names])),
        F.when(~ok, F.struct(F.lit(0).alias(SIGN), *nulls)),
    )
    kept = [
        F.col(c)
        for c in ("entity", "event_ts", "src_topic", "src_partition", "src_offset", "src_key", "src_value")
    ]
    return (
        decoded.select(*kept, problem.alias("error"), F.explode(contributions).alias("_c"))
        .where(F.col("_c").isNotNull())
        .select(*kept, "error", "_c.*")
    )


def refusal(view: AggregateView, now: Column) -> Column:
    """Whether a decoded record is refused (`refusal_reason` is not null)."""
    return refusal_reason(view, now).isNotNull()


def reported_refusal(view: AggregateView, now: Column) -> Column:
    """The refusal a record is counted and dead-lettered for; null for a refused retraction (over
    CDC, the old row taken back by -1): its time was already refused when the row was added (a null
    stays null, a time ahead was further ahead then), so the change's refusal was reported with the
    adding change, and the retraction is skipped as the adding was."""
    from pyspark.sql import functions as F

    reason = refusal_reason(view, now)
    return F.when(F.col(SIGN) != -1, reason) if is_cdc(view) else reason


def refusal_reason(view: AggregateView, now: Column) -> Column:
    """Why a decoded record is refused, null when it is not: undecodable, no event time, or further
    ahead of `now` than `max_ahead` (a time far ahead would move the watermark past every real record)."""
    from pyspark.sql import functions as F

    ahead = now + F.expr(f"INTERVAL {duration_ms(view.max_ahead, 'max_ahead')} MILLISECONDS")
    at = F.col(EVENT_TIME)
    return (
        F.when(F.col("error").isNotNull(), F.col("error"))
        .when(at.isNull(), F.lit(f"no event time: {view.event_time} is missing or null"))
        .when(
            at > ahead,
            F.concat(
                F.lit("event time "), at.cast("string"),
                F.lit(f" is more than max_ahead ({view.max_ahead}) past the batch's time "), now.cast("string"),
            ),
        )
    )  # fmt: skip


def window_of(view: AggregateView) -> Column:
    from pyspark.sql import functions as F

    size = spark_interval(duration_ms(view.window, "window"))
    slide = spark_interval(duration_ms(view.slide, "slide")) if view.slide else None
    return F.window(EVENT_TIME, size, slide)


def aggregations(view: AggregateView) -> list[Column]:
    """The view's aggregations; over CDC signed (a count is the sum of signs, a sum of signed values)
    and `ROWS` besides: the rows a window and group holds, 0 once every row was taken back."""
    from pyspark.sql import functions as F

    if not is_cdc(view):
        return [_aggregation(a.op, a.column).alias(a.output) for a in view.aggregations]
    sign = F.col(SIGN)
    signed = [
        (F.sum(sign) if a.op == "count" else F.sum(sign * F.col(f"`{a.column}`"))).alias(a.output)
        for a in view.aggregations
    ]
    return [*signed, F.sum(sign).alias(ROWS)]


def output(grouped: DataFrame, view: AggregateView) -> DataFrame:
    """The table's columns from a frame grouped by `window` and the group keys."""
    from pyspark.sql import functions as F

    return grouped.select(
        F.col("window.start").alias("window_start"),
        F.col("window.end").alias("window_end"),
        *[F.col(f"`{g}`") for g in view.group_by],
        *[F.col(f"`{a.output}`") for a in view.aggregations],
        *([F.col(ROWS)] if is_cdc(view) else []),
    )


def _event_time(view: AggregateView, decoded: DataFrame) -> Column:
    from pyspark.sql import functions as F

    if view.event_time in (ENVELOPE_TIME, KAFKA_TIME):
        return F.col("event_ts")
    given = F.col(f"`{view.event_time}`")
    kind = dict(decoded.dtypes)[view.event_time]
    return F.timestamp_millis(given) if kind in ("bigint", "int") else given.cast("timestamp")


def _aggregation(op: str, column: str) -> Column:
    from pyspark.sql import functions as F

    if op == "count":
        return F.count(F.lit(1))
    given = F.col(f"`{column}`")
    if op == "approx_count_distinct":
        return F.approx_count_distinct(given)
    return {"sum": F.sum, "min": F.min, "max": F.max}[op](given)
