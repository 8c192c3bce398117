"""One contract for every search backend (Tantivy on the driver, OpenSearch from the executors):
upserts, tombstones, late and duplicated changes, unchanged TOAST values, a replay from offset 0 by a
new checkpoint, and kill -9 after the view wrote its batch — on the driver's small-batch path and on
the executors' path. A backend that passes this suite is a search view."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from conftest import crash_at_failpoint, run_once
from records import debezium, produce
from search_backends import BACKENDS, SearchBackend, require_opensearch

from materializers.catalog import lookup
from materializers.plan import JobPlan

pytestmark = pytest.mark.integration

PRODUCTS = lookup("products")
# Only the search view, so each run exercises the backend under test and nothing else. The crash
# test's driver loads it as `test_search_contract:SEARCH_ONLY` (this directory on its path).
SEARCH_ONLY = replace(PRODUCTS, name="products_search", builtin_views=("search",))


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> Iterator[SearchBackend]:
    url = require_opensearch() if request.param == "opensearch" else None
    yield SearchBackend(request.param, url)


def row(name: str, description: str | None = None) -> dict[str, Any]:
    return {"name": name, "description": description or f"{name} desc", "price": "1.00", "stock": 1}


@pytest.mark.parametrize("small_batch_rows", ["10000", "0"], ids=["driver", "executors"])
def test_the_search_view_contract(
    spark: Any, topics: Any, producer: Any, run_config: Any, tmp_path: Path, backend: SearchBackend,
    small_batch_rows: str,
) -> None:  # fmt: skip
    topic = topics("mat-search-contract")
    config = run_config(topic=topic, small_batch_rows=small_batch_rows, **backend.overrides())
    plan = JobPlan.of(SEARCH_ONLY, config)
    produce(producer, topic, [debezium(1, 300, "c", row("walnut", "solid walnut table"))])
    try:
        first = run_once(spark, plan)
        produce(
            producer,
            topic,
            [
                debezium(1, 200, "u", row("pine")),  # late: never wins
                debezium(2, 100, "c", row("linen")),
                debezium(2, 500, "d", None),  # a tombstone
                debezium(3, 600, "c", row("copper")),
                debezium(1, 400, "u", row("oak"), unavailable=("description",)),  # TOAST kept
                debezium(1, 300, "c", row("walnut", "solid walnut table")),  # a duplicate
            ],
        )
        run_once(spark, plan, job=first)
        expected = {
            "1": {"name": "oak", "description": "solid walnut table"},
            "3": {"name": "copper", "description": "copper desc"},
        }
        assert backend.live(plan) == expected
        assert backend.search(plan, "walnut") == ["1"]  # the kept description is searchable
        assert backend.search(plan, "oak") == ["1"]
        assert backend.search(plan, "pine") == [] and backend.search(plan, "linen") == []

        # A late create of the deleted entity, then the whole topic replayed from offset 0 by a new
        # checkpoint (nothing batch-keyed helps, only the positions): nothing changes.
        produce(producer, topic, [debezium(2, 50, "c", row("resurrected"))])
        run_once(spark, JobPlan.of(SEARCH_ONLY, replace(config, checkpoint=str(tmp_path / "replay"))))
        assert backend.live(plan) == expected
        assert backend.search(plan, "resurrected") == []
    finally:
        backend.drop(plan)


@pytest.mark.parametrize("small_batch_rows", ["10000", "0"], ids=["driver", "executors"])
def test_an_opensearch_batch_is_searchable_when_it_commits(
    spark: Any, topics: Any, producer: Any, run_config: Any, small_batch_rows: str
) -> None:
    """With the index's own periodic refresh off, only the view's refresh at the end of a batch can
    make its documents searchable: a search right after the batch finds them."""
    backend = SearchBackend("opensearch", require_opensearch())
    topic = topics("mat-search-committed")
    plan = JobPlan.of(
        SEARCH_ONLY, run_config(topic=topic, small_batch_rows=small_batch_rows, **backend.overrides())
    )
    produce(producer, topic, [debezium(1, 100, "c", row("walnut"))])
    try:
        first = run_once(spark, plan)
        index = plan.opensearch()
        assert index is not None
        index.client().indices.put_settings(index=index.index, body={"index": {"refresh_interval": "-1"}})
        produce(producer, topic, [debezium(2, 200, "c", row("copper")), debezium(1, 300, "u", row("oak"))])
        run_once(spark, plan, job=first)
        found = index.searchable(["1", "2"])  # no refresh here: what a reader sees at the commit
        assert {e: doc["name"] for e, doc in found.items()} == {"1": "oak", "2": "copper"}
    finally:
        backend.drop(plan)


def cli(config: Any, topic: str, backend: SearchBackend) -> list[str]:
    return [
        sys.executable, "-m", "materializers.cli", "--home", str(config.home), *backend.cli_flags(),
        "start", f"{__name__}:SEARCH_ONLY", "--topic", topic, "--redis-prefix", config.redis_prefix,
        "--from", "earliest", "--available-now",
    ]  # fmt: skip


def test_kill_9_after_the_search_view_wrote_then_restart(
    topics: Any, producer: Any, run_config: Any, endpoints: Any, tmp_path: Path, backend: SearchBackend
) -> None:
    topic = topics("mat-search-crash")
    records = [debezium(i, 100 + i, "c", row(f"item{i}")) for i in range(1, 6)]
    records += [debezium(2, 200, "d", None), debezium(3, 300, "u", row("renamed"))]
    produce(producer, topic, records)
    config = run_config(topic=topic, **backend.overrides())
    plan = JobPlan.of(SEARCH_ONLY, config)
    path = os.pathsep.join([str(Path(__file__).parent), os.environ.get("PYTHONPATH", "")])
    env = {**os.environ, **endpoints.as_env(), "PYTHONPATH": path}
    marker = tmp_path / "reached"
    try:
        crash_at_failpoint(cli(config, topic, backend), env, "after-search", marker)
        assert not (plan.checkpoint / "commits" / "0").exists()  # written, never committed
        restarted = subprocess.run(
            cli(config, topic, backend), env=env, capture_output=True, text=True, timeout=240
        )
        assert restarted.returncode == 0, restarted.stderr[-3000:]
        assert (plan.checkpoint / "commits" / "0").exists()
        assert sorted(backend.live(plan)) == ["1", "3", "4", "5"]
        assert backend.live(plan)["3"]["name"] == "renamed"
        assert backend.search(plan, "item2") == []
    finally:
        backend.drop(plan)


def test_kill_9_mid_bulk_leaves_part_written_and_the_restart_writes_the_rest(
    topics: Any, producer: Any, run_config: Any, endpoints: Any, tmp_path: Path
) -> None:
    """OpenSearch only (Tantivy has no bulk): the driver dies after OpenSearch acknowledged the first
    bulk request of a batch and before the next is sent; the batch is not committed, its re-run
    writes everything again and the first request's documents are refused as already held."""
    from materializers.views.search.opensearch import CHUNK

    backend = SearchBackend("opensearch", require_opensearch())
    topic = topics("mat-search-midbulk")
    total = 2 * CHUNK + 500
    produce(producer, topic, [debezium(i, 1000 + i, "c", row(f"item{i}")) for i in range(1, total + 1)])
    config = run_config(topic=topic, **backend.overrides())
    plan = JobPlan.of(SEARCH_ONLY, config)
    path = os.pathsep.join([str(Path(__file__).parent), os.environ.get("PYTHONPATH", "")])
    env = {**os.environ, **endpoints.as_env(), "PYTHONPATH": path}
    try:
        crash_at_failpoint(cli(config, topic, backend), env, "search-mid-bulk", tmp_path / "mid-bulk")
        assert not (plan.checkpoint / "commits" / "0").exists()
        assert len(backend.live(plan)) == CHUNK  # the first request's documents, no more
        restarted = subprocess.run(
            cli(config, topic, backend), env=env, capture_output=True, text=True, timeout=240
        )
        assert restarted.returncode == 0, restarted.stderr[-3000:]
        live = backend.live(plan)
        assert len(live) == total and live[str(total)]["name"] == f"item{total}"
    finally:
        backend.drop(plan)
