"""Pure and file-only parts of snapshots, restore and rebuild: no services needed."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from kafkakit.positions import Offsets
from materializers.config import RunConfig
from materializers.errors import CheckpointMismatch, JobRunning, SnapshotMismatch, SnapshotNotFound
from materializers.ops import generations, snapshots
from materializers.runtime import checkpoint, status
from materializers.runtime.job import JobPlan, pinned_start, reset_checkpoint
from materializers.runtime.lifecycle import refuse_if_running
from materializers.views.redis_cache import pack_entry, unpack_entries
from shop.orders import ORDERS
from shop.products import PRODUCTS

OFFSETS_FILE = 'v1\n{"batchWatermarkMs":0,"batchTimestampMs":1,"conf":{}}\n{"t":{"0":3,"1":7}}'


def write_batches(ckpt: Path, planned: dict[int, int], committed: list[int]) -> None:
    (ckpt / "offsets").mkdir(parents=True)
    (ckpt / "commits").mkdir()
    for batch, end in planned.items():
        (ckpt / "offsets" / str(batch)).write_text(OFFSETS_FILE.replace('"0":3', f'"0":{end}'))
        (ckpt / "offsets" / f".{batch}.crc").write_text("x")
    for batch in committed:
        (ckpt / "commits" / str(batch)).write_text('v1\n{"nextBatchWatermarkMs":0}')


def test_parse_offsets() -> None:
    assert checkpoint.parse_offsets(OFFSETS_FILE) == {"t": {"0": 3, "1": 7}}
    with pytest.raises(CheckpointMismatch, match="new checkpoint"):
        checkpoint.parse_offsets("v1\n{}")


def test_committed_is_the_last_batch_with_a_commit(tmp_path: Path) -> None:
    assert checkpoint.committed(tmp_path) == checkpoint.Committed(-1, {}, -1)
    write_batches(tmp_path, {0: 3, 1: 5, 2: 9}, [0, 1])  # batch 2 planned, never committed
    assert checkpoint.committed(tmp_path) == checkpoint.Committed(1, {"t": {"0": 5, "1": 7}}, 2)


def test_lag() -> None:
    assert checkpoint.lag({"t": {"0": 5}}, {"t": {"0": 9, "1": 2}}) == 6
    assert checkpoint.lag({"t": {"0": 9}}, {"t": {"0": 9}}) == 0


def test_dump_entries_round_trip_and_truncation() -> None:
    data = pack_entry(b"1", b"\x00payload") + pack_entry(b"entity-2", b"")
    assert list(unpack_entries(data)) == [(b"1", b"\x00payload"), (b"entity-2", b"")]
    with pytest.raises(ValueError, match="truncated"):
        list(unpack_entries(data[:-3] + b"\x00\x00\x00\x09"))


def test_manifest_round_trip() -> None:
    manifest = snapshots.Manifest(
        id="x", materializer="products", topic="t", generation="", app_id="a", created_at=1.0,
        committed_batch=3, offsets={"t": {"0": 9}}, redis_keys=4, search=True, delta_versions={"history": 2},
    )  # fmt: skip
    assert snapshots.Manifest.from_json(manifest.to_json()) == manifest


def test_generation_layout(tmp_path: Path) -> None:
    config = RunConfig(home=tmp_path, redis_prefix="mat")
    original = JobPlan.of(PRODUCTS, config)
    assert (original.redis_prefix, original.checkpoint) == (
        "mat:products",
        tmp_path / "products" / "checkpoint",
    )
    rebuilt = JobPlan.of(PRODUCTS, config, "g1")
    assert rebuilt.redis_prefix == "mat:products@g1" and rebuilt.base_prefix == "mat:products"
    assert rebuilt.warehouse().root == tmp_path / "products" / "generations" / "g1" / "delta"
    assert generations.live_generation(original.job_dir) == ""
    original.job_dir.mkdir()
    (original.job_dir / generations.POINTER_FILE).write_text(json.dumps({"generation": "g1"}))
    assert generations.resolve(PRODUCTS, config).view_dir == rebuilt.view_dir


def test_reset_checkpoint_pins_start_until_a_commit(tmp_path: Path) -> None:
    plan = JobPlan.of(PRODUCTS, RunConfig(home=tmp_path, topic="t"))
    write_batches(plan.checkpoint, {0: 3}, [0])
    reset_checkpoint(plan, {"t": {"0": 3}}, note="test")
    assert not (plan.checkpoint / "offsets").exists()
    assert pinned_start(plan) == Offsets((("t", 0, 3),))
    write_batches(plan.checkpoint, {0: 5}, [0])
    assert pinned_start(plan) is None  # Spark resumes from its own offsets from now on


def snapshot_dir(plan: JobPlan, snap_id: str, **fields: object) -> None:
    manifest = snapshots.Manifest(
        id=snap_id, materializer=plan.spec.name, topic=plan.topic, generation="", app_id="a", created_at=1.0,
        committed_batch=0, offsets={plan.topic: {"0": 1}}, redis_keys=0, search=False, delta_versions={},
    )  # fmt: skip
    where = plan.job_dir / snapshots.SNAPSHOTS_DIR / snap_id
    where.mkdir(parents=True)
    (where / snapshots.MANIFEST).write_text(json.dumps({**json.loads(manifest.to_json()), **fields}))
    (where / snapshots.REDIS_DUMP).write_bytes(b"")


def test_find_names_the_owner_topic_and_generation(tmp_path: Path) -> None:
    config = RunConfig(home=tmp_path, topic="t")
    products, orders = JobPlan.of(PRODUCTS, config), JobPlan.of(ORDERS, config)
    with pytest.raises(SnapshotNotFound, match="take one with `materializers snapshot products`"):
        snapshots.find(products, "nope")
    snapshot_dir(orders, "o1")
    with pytest.raises(SnapshotMismatch, match=r"belongs to materializer 'orders'.*restore orders o1"):
        snapshots.find(products, "o1")
    snapshot_dir(products, "p1", topic="other")
    with pytest.raises(SnapshotMismatch, match="topic 'other'"):
        snapshots.find(products, "p1")
    snapshot_dir(products, "p2", generation="g0")
    with pytest.raises(SnapshotMismatch, match="rebuilt since"):
        snapshots.find(products, "p2")
    snapshot_dir(products, "p3")
    assert snapshots.find(products, "p3")[1].id == "p3"
    with pytest.raises(SnapshotNotFound, match="known: p1, p2, p3"):
        snapshots.find(products, "p4")


def test_a_snapshot_is_refused_by_the_other_search_backend_naming_the_flag(tmp_path: Path) -> None:
    tantivy = JobPlan.of(PRODUCTS, RunConfig(home=tmp_path, topic="t"))
    remote = JobPlan.of(PRODUCTS, RunConfig(home=tmp_path, topic="t", search_backend="opensearch"))
    snapshot_dir(
        tantivy, "os", opensearch_repository="materializers", opensearch_snapshot="mat-products-g0-os"
    )
    snapshot_dir(tantivy, "local", search=True)
    (tantivy.job_dir / snapshots.SNAPSHOTS_DIR / "local" / snapshots.SEARCH_COPY).mkdir()
    with pytest.raises(SnapshotMismatch, match="restore with --search-backend opensearch"):
        snapshots.find(tantivy, "os")
    with pytest.raises(SnapshotMismatch, match="restore with --search-backend tantivy"):
        snapshots.find(remote, "local")
    assert snapshots.find(remote, "os")[1].opensearch_snapshot == "mat-products-g0-os"
    assert snapshots.find(tantivy, "local")[1].search


def test_a_manifest_written_before_opensearch_snapshots_still_reads(tmp_path: Path) -> None:
    plan = JobPlan.of(PRODUCTS, RunConfig(home=tmp_path, topic="t"))
    snapshot_dir(plan, "old")
    where = plan.job_dir / snapshots.SNAPSHOTS_DIR / "old" / snapshots.MANIFEST
    held = json.loads(where.read_text())
    where.write_text(json.dumps({k: v for k, v in held.items() if not k.startswith("opensearch_")}))
    assert snapshots.find(plan, "old")[1].opensearch_snapshot == ""


def test_refuse_if_running(tmp_path: Path) -> None:

    config = RunConfig(home=tmp_path)
    status.write(
        config.job_dir("products"), status.JobStatus(name="products", state="running", pid=os.getpid())
    )
    with pytest.raises(JobRunning, match="`materializers stop products`, then restore"):
        refuse_if_running(config, "products", "restore")
    refuse_if_running(config, "orders", "restore")


def test_status_table() -> None:
    row = {
        "name": "products", "state": "running", "batch_id": 3, "total_lag": 12, "input_rows_per_second": 1.25,
        "processed_rows_per_second": 2.0, "last_batch_ms": 120, "dead_letters": 1, "late_dropped": 4,
        "corrected": 2, "last_error": "a\nb",
    }  # fmt: skip
    header, line = status.table([row]).splitlines()
    assert header.split()[:3] == ["NAME", "STATE", "BATCH"] and header.endswith("LAST ERROR")
    assert line.split() == ["products", "running", "3", "12", "1.2", "2.0", "120", "1", "4", "2", "a", "b"]


def test_alive_treats_an_unreaped_child_as_dead() -> None:
    import subprocess
    import sys
    import time

    child = subprocess.Popen([sys.executable, "-c", "pass"])
    deadline = time.monotonic() + 30
    while Path(f"/proc/{child.pid}/stat").read_text().rpartition(")")[2].split()[0] != "Z":
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert not status.alive(child.pid)  # exited, not yet waited for
    child.wait()
    assert status.alive(os.getpid())
