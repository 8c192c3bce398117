"""The driver's JIT is chosen from the records it has to read at the start (`lag.backlog`, measured on
the real broker): from the checkpoint once it has committed a batch, else from the start position."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from conftest import run_once
from records import debezium

from kafkakit.positions import parse_start, parse_timestamp
from materializers import launch
from materializers.errors import SourceUnavailable
from materializers.ops import lag
from materializers.runtime import timeline
from materializers.runtime.job import JobPlan
from materializers.spark import session as spark_session
from shop.products import PRODUCTS

pytestmark = pytest.mark.integration

ROW = {"name": "p", "description": "d", "price": "1.00", "stock": 1}


def produce(producer: Any, topic: str, first: int, count: int) -> None:
    for i in range(first, first + count):
        key, value = debezium(i, 100 + i, "c", {**ROW, "stock": i})
        producer.produce(topic, key=key, value=value)
    assert producer.flush(30) == 0


def test_the_backlog_counts_from_the_start_position_then_from_the_checkpoint(
    spark: Any, topics: Any, producer: Any, run_config: Any
) -> None:
    topic = topics("mat-jit")
    produce(producer, topic, 1, 6)
    plan = JobPlan.of(PRODUCTS, run_config(topic=topic))
    try:
        assert lag.backlog(plan, parse_start("earliest")) == 6
        assert lag.backlog(plan, parse_start("latest")) == 0
        assert lag.backlog(plan, parse_start("0:2")) == 4
        assert lag.backlog(plan, parse_timestamp("2000-01-01T00:00:00Z")) == 6
        assert lag.backlog(plan, parse_timestamp("2999-01-01T00:00:00Z")) == 0  # nothing that new
        assert run_once(spark, plan).dead_letters == 0
        produce(producer, topic, 7, 3)
        # a checkpoint that committed a batch resumes there: the start position no longer counts
        assert lag.backlog(plan, parse_start("earliest")) == 3
        assert lag.backlog(plan, parse_start("latest")) == 3
        # ... but not for a rebuild's new generation, which reads from the start position again
        assert lag.backlog(plan, parse_start("earliest"), fresh=True) == 9
    finally:
        plan.cache().clear()


def test_a_backlog_that_cannot_be_measured_is_unknown_and_fails_nothing(run_config: Any, uid: str) -> None:
    plan = JobPlan.of(PRODUCTS, run_config(topic=f"mat-jit-missing-{uid}"))
    with pytest.raises(SourceUnavailable, match=rf"input topic 'mat-jit-missing-{uid}' does not exist"):
        lag.backlog(plan, parse_start("earliest"))
    assert launch.backlog([plan], parse_start("earliest")) is None  # the JIT is chosen without it


def test_a_driver_starting_far_behind_takes_the_full_jit_and_says_so_in_its_timeline(
    spark: Any, topics: Any, producer: Any, run_config: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The choice, the backlog it came from and the JVM's collectors, as `materializers start` records
    them (the test's JVM already runs, so its flags stay as they are: test_driver_jvm checks that they
    take effect)."""
    monkeypatch.delenv(spark_session.ENV_DRIVER_JIT, raising=False)
    monkeypatch.setattr(spark_session, "FULL_JIT_BACKLOG", 5)
    topic = topics("mat-jit-start")
    produce(producer, topic, 1, 6)
    plan = JobPlan.of(PRODUCTS, run_config(topic=topic))
    code: list[int] = []

    def start() -> None:  # a thread: the runner's signal handlers stay out of pytest's main thread
        code.append(launch.start_plans([plan], parse_start("earliest"), available_now=True))

    try:
        driver = threading.Thread(target=start)
        driver.start()
        driver.join(240)
        assert not driver.is_alive() and code == [0]
        assert plan.cache().read("6") == {**{k: str(v) for k, v in ROW.items()}, "stock": "6"}
        again = threading.Thread(target=start)  # caught up: 0 behind, the quick JIT
        again.start()
        again.join(240)
        assert not again.is_alive() and code == [0, 0]
    finally:
        plan.cache().clear()
    sessions = [e for e in timeline.read(plan.job_dir) if e["event"] == "session"]
    assert [(e["jit"], e["backlog"]) for e in sessions] == [("full", 6), ("quick", 0)]
    assert [e["heap"] for e in sessions] == [spark_session.driver_heap(spark)] * 2  # the session's JVM
    collectors = spark_session.driver_collectors(spark)
    assert collectors and all(isinstance(c, str) for c in collectors)  # e.g. "G1 Young Generation"
    assert [e["gc"] for e in sessions] == [collectors] * 2
