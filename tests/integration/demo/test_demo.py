"""The demo at a tiny scale, on the session's stack, so `make demo` cannot rot."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

from cdc.change_event import ChangeEvent, decode_record
from cdc.registry_client import RegistryClient
from demo.report import write_report
from demo.run import DemoConfig, run
from devstack.session import StackHandle

pytestmark = pytest.mark.integration


def test_demo_at_tiny_scale_passes_every_check(stack: StackHandle, tmp_path: Path) -> None:
    cfg = DemoConfig.from_args(["--scale", "0.05", "--report-dir", str(tmp_path / "report")])
    summary = run(stack, cfg)
    assert summary.checks and all(summary.checks.values()), summary.checks
    assert summary.commands["accepted"] > 0 and summary.commands["deduplicated retries"] > 0
    assert summary.commands["refused: version conflict"] > 0 and summary.commands["refused: invalid"] > 0
    assert all(count > 0 for count in summary.records_per_topic.values())
    assert set(summary.latency_ms) == {"cache", "search", "warehouse"}  # each view probed
    assert all(0 < v["p50"] <= v["p99"] for v in summary.latency_ms.values())
    # Where the restart's time went, read from the driver's timeline: every phase, in order.
    phases = summary.recovery_phases["products"]
    assert 0 <= phases["process_s"] < phases["session_s"] < phases["query_s"] < phases["batch_s"]
    assert summary.steady_batches["products"]["batches"] > 0
    assert summary.recovery_s is not None and summary.recovery_s > 0  # the driver was killed and came back
    plot = write_report(cfg.report_dir, summary)
    assert plot.stat().st_size > 10_000
    written = json.loads((cfg.report_dir / "summary.json").read_text())
    assert written["passed"] is True and written["view_sizes"] == summary.view_sizes
    # The shop is captured in the default format, Avro, which the checks above read through every view.
    products = next(t for t in summary.records_per_topic if t.endswith(f"{cfg.schema}.products"))
    _first_product_is_typed_avro(stack, products)


def _first_product_is_typed_avro(stack: StackHandle, topic: str) -> None:
    consumer = Consumer({"bootstrap.servers": stack.kafka_bootstrap_servers, "group.id": "demo-test"})
    try:
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        msg = consumer.poll(30)
    finally:
        consumer.close()
    assert msg is not None and not msg.error()
    value = msg.value()
    assert value is not None and value[:1] == b"\0"  # Confluent framing: Avro from the registry
    with RegistryClient(stack.schema_registry_url) as registry:
        change = decode_record(
            topic=topic, partition=0, offset=0, key=msg.key(), value=value, schemas=registry
        )
    assert isinstance(change, ChangeEvent) and change.after is not None
    assert isinstance(change.after["price"], Decimal)  # numeric(12,2), typed by the writer schema
