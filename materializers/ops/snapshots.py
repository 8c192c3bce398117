"""Snapshots of a stopped job's views paired with the Kafka offsets they reflect; restoring them.

A snapshot (`<job dir>/snapshots/<id>/`) holds:
- `manifest.json` — materializer, topic, generation, the checkpoint's last COMMITTED batch and its
  end offsets (see checkpoint.py), each Delta table's version, the Redis key count;
- `redis.dump` — every key under the generation's prefix as Redis DUMP payloads;
- `search/` — a copy of the search index directory (Tantivy commits are whole files on disk); with the
  OpenSearch backend instead, a snapshot of the generation's index in OpenSearch's own snapshot
  repository, named in the manifest (views/opensearch_snapshots.py).
Delta tables are not copied: their version numbers are enough (time travel).

Consistency: the job must be stopped (a graceful stop finishes its batch and commits it), so
nothing writes the views while they are copied. If the driver died between writing the views and
committing a batch, the views may be ahead of the recorded offsets; resuming from those offsets
replays that batch, which every view absorbs (they are idempotent on source positions).

Restore order (everything is checked before step 1, so bad input changes nothing):
1. Delta: RESTORE each table to version n (skipped if already at n). delta-rs (`deltalake`) writes
   the same RESTORE commit as Spark's `RESTORE TABLE ... TO VERSION AS OF n`, without a JVM (Spark's
   was orders of magnitude slower, even on small tables), and the tables' protocol (reader 1,
   writer 2) is one both write;
2. search: the copy is staged beside the live directory, then swapped in by two renames; OpenSearch's
   index is restored from its snapshot behind the readers' alias (opensearch_snapshots.restore), so
   it is not left ahead of the offsets of step 4, nor missing documents it lost;
3. Redis: the prefix is cleared, then every dumped key RESTOREd;
4. checkpoint: replaced by a new one (new app id) pinned to start at the snapshot's offsets, so the
   next `start` continues exactly where the snapshot's views stopped.
A crash during a restore leaves the views mixed; running the same restore again completes it.
"""

from __future__ import annotations

import json
import shutil
import time
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path

from materializers.errors import NothingCommitted, SnapshotMismatch, SnapshotNotFound
from materializers.runtime import checkpoint, lifecycle
from materializers.runtime.job import IDENTITY_FILE, JobPlan, reset_checkpoint
from materializers.views.search import opensearch_snapshots

SNAPSHOTS_DIR = "snapshots"
MANIFEST = "manifest.json"
REDIS_DUMP = "redis.dump"
SEARCH_COPY = "search"


@dataclass(frozen=True, slots=True, kw_only=True)
class Manifest:
    id: str
    materializer: str
    topic: str
    generation: str
    app_id: str
    created_at: float
    committed_batch: int
    offsets: dict[str, dict[str, int]]
    redis_keys: int
    search: bool
    delta_versions: dict[str, int]  # table name (current/history) -> version
    # the OpenSearch search view's snapshot in OpenSearch's repository ("": none, e.g. Tantivy's)
    opensearch_repository: str = ""
    opensearch_snapshot: str = ""

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> Manifest:
        return cls(**json.loads(text))


def new_id() -> str:
    return time.strftime("%Y%m%dT%H%M%S") + "-" + uuid.uuid4().hex[:6]


def delta_tables(plan: JobPlan) -> dict[str, str]:
    warehouse = plan.warehouse()
    tables = {"history": warehouse.history_path}
    if plan.spec.current_table:
        tables["current"] = warehouse.current_path
    return tables


def delta_version(path: str) -> int:
    from deltalake import DeltaTable

    return int(DeltaTable(path).version())


def take(plan: JobPlan) -> Manifest:
    """Snapshot the stopped job's views and the offsets of its last committed batch."""
    lifecycle.refuse_if_running(plan.config, plan.spec.name, "take the snapshot")
    done = checkpoint.committed(plan.checkpoint)
    if done.batch_id < 0:
        raise NothingCommitted(
            f"checkpoint {plan.checkpoint} has no committed batch, so no offsets match the views; "
            f"run `materializers start {plan.spec.name}` until it has processed a batch, then snapshot"
        )
    snap_id = new_id()
    root = plan.job_dir / SNAPSHOTS_DIR
    staging = root / f".{snap_id}.partial"  # renamed into place last: a listed snapshot is complete
    staging.mkdir(parents=True)
    keys = plan.cache().dump_to(staging / REDIS_DUMP)
    index = plan.search()
    if index is not None and index.path.is_dir():
        shutil.copytree(index.path, staging / SEARCH_COPY)
    remote = plan.opensearch()
    remote_snapshot = opensearch_snapshots.take(remote, snap_id) if remote is not None else ""
    ident = json.loads((plan.checkpoint / IDENTITY_FILE).read_text())
    manifest = Manifest(
        id=snap_id,
        materializer=plan.spec.name,
        topic=plan.topic,
        generation=plan.generation,
        app_id=str(ident.get("app_id", "")),
        created_at=time.time(),
        committed_batch=done.batch_id,
        offsets=done.offsets,
        redis_keys=keys,
        search=(staging / SEARCH_COPY).is_dir(),
        delta_versions={name: delta_version(path) for name, path in delta_tables(plan).items()},
        opensearch_repository=opensearch_snapshots.REPOSITORY if remote_snapshot else "",
        opensearch_snapshot=remote_snapshot,
    )
    (staging / MANIFEST).write_text(manifest.to_json())
    staging.rename(root / snap_id)
    return manifest


