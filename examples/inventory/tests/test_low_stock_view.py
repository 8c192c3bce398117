"""The project's own materializer on the real stack, through the toolkit's pytest plugin: a table of
its own captured by Debezium (`connector_factory`), the low-stock view kept by a driver process
(`materializer_factory`), the driver killed with -9 (`process_groups`) while the table changes, and
the view exact once a new driver caught up."""

from __future__ import annotations

import uuid
from typing import Any

import psycopg
import pytest

from devstack.crash import wait_until
from inventory.low_stock import LOW_STOCK, TABLE_DDL, LowStock
from materializers import verify


@pytest.fixture
def stock_table(toolkit_stack: Any) -> Any:
    """A `stock_levels` table of this test's own (dropped afterwards) and a connection to write it."""
    table = f"public.stock_levels_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(toolkit_stack.pg_dsn, autocommit=True) as pg:
        pg.execute(f"CREATE TABLE {table} ({TABLE_DDL})")
        try:
            yield table, pg
        finally:
            pg.execute(f"DROP TABLE IF EXISTS {table}")


def test_the_low_stock_view_is_exact_after_its_driver_is_killed(
    stock_table: Any, connector_factory: Any, materializer_factory: Any, process_groups: Any
) -> None:
    table, pg = stock_table
    pg.execute(f"INSERT INTO {table} VALUES ('A', 10, 5), ('B', 2, 5), ('C', 0, 0)")
    spec = connector_factory.start(connector_factory.spec([table]))  # snapshot read, then streaming
    run = materializer_factory.start(LOW_STOCK, topic=spec.topic_for(table), table=table)
    materializer_factory.wait_caught_up(run)  # everything in the topic now is in the view
    view = LowStock.for_plan(run.plan)  # the view as the driver keeps it: same Redis, same prefix
    assert view.members() == {"B", "C"}

    process_groups.crash(run.process)  # kill -9 of the driver and its JVM
    pg.execute(f"UPDATE {table} SET on_hand = 3 WHERE id = 'A'")  # now low
    pg.execute(f"UPDATE {table} SET on_hand = 50 WHERE id = 'B'")  # restocked
    pg.execute(f"DELETE FROM {table} WHERE id = 'C'")  # discontinued
    pg.execute(f"INSERT INTO {table} VALUES ('D', 1, 2)")
    pg.execute(f"UPDATE {table} SET reorder_point = 0 WHERE id = 'D'")  # D is no longer low
    materializer_factory.restart(run)  # the same checkpoint and view: continues where it was killed
    wait_until(
        lambda: view.members() == {"A"},
        timeout_s=180,
        what="the changes made while it was down",
        process=run.process,
    )
    materializer_factory.wait_caught_up(run)  # and nothing after them changed it again
    assert view.members() == {"A"}
    assert [str(d) for d in verify(run.plan)] == []  # the view's own comparison with the table
    assert materializer_factory.stop(run) == 0  # SIGTERM: finishes its batch, exits cleanly
