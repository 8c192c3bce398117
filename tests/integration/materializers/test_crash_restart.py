"""kill -9 a driver after it wrote every view but before Spark committed the batch; restart it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import crash_at_failpoint
from records import debezium

from materializers.decode import positions
from materializers.runtime.job import JobPlan
from materializers.views.warehouse.delta import query
from shop.products import PRODUCTS

pytestmark = pytest.mark.integration


def cli(config: Any, topic: str, *extra: str) -> list[str]:
    return [
        sys.executable, "-m", "materializers.cli", "--home", str(config.home), "start", "products",
        "--topic", topic, "--redis-prefix", config.redis_prefix, "--from", "earliest", "--available-now", *extra,
    ]  # fmt: skip


def test_kill_mid_batch_then_restart(
    topics: Any, producer: Any, run_config: Any, endpoints: Any, tmp_path: Path
) -> None:
    topic = topics("mat-crash")
    records = [
        debezium(i, 100 + i, "c", {"name": f"p{i}", "description": "d", "price": "2.00", "stock": i})
        for i in range(1, 6)
    ]
    records += [
        debezium(2, 200, "d", None),
        debezium(3, 300, "u", {"name": "p3b", "description": "d", "price": "3.00", "stock": 3}),
    ]
    for key, value in records:
        producer.produce(topic, key=key, value=value)
    producer.flush()
    config = run_config()
    env = {**os.environ, **endpoints.as_env()}
    marker = tmp_path / "reached"
    crash_at_failpoint(cli(config, topic), env, "after-views", marker)
    plan = JobPlan.of(PRODUCTS, config.with_overrides(topic=topic))
    assert not (plan.checkpoint / "commits" / "0").exists()  # the batch was never committed

    restarted = subprocess.run(cli(config, topic), env=env, capture_output=True, text=True, timeout=240)
    assert restarted.returncode == 0, restarted.stderr[-3000:]

    cache = plan.cache()
    assert cache.read("2") is None and cache.position("2") == positions.cdc(
        200, snapshot=False
    )  # not resurrected
    assert cache.read("3") == {"name": "p3b", "description": "d", "price": "3.00", "stock": "3"}
    assert set(cache.entities()) == {"1", "3", "4", "5"}
    history = query(
        plan.warehouse().history_path, "SELECT count(*) AS n, count(DISTINCT entity || position) AS d FROM t"
    )[0]
    assert history == {"n": 7, "d": 7}
    current = query(plan.warehouse().current_path, "SELECT entity FROM t WHERE NOT deleted ORDER BY entity")
    assert [r["entity"] for r in current] == ["1", "3", "4", "5"]
    index = plan.search()
    assert index is not None and set(index.live_documents()) == {"1", "3", "4", "5"}
    shown = subprocess.run(
        [sys.executable, "-m", "materializers.cli", "--home", str(config.home), "status", "--json"],
        env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    (job,) = json.loads(shown.stdout)
    assert (
        job["name"] == "products"
        and job["state"] == "stopped"
        and job["total_lag"] == 0
        and job["dead_letters"] == 0
    )
