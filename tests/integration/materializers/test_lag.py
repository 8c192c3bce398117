"""Lag as a user has it: records no committed batch has reached, measured against the topic's end.

Spark's progress always showed 0 (an uncapped batch ends at the latest offset it planned), and a
stopped driver publishes nothing; `materializers status` measures it from the checkpoint instead.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from records import debezium, produce

from kafkakit.positions import parse_start
from materializers.cli import main
from materializers.runtime.job import Job, JobPlan
from shop.products import PRODUCTS

pytestmark = pytest.mark.integration


def row(i: int) -> dict[str, Any]:
    return {"name": f"p{i}", "description": "d", "price": "1.00", "stock": i}


def test_status_counts_the_records_a_stopped_job_has_not_read(
    spark: Any, topics: Any, producer: Any, run_config: Any, endpoints: Any,
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    for key, value in endpoints.as_env().items():
        monkeypatch.setenv(key, value)
    topic = topics("mat-lag")
    produce(producer, topic, [debezium(i, 100 + i, "c", row(i)) for i in range(1, 11)])
    config = run_config(topic=topic)
    plan = JobPlan.of(PRODUCTS, config)
    home = ["--home", str(config.home)]

    def shown() -> dict[str, Any]:
        assert main([*home, "status", "--json"]) == 0
        (job,) = json.loads(capsys.readouterr().out)
        return {k: job[k] for k in ("state", "total_lag", "lag")}

    assert Job(spark, plan).run(parse_start("earliest"), available_now=True) == 0
    assert shown() == {"state": "stopped", "total_lag": 0, "lag": {f"{topic}[0]": 0}}

    # A burst while no driver runs: every record of it is lag until a batch commits past it.
    produce(producer, topic, [debezium(i, 200 + i, "u", row(i)) for i in range(1, 8)])
    assert shown() == {"state": "stopped", "total_lag": 7, "lag": {f"{topic}[0]": 7}}
    assert main([*home, "status"]) == 0
    assert capsys.readouterr().out.splitlines()[1].split()[:4] == ["products", "stopped", "0", "7"]

    assert Job(spark, plan).run(parse_start("earliest"), available_now=True) == 0
    assert shown()["total_lag"] == 0
    plan.cache().clear()
