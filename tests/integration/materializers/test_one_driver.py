"""Several materializers in one Spark driver: a query each, isolated from each other's failure."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from records import debezium, produce

from kafkakit.positions import parse_start
from materializers.runtime import driver_loop, lifecycle, status
from materializers.runtime.job import Job, JobPlan
from shop.products import PRODUCTS

pytestmark = pytest.mark.integration


def row(i: int) -> dict[str, Any]:
    return {"name": f"p{i}", "description": "d", "price": "1.00", "stock": i}


def wait_for(what: str, ok: Callable[[], bool], timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not ok():
        assert time.monotonic() < deadline, f"{what}: not within {timeout}s"
        time.sleep(0.3)


def test_a_failing_query_leaves_the_other_running(
    spark: Any, topics: Any, producer: Any, run_config: Any, tmp_path: Any
) -> None:
    healthy_topic, failing_topic = topics("mat-one-ok"), topics("mat-one-bad")
    for topic in (healthy_topic, failing_topic):
        produce(producer, topic, [debezium(i, 100 + i, "c", row(i)) for i in range(1, 4)])
    healthy = JobPlan.of(PRODUCTS, run_config(topic=healthy_topic, trigger="500ms"))
    failing = JobPlan.of(
        PRODUCTS,
        run_config(
            topic=failing_topic,
            trigger="500ms",
            home=tmp_path / "other",
            redis_prefix=f"{healthy.config.redis_prefix}-b",
        ),
    )
    jobs = [Job(spark, healthy), Job(spark, failing)]

    def boom(_batch: Any, _batch_id: int) -> None:
        raise RuntimeError("a view refused the batch")

    jobs[1].process_batch = boom  # type: ignore[method-assign]
    code: list[int] = []
    driver = threading.Thread(target=lambda: code.append(driver_loop.run(jobs, parse_start("earliest"))))
    driver.start()
    try:
        wait_for(
            "the failing query reported",
            lambda: getattr(status.read(failing.job_dir), "state", "") == "failed",
        )
        failed = status.read(failing.job_dir)
        assert failed is not None and "a view refused the batch" in failed.last_error
        # The healthy query keeps reading: records written after the other failed reach its view.
        produce(producer, healthy_topic, [debezium(i, 200 + i, "c", row(i)) for i in range(4, 7)])
        wait_for("the healthy view caught up", lambda: len(healthy.cache().entities()) == 6)
        alive = status.read(healthy.job_dir)
        assert alive is not None and alive.state == "running" and alive.pid == failed.pid  # one driver
    finally:
        lifecycle.stop_file(healthy.job_dir).touch()  # stops that query only, after its batch
        driver.join(180)
    assert not driver.is_alive() and code == [1]  # one query failed
    final = status.read(healthy.job_dir)
    assert final is not None and final.state == "stopped" and final.last_error == ""
    healthy.cache().clear()
    failing.cache().clear()
