"""kill -9 a driver keeping the Postgres read model after the view wrote its batch but before Spark
committed it; the restarted driver re-runs the batch and the table is exact (as for the other views,
test_crash_restart.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import psycopg
import pytest
from conftest import crash_at_failpoint
from records import debezium

from materializers.decode import positions
from materializers.plan import JobPlan
from materializers.views.read_model import read_model
from shop.products import PRODUCTS

pytestmark = pytest.mark.integration
TABLE = "mv_products_pg_crash"
# Loaded by the driver process as `test_postgres_view_crash:PRODUCTS_PG` (this directory on its path).
PRODUCTS_PG = replace(PRODUCTS, name="products_pg_crash", builtin_views=(), views=(read_model(TABLE),))


def cli(config: Any, topic: str) -> list[str]:
    return [
        sys.executable, "-m", "materializers.cli", "--home", str(config.home), "start",
        f"{__name__}:PRODUCTS_PG", "--topic", topic, "--redis-prefix", config.redis_prefix,
        "--from", "earliest", "--available-now",
    ]  # fmt: skip


def test_kill_after_the_read_model_wrote_then_restart(
    topics: Any, producer: Any, run_config: Any, endpoints: Any, tmp_path: Path
) -> None:
    with psycopg.connect(endpoints.pg_dsn, autocommit=True) as conn:
        conn.execute(f"DROP TABLE IF EXISTS {TABLE}")  # type: ignore[arg-type]
    topic = topics("mat-pg-crash")
    row = {"description": "d", "price": "2.00", "stock": 1}
    records = [debezium(i, 100 + i, "c", {"name": f"p{i}", **row}) for i in range(1, 6)]
    records += [debezium(2, 200, "d", None), debezium(3, 300, "u", {"name": "p3b", **row})]
    for key, value in records:
        producer.produce(topic, key=key, value=value)
    producer.flush()
    config = run_config()
    env = {**os.environ, **endpoints.as_env(), "PYTHONPATH": str(Path(__file__).parent)}
    marker = tmp_path / "reached"
    crash_at_failpoint(cli(config, topic), env, "after-postgres", marker)
    plan = JobPlan.of(PRODUCTS_PG, config.with_overrides(topic=topic))
    assert not (plan.checkpoint / "commits" / "0").exists()  # the batch was written, never committed
    restarted = subprocess.run(cli(config, topic), env=env, capture_output=True, text=True, timeout=240)
    assert restarted.returncode == 0, restarted.stderr[-3000:]
    with psycopg.connect(endpoints.pg_dsn) as conn:
        rows = conn.execute(f"SELECT key, position, deleted, name FROM {TABLE} ORDER BY key").fetchall()  # type: ignore[arg-type]
        conn.execute(f"DROP TABLE {TABLE}")  # type: ignore[arg-type]
        conn.commit()
    cdc = positions.cdc
    assert rows == [
        ("1", cdc(101, snapshot=False), False, "p1"),
        ("2", cdc(200, snapshot=False), True, None),  # a tombstone: the delete's position is kept
        ("3", cdc(300, snapshot=False), False, "p3b"),
        ("4", cdc(104, snapshot=False), False, "p4"),
        ("5", cdc(105, snapshot=False), False, "p5"),
    ]
