"""snapshot -> more changes (and a document damaged behind the view's back) -> restore -> continue,
with the search view in OpenSearch: the index is back exactly as it was at the snapshot (versions and
tombstones included), readers never miss the alias meanwhile, and the replay from the snapshot's
offsets ends with the documents of an uninterrupted run — deletes included."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
from conftest import run_once
from records import debezium, produce
from search_backends import require_opensearch

from materializers.errors import SnapshotMismatch, SnapshotNotFound
from materializers.ops import snapshots
from materializers.runtime.job import JobPlan
from materializers.views.search.opensearch import OpenSearchIndex
from materializers.views.search.opensearch_snapshots import REPOSITORY
from shop.products import PRODUCTS

pytestmark = pytest.mark.integration


def product(i: int, rev: int) -> dict[str, Any]:
    return {"name": f"p{i} r{rev}", "description": f"thing {i}", "price": f"{i}.{rev:02d}", "stock": rev}


def held(index: OpenSearchIndex) -> dict[str, tuple[int, dict[str, Any]]]:
    """Every document of the generation's index, tombstones too, with its version."""
    from opensearchpy import helpers

    index.refresh()
    hits = helpers.scan(index.client(), index=index.index, query={"version": True})
    return {h["_id"]: (h["_version"], h["_source"]) for h in hits}


def test_restore_puts_the_index_back_and_the_replay_ends_as_an_uninterrupted_run(
    spark: Any, topics: Any, producer: Any, run_config: Any, tmp_path: Path, uid: str
) -> None:
    url = require_opensearch()
    topic = topics("mat-os-snap")
    produce(producer, topic, [debezium(i, 1000 + i, "c", product(i, 0)) for i in range(1, 101)])
    produce(producer, topic, [debezium(i, 1500 + i, "d", None) for i in range(90, 101)])  # tombstones
    plan = JobPlan.of(PRODUCTS, run_config(topic=topic, search_backend="opensearch", opensearch_url=url))
    reference = JobPlan.of(
        PRODUCTS,
        run_config(
            topic=topic, home=str(tmp_path / "reference"), redis_prefix=f"mat-ref-{uid}",
            search_backend="opensearch", opensearch_url=url,
        ),
    )  # fmt: skip
    index, other = plan.opensearch(), reference.opensearch()
    assert index is not None and other is not None
    try:
        run_once(spark, plan)
        manifest = snapshots.take(plan)
        assert (manifest.opensearch_repository, manifest.search) == (REPOSITORY, False)
        at_snapshot = held(index)
        assert len(at_snapshot) == 100 and sum(d["deleted"] for _v, d in at_snapshot.values()) == 11

        # After the snapshot: updates, deletes, new rows; then a document damaged behind the view's
        # back at a version no replayed change can beat (what a restore is for).
        later = [debezium(i, 2000 + i, "u", product(i, 1)) for i in range(1, 40)]
        later += [debezium(i, 3000 + i, "d", None) for i in range(40, 50)]
        later += [debezium(i, 4000 + i, "c", product(i, 0)) for i in range(101, 121)]
        later += [debezium(i, 5000 + i, "c", product(i, 2)) for i in range(95, 98)]  # deleted, back again
        produce(producer, topic, later)
        run_once(spark, plan)
        bad = {"entity": "60", "position": "9" * 15, "deleted": False, "name": "damaged"}
        index.client().index(
            index=index.index, id="60", body=bad, version=10**15, version_type="external", refresh=True
        )
        assert held(index) != at_snapshot

        failures: list[str] = []
        searches: list[object] = []
        stop = threading.Event()

        def reader() -> None:  # searches the alias over and over while the restore moves it
            while not stop.is_set():
                try:
                    searches.append(index.client().search(index=index.alias, body={"size": 1}))
                except Exception as exc:
                    failures.append(repr(exc))

        where, found = snapshots.check_restorable(plan, manifest.id)
        thread = threading.Thread(target=reader)
        thread.start()
        try:
            snapshots.restore(plan, where, found)
        finally:
            stop.set()
            thread.join(10)
        assert failures == [] and len(searches) > 10
        assert held(index) == at_snapshot  # versions and tombstones included
        assert index.client().indices.get_alias(name=index.alias).keys() == {index.index}

        run_once(spark, plan)  # the restored checkpoint is pinned to the snapshot's offsets
        run_once(spark, reference)  # from offset 0, never interrupted
        documents = {k: d for k, (_v, d) in held(index).items()}
        assert documents == {k: d for k, (_v, d) in held(other).items()}
        assert documents["60"]["name"] == "p60 r0"  # the damage is gone
        live = {k for k, d in documents.items() if not d["deleted"]}
        assert live == {str(i) for i in [*range(1, 40), *range(50, 90), 95, 96, 97, *range(101, 121)]}
    finally:
        for p in (plan, reference):
            p.cache().clear()
            remote = p.opensearch()
            assert remote is not None
            remote.client().indices.delete(index=f"{remote.alias}-*", ignore_unavailable=True)


def test_a_snapshot_is_refused_by_the_other_backend_and_when_opensearch_lost_it(
    spark: Any, topics: Any, producer: Any, run_config: Any
) -> None:
    url = require_opensearch()
    topic = topics("mat-os-snap-bad")
    produce(producer, topic, [debezium(i, 1000 + i, "c", product(i, 0)) for i in range(1, 11)])
    plan = JobPlan.of(PRODUCTS, run_config(topic=topic, search_backend="opensearch", opensearch_url=url))
    index = plan.opensearch()
    assert index is not None
    try:
        run_once(spark, plan)
        manifest = snapshots.take(plan)
        tantivy = JobPlan.of(PRODUCTS, run_config(topic=topic))
        with pytest.raises(SnapshotMismatch, match="--search-backend opensearch"):
            snapshots.check_restorable(tantivy, manifest.id)
        index.client().snapshot.delete(repository=REPOSITORY, snapshot=manifest.opensearch_snapshot)
        before = held(index)
        with pytest.raises(SnapshotNotFound, match="pick another snapshot"):
            snapshots.check_restorable(plan, manifest.id)
        assert held(index) == before  # refused before anything changed
    finally:
        plan.cache().clear()
        index.client().indices.delete(index=f"{index.alias}-*", ignore_unavailable=True)