def listing(job_dir: Path) -> list[str]:
    root = job_dir / SNAPSHOTS_DIR
    return sorted(p.name for p in root.iterdir() if (p / MANIFEST).is_file()) if root.is_dir() else []


def find(plan: JobPlan, snap_id: str) -> tuple[Path, Manifest]:
    """The snapshot directory and manifest, checked against the plan; raises before anything changes."""
    where = plan.job_dir / SNAPSHOTS_DIR / snap_id
    if not (where / MANIFEST).is_file():
        home = plan.config.home
        owners = sorted(p.parents[2].name for p in home.glob(f"*/{SNAPSHOTS_DIR}/{snap_id}/{MANIFEST}"))
        if owners:
            raise SnapshotMismatch(
                f"snapshot {snap_id} belongs to materializer {owners[0]!r}, not {plan.spec.name!r}; "
                f"run `materializers restore {owners[0]} {snap_id}` or pick one of {plan.spec.name}'s snapshots"
            )
        known = listing(plan.job_dir)
        raise SnapshotNotFound(
            f"no snapshot {snap_id!r} for {plan.spec.name} under {plan.job_dir / SNAPSHOTS_DIR}; "
            + (
                f"known: {', '.join(known[-5:])}"
                if known
                else f"take one with `materializers snapshot {plan.spec.name}`"
            )
        )
    manifest = Manifest.from_json((where / MANIFEST).read_text())
    if (manifest.materializer, manifest.topic) != (plan.spec.name, plan.topic):
        raise SnapshotMismatch(
            f"snapshot {snap_id} is of {manifest.materializer!r} on topic {manifest.topic!r}, not "
            f"{plan.spec.name!r} on {plan.topic!r}; pass the snapshot's --topic or pick another snapshot"
        )
    if manifest.generation != plan.generation:
        raise SnapshotMismatch(
            f"snapshot {snap_id} was taken of generation {manifest.generation or '(original)'!r}, but the "
            f"live views are generation {plan.generation or '(original)'!r} (rebuilt since); its Delta "
            "versions do not apply to the new tables — take a new snapshot of the live views"
        )
    backend_mismatch(plan, manifest)
    missing = [
        n for n in (REDIS_DUMP, *([SEARCH_COPY] if manifest.search else [])) if not (where / n).exists()
    ]
    if missing:
        raise SnapshotNotFound(f"snapshot {snap_id} is incomplete (missing {missing}); pick another snapshot")
    return where, manifest


def backend_mismatch(plan: JobPlan, manifest: Manifest) -> None:
    """Refuse a snapshot whose search view lives in the other backend than the plan's (pure): the
    restore would leave the plan's search view as it is, ahead of the restored offsets."""
    held = "opensearch" if manifest.opensearch_snapshot else "tantivy" if manifest.search else ""
    wants = "opensearch" if plan.opensearch() is not None else "tantivy" if plan.search() is not None else ""
    if held and wants and held != wants:
        raise SnapshotMismatch(
            f"snapshot {manifest.id} holds the search view in {held}, but this run keeps it in {wants}; "
            f"restore with --search-backend {held}, or take a new snapshot with --search-backend {wants}"
        )


def check_restorable(plan: JobPlan, snap_id: str) -> tuple[Path, Manifest]:
    """Every check a restore makes before it changes anything (no Spark needed)."""
    lifecycle.refuse_if_running(plan.config, plan.spec.name, "restore")
    where, manifest = find(plan, snap_id)
    remote = plan.opensearch()
    if remote is not None and manifest.opensearch_snapshot:
        opensearch_snapshots.check(remote, manifest.opensearch_repository, manifest.opensearch_snapshot)
    return where, manifest


def restore(plan: JobPlan, where: Path, manifest: Manifest) -> None:
    """Put the views back to the snapshot and pin a new checkpoint at its offsets (see module doc)."""
    from deltalake import DeltaTable

    for name, path in delta_tables(plan).items():
        table = DeltaTable(path)
        if table.version() != manifest.delta_versions[name]:
            table.restore(manifest.delta_versions[name])
    index = plan.search()
    if index is not None and manifest.search:
        staged = index.path.with_name(f".{index.path.name}.restoring")
        retired = index.path.with_name(f".{index.path.name}.replaced")
        for leftover in (staged, retired):
            if leftover.exists():
                shutil.rmtree(leftover)
        shutil.copytree(where / SEARCH_COPY, staged)
        if index.path.exists():
            index.path.rename(retired)
        staged.rename(index.path)
        shutil.rmtree(retired, ignore_errors=True)
    remote = plan.opensearch()
    if remote is not None and manifest.opensearch_snapshot:
        opensearch_snapshots.restore(remote, manifest.opensearch_repository, manifest.opensearch_snapshot)
    plan.cache().restore_from(where / REDIS_DUMP)
    reset_checkpoint(plan, manifest.offsets, note=f"restored from snapshot {manifest.id}")
