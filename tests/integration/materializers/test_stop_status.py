"""`stop` mid-batch: the batch finishes and commits, the driver exits; a restart reads only new records.

While the job runs, `status` shows it in its table and `snapshot`/`restore` refuse to touch its views.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import wait_for_failpoint
from records import debezium, produce
from view_state import redis_state

from kafkakit.positions import parse_start
from materializers.cli import main
from materializers.config import ENV_FAILPOINT
from materializers.runtime import checkpoint, status
from materializers.runtime.job import Job, JobPlan
from materializers.views.warehouse.delta import query
from shop.products import PRODUCTS

pytestmark = pytest.mark.integration


def row(i: int, stock: int) -> dict[str, Any]:
    return {"name": f"p{i}", "description": "d", "price": "1.00", "stock": stock}


def test_graceful_stop_then_restart_without_duplicates(
    spark: Any, topics: Any, producer: Any, run_config: Any, endpoints: Any, tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    topic = topics("mat-stop")
    produce(producer, topic, [debezium(i, 100 + i, "c", row(i, 1)) for i in range(1, 21)])
    config = run_config(topic=topic)
    plan = JobPlan.of(PRODUCTS, config)
    home = ["--home", str(config.home)]
    marker = tmp_path / "in-flight"
    log = tmp_path / "driver.log"  # a file, not a pipe: an undrained pipe would block the driver
    env = {**os.environ, **endpoints.as_env(), ENV_FAILPOINT: f"before-views:{marker}:until-stop"}
    job = subprocess.Popen(
        [sys.executable, "-m", "materializers.cli", *home, "start", "products", "--topic", topic,
         "--redis-prefix", config.redis_prefix, "--from", "earliest", "--trigger", "500ms"],
        env=env, start_new_session=True, stdout=subprocess.DEVNULL, stderr=log.open("w"),
    )  # fmt: skip
    try:
        wait_for_failpoint(marker, job)
        deadline = time.monotonic() + 60
        while status.read(plan.job_dir).state != "running" and time.monotonic() < deadline:  # type: ignore[union-attr]
            time.sleep(0.2)  # the driver publishes "running" once its loop has polled the query

        # A batch is in flight: the status table shows the job; snapshot/restore refuse, change nothing.
        assert main([*home, "status"]) == 0
        header, line = capsys.readouterr().out.splitlines()[:2]
        assert header.startswith("NAME") and "LAG" in header and line.split()[:2] == ["products", "running"]
        before = (redis_state(plan), sorted(p.name for p in plan.checkpoint.rglob("*")))
        for argv in (["snapshot", "products"], ["restore", "products", "any-id"]):
            assert main([*home, *argv, "--topic", topic, "--redis-prefix", config.redis_prefix]) == 2
            assert "`materializers stop products`" in capsys.readouterr().err
        assert (redis_state(plan), sorted(p.name for p in plan.checkpoint.rglob("*"))) == before
        assert not (plan.job_dir / "snapshots").exists()

        assert main([*home, "stop", "products", "--timeout", "180"]) == 0
        assert "products: stopped" in capsys.readouterr().out
        assert job.wait(30) == 0, log.read_text()[-3000:]
    finally:
        if job.poll() is None:
            os.killpg(job.pid, signal.SIGKILL)
            job.wait(30)

    # The in-flight batch finished and was committed before the driver exited.
    done = checkpoint.committed(plan.checkpoint)
    assert (done.batch_id, done.planned_batch_id, done.offsets) == (0, 0, {topic: {"0": 20}})
    assert len(plan.cache().entities()) == 20
    assert main([*home, "status"]) == 0
    assert capsys.readouterr().out.splitlines()[1].split()[:3] == ["products", "stopped", "0"]

    # Restart: only the 10 new records are read; no row is written twice.
    produce(producer, topic, [debezium(i, 300 + i, "u", row(i, 2)) for i in range(16, 26)])
    query_ = Job(spark, plan).start(parse_start("earliest"), available_now=True)
    query_.awaitTermination(240)
    assert query_.exception() is None and not query_.isActive
    assert sum(p["numInputRows"] for p in query_.recentProgress) == 10
    assert checkpoint.committed(plan.checkpoint).offsets == {topic: {"0": 30}}
    history = query(
        plan.warehouse().history_path, "SELECT count(*) AS n, count(DISTINCT entity || position) AS d FROM t"
    )
    assert history == [{"n": 30, "d": 30}]
    assert len(plan.cache().entities()) == 25
    assert plan.cache().read("20") == {"name": "p20", "description": "d", "price": "1.00", "stock": "2"}
    plan.cache().clear()
