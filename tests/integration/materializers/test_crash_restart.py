"""kill -9 a driver after it wrote every view but before Spark committed the batch; restart it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import wait_for_failpoint
from records import debezium

from materializers import positions
from materializers.config import ENV_FAILPOINT
from materializers.job import JobPlan
from materializers.products import PRODUCTS
from materializers.views.delta_warehouse import query

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
    crashing = subprocess.Popen(
        cli(config, topic), env={**env, ENV_FAILPOINT: f"after-views:{marker}"}, start_new_session=True,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        wait_for_failpoint(marker, crashing)
    finally:
        os.killpg(crashing.pid, signal.SIGKILL)  # the driver and its JVM: a hard crash
        crashing.wait(30)
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
