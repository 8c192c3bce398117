"""The Postgres read-model view, kept through the View protocol alone: guarded upserts (late, duplicate
and replayed changes never win), tombstones (a delete is not resurrected), unchanged TOAST values
kept, on both batch paths and both write paths (VALUES and COPY into a staging table); a batch
re-run whole (what a crash leads to: a replay from a new checkpoint re-applies every change, a
stronger case) changes nothing."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import psycopg
import pytest
from conftest import run_once
from records import debezium

from materializers.runtime.job import JobPlan
from materializers.truth import Truth
from materializers.views import read_model as postgres_table
from materializers.views.read_model import PostgresTable, read_model
from shop.products import PRODUCTS

pytestmark = pytest.mark.integration


def row(name: str) -> dict[str, Any]:
    return {"name": name, "description": f"{name} desc", "price": "1.00", "stock": 1}


def table_state(dsn: str, table: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(dsn) as conn:
        return conn.execute(
            f"SELECT key, position, deleted, name, description FROM {table} ORDER BY key"
        ).fetchall()  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("small_batch_rows", "copy_rows"), [("10000", 1000), ("0", 0)], ids=["driver-values", "executors-copy"]
)
def test_read_model_is_guarded_by_position(
    spark: Any,
    topics: Any,
    producer: Any,
    run_config: Any,
    endpoints: Any,
    uid: str,
    tmp_path: Any,
    monkeypatch: pytest.MonkeyPatch,
    small_batch_rows: str,
    copy_rows: int,
) -> None:
    monkeypatch.setattr(postgres_table, "COPY_ROWS", copy_rows)
    table = f"mv_test_{uid}"
    spec = replace(PRODUCTS, name="products_pg", builtin_views=("cache",), views=(read_model(table),))
    topic = topics("mat-pg-view")

    def produce(records: list[tuple[bytes, bytes]]) -> None:
        for key, value in records:
            producer.produce(topic, key=key, value=value)
        producer.flush()

    produce([debezium(1, 300, "u", row("v300"))])
    plan = JobPlan.of(spec, run_config(topic=topic, small_batch_rows=small_batch_rows))
    try:
        first = run_once(spark, plan)  # the query's first batch; the next is of known size
        produce(
            [
                debezium(1, 200, "u", row("v200")),  # late: never wins
                debezium(2, 100, "c", row("two")),
                debezium(2, 500, "d", None),  # a tombstone
                debezium(3, 600, "c", row("three")),
                debezium(1, 400, "u", row("v400"), unavailable=("description",)),  # TOAST kept
                debezium(1, 300, "u", row("v300")),  # a duplicate
            ]
        )
        job = run_once(spark, plan, job=first)
        [view] = [v for v in job.views if isinstance(v, PostgresTable)]
        assert "postgres" in job.clock.take(1)
        expected = {
            "1": {"name": "v400", "description": "v300 desc", "price": "1.00", "stock": "1"},
            "3": {"name": "three", "description": "three desc", "price": "1.00", "stock": "1"},
        }
        assert view.verify(Truth(kind="cdc", rows=expected)) == []
        state = table_state(endpoints.pg_dsn, table)
        assert [(r[0], r[2]) for r in state] == [("1", False), ("2", True), ("3", False)]

        # A late create of the deleted entity, then the whole topic replayed by a new checkpoint (a
        # new app id: nothing batch-keyed helps here, only the positions): nothing changes.
        produce([debezium(2, 50, "c", row("resurrected?"))])
        run_once(spark, JobPlan.of(spec, run_config(topic=topic, checkpoint=str(tmp_path / "replay"))))
        assert table_state(endpoints.pg_dsn, table) == state
        assert view.verify(Truth(kind="cdc", rows=expected)) == []
    finally:
        with psycopg.connect(endpoints.pg_dsn, autocommit=True) as conn:
            conn.execute(f"DROP TABLE IF EXISTS {table}")  # type: ignore[arg-type]
