"""Aggregate views over CDC on the real stack: Postgres -> Debezium (JSON and Avro) -> a windowed
aggregate of the table's rows, where an UPDATE or DELETE takes the old row's contribution back.

The truth is Postgres itself: after each run the Delta table must equal the same aggregate computed
by SQL over the table's rows now (nothing is late: the lateness is an hour).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from conftest import CdcSource as CapturedTable
from conftest import read_all, wait_for_end_offset
from test_aggregate_views import drive
from test_debezium_avro import avro_converters

from cdc.errors import ReplicaIdentityNotFull
from kafkakit.positions import parse_start
from materializers.aggregates.declaration import AggregateView, Aggregation, CdcSource, materializer
from materializers.aggregates.job import AggregateJob, table_path
from materializers.aggregates.verify import verify_aggregate
from materializers.errors import IncompleteHistory
from materializers.plan import JobPlan
from materializers.runtime import driver_loop, status
from materializers.views.warehouse.delta import query

pytestmark = pytest.mark.integration

DDL = "id integer primary key, region text not null, amount integer not null, created_at timestamptz not null"
T0 = datetime.now(UTC).replace(second=0, microsecond=0) - timedelta(minutes=30)


def at(minute: float) -> datetime:
    return T0 + timedelta(minutes=minute)


def view_of(table: CapturedTable) -> AggregateView:
    return AggregateView(
        name="amounts",
        source=CdcSource(
            topic=table.topic,
            table=f"public.{table.table}",
            fields={"region": "string", "amount": "int", "created_at": "timestamp"},
        ),
        event_time="created_at",
        group_by=("region",),
        window="1 minute",
        allowed_lateness="1 hour",
        aggregations=(
            Aggregation(op="count", name="rows"),
            Aggregation(op="sum", column="amount", name="amount"),
        ),
    )


def table_rows(plan: JobPlan) -> list[tuple[Any, ...]]:
    found = query(str(table_path(plan)), "SELECT * FROM t ORDER BY window_start, region")
    return [(naive_utc(r["window_start"]), r["region"], r["rows"], r["amount"]) for r in found]  # type: ignore[index]


def naive_utc(moment: datetime) -> datetime:
    return moment.astimezone(UTC).replace(tzinfo=None) if moment.tzinfo else moment


def postgres_rows(table: CapturedTable) -> list[tuple[Any, ...]]:
    """The same aggregate by SQL over the table's rows now (window starts as naive UTC, as Delta's)."""
    found = table.pg.execute(
        f"SELECT date_trunc('minute', created_at AT TIME ZONE 'UTC'), region, count(*), sum(amount) "  # type: ignore[arg-type]
        f"FROM {table.table} GROUP BY 1, 2 ORDER BY 1, 2"
    ).fetchall()
    return [(w, region, n, int(total)) for w, region, n, total in found]


def same_as_postgres(plan: JobPlan, table: CapturedTable, expected: list[tuple[int, str, int, int]]) -> None:
    """The view's rows equal the SQL aggregate over the table now, and `expected` (window start in
    minutes after T0, region, rows, amount)."""
    assert table_rows(plan) == postgres_rows(table) == [(naive_utc(at(m)), *rest) for m, *rest in expected]


def insert(table: CapturedTable, *rows: tuple[int, str, int, float]) -> None:
    for id_, region, amount, minute in rows:
        table.pg.execute(
            f"INSERT INTO {table.table} VALUES (%s, %s, %s, %s)",  # type: ignore[arg-type]
            (id_, region, amount, at(minute)),
        )


def run_sql(table: CapturedTable, sql: str, *args: Any) -> None:
    table.pg.execute(sql.format(t=table.table), args)  # type: ignore[arg-type]


@pytest.fixture
def full_table(cdc_source: Callable[[str], CapturedTable]) -> CapturedTable:
    table = cdc_source(DDL)
    run_sql(table, "ALTER TABLE {t} REPLICA IDENTITY FULL")
    return table


@pytest.mark.parametrize("form", ["json", "avro"])
def test_updates_and_deletes_take_old_rows_back(
    spark: Any, full_table: CapturedTable, run_config: Any, endpoints: Any, stack: Any, form: str
) -> None:
    table = full_table
    insert(table, (1, "north", 10, 0.5), (2, "north", 5, 0.7), (3, "south", 7, 1.2))
    table.start(**(avro_converters(stack) if form == "avro" else {}))  # snapshot: 3 reads
    run_sql(table, "UPDATE {t} SET amount = 20 WHERE id = 1")  # the same window and group
    run_sql(table, "UPDATE {t} SET region = 'south' WHERE id = 2")  # another group
    run_sql(table, "UPDATE {t} SET created_at = %s WHERE id = 3", at(0.2))  # another window
    insert(table, (4, "east", 1, 2.5))
    run_sql(table, "DELETE FROM {t} WHERE id = 4")  # its window and group never hold a row
    insert(table, (5, "west", 3, 3.1))
    wait_for_end_offset(endpoints, table.topic, 3 + 3 + 1 + 2 + 1)
    plan = JobPlan.of(materializer(view_of(table)), run_config(topic=table.topic))

    first = drive(spark, plan)
    assert first.refused == 0 and first.late_dropped == 0
    same_as_postgres(plan, table, [(0, "north", 1, 20), (0, "south", 2, 12), (3, "west", 1, 3)])
    assert verify_aggregate(spark, plan).difference_count == 0

    # A restart from the checkpoint: a group emptied by a delete loses its row, a move fills another.
    run_sql(table, "DELETE FROM {t} WHERE id = 5")
    run_sql(table, "UPDATE {t} SET region = 'west', amount = 2 WHERE id = 1")
    wait_for_end_offset(endpoints, table.topic, 10 + 2 + 1)
    drive(spark, plan)
    same_as_postgres(plan, table, [(0, "south", 2, 12), (0, "west", 1, 2)])
    check = verify_aggregate(spark, plan)
    assert (check.difference_count, check.windows, check.refused) == (0, 2, 0)


def test_refused_without_full_replica_identity(
    spark: Any, cdc_source: Callable[[str], CapturedTable], run_config: Any, endpoints: Any
) -> None:
    table = cdc_source(DDL)  # REPLICA IDENTITY DEFAULT
    insert(table, (1, "north", 10, 0.5))
    table.start()
    wait_for_end_offset(endpoints, table.topic, 1)
    plan = JobPlan.of(materializer(view_of(table)), run_config(topic=table.topic))
    with pytest.raises(
        ReplicaIdentityNotFull, match=rf"ALTER TABLE public\.{table.table} REPLICA IDENTITY FULL"
    ):
        AggregateJob(spark, plan).start(parse_start("earliest"), available_now=True)
    assert not plan.checkpoint.exists() and not table_path(plan).exists()  # nothing written


def test_start_after_the_beginning_refused(
    spark: Any, full_table: CapturedTable, run_config: Any, endpoints: Any
) -> None:
    insert(full_table, (1, "north", 10, 0.5))
    full_table.start()
    wait_for_end_offset(endpoints, full_table.topic, 1)
    plan = JobPlan.of(materializer(view_of(full_table)), run_config(topic=full_table.topic))
    with pytest.raises(IncompleteHistory, match="--from earliest"):
        AggregateJob(spark, plan).start(parse_start("latest"), available_now=True)
    assert not plan.checkpoint.exists() and not table_path(plan).exists()


def test_change_without_before_image_is_a_dead_letter(
    spark: Any, full_table: CapturedTable, run_config: Any, endpoints: Any, producer: Any
) -> None:
    """An update that carries no before image (what Debezium sends for a table whose identity was
    lowered while the view ran; a start is refused then) is refused, counted and sent to the
    dead-letter topic with its offset; the rest is applied."""
    table = full_table
    plan = started(spark, table, run_config, endpoints, (1, "north", 10, 0.5), (2, "north", 5, 0.7))
    after = {"id": 1, "region": "north", "amount": 99, "created_at": at(0.5).isoformat()}
    produce_change(producer, table.topic, 1, {"before": None, "after": after, "op": "u"})
    insert(table, (3, "south", 4, 1.5))
    end = wait_for_end_offset(endpoints, table.topic, 2 + 1 + 1)
    final = drive(spark, plan)
    assert final.refused == 1 and final.dead_letters == 1
    assert table_rows(plan) == [
        (naive_utc(at(0)), "north", 2, 15),  # the update not applied, nothing taken back
        (naive_utc(at(1)), "south", 1, 4),
    ]
    letters = read_all(endpoints, plan.dlq_topic)
    assert len(letters) == 1
    headers = {k: v.decode() for k, v in letters[0].headers()}
    assert headers["dlq-source-offset"] == str(end - 2)
    assert "REPLICA IDENTITY FULL" in headers["dlq-error"]


def started(
    spark: Any, table: CapturedTable, run_config: Any, endpoints: Any, *rows: tuple[int, str, int, float]
) -> JobPlan:
    """`rows` inserted and snapshot by the connector, then one run of the view over them."""
    insert(table, *rows)
    table.start()
    wait_for_end_offset(endpoints, table.topic, len(rows))
    plan = JobPlan.of(materializer(view_of(table)), run_config(topic=table.topic))
    drive(spark, plan)
    return plan


def produce_change(producer: Any, topic: str, key: int, change: dict[str, Any]) -> None:
    """A Debezium change in JSON without schemas, as a connector would write it."""
    payload = {"source": {"lsn": 10**12, "ts_ms": 1}, "ts_ms": 1, **change}
    producer.produce(topic, key=json.dumps({"id": key}).encode(), value=json.dumps(payload).encode())
    producer.flush()


def test_taking_back_a_row_never_added_stops_the_view(
    spark: Any, full_table: CapturedTable, run_config: Any, endpoints: Any, producer: Any
) -> None:
    """A delete of a row the topic never added (as after a compaction removed the insert): the view
    refuses the batch with IncompleteHistory and writes nothing of it."""
    table = full_table
    plan = started(spark, table, run_config, endpoints, (1, "north", 10, 0.5))
    before = {"id": 9, "region": "north", "amount": 3, "created_at": at(5).isoformat()}
    produce_change(producer, table.topic, 9, {"before": before, "after": None, "op": "d"})
    code = driver_loop.run([AggregateJob(spark, plan)], parse_start("earliest"), available_now=True)
    final = status.read(plan.job_dir)
    assert code != 0 and final is not None and "IncompleteHistory" in (final.last_error or "")
    assert "fewer than 0 rows" in (final.last_error or "")
    assert table_rows(plan) == [(naive_utc(at(0)), "north", 1, 10)]


def test_a_row_refused_for_its_time_is_refused_once(
    spark: Any, full_table: CapturedTable, run_config: Any, endpoints: Any, producer: Any
) -> None:
    """A row without an event time is refused when added and counted once per change that adds it:
    an update refused in both images is one refusal, one dead letter; taking such a row back (its
    update's old image, its delete) is skipped, as its adding was, and not reported again."""
    table = full_table
    plan = started(spark, table, run_config, endpoints, (1, "north", 10, 0.5))
    untimed = {"id": 7, "region": "north", "amount": 3, "created_at": None}
    produce_change(producer, table.topic, 7, {"before": None, "after": untimed, "op": "c"})
    produce_change(
        producer, table.topic, 7, {"before": untimed, "after": {**untimed, "amount": 4}, "op": "u"}
    )
    produce_change(producer, table.topic, 7, {"before": {**untimed, "amount": 4}, "after": None, "op": "d"})
    end = wait_for_end_offset(endpoints, table.topic, 1 + 3)
    final = drive(spark, plan)
    assert final.refused == 2 and final.dead_letters == 2
    assert table_rows(plan) == [(naive_utc(at(0)), "north", 1, 10)]
    letters = read_all(endpoints, plan.dlq_topic)
    assert sorted(int(dict(m.headers())["dlq-source-offset"]) for m in letters) == [end - 3, end - 2]
    assert all(b"no event time" in dict(m.headers())["dlq-error"] for m in letters)
    check = verify_aggregate(spark, plan)
    assert (check.difference_count, check.refused, check.counted_refused) == (0, 2, 2)
