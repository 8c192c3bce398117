"""What the OpenSearch view promises beyond the view contract (test_view_contract.py runs both search
backends through it): a batch is searchable when it commits, and a driver killed between two bulk
requests of a batch leaves a part that the re-run completes."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from conftest import crash_at_failpoint, run_once
from records import debezium, produce
from search_backends import SearchBackend, require_opensearch

from materializers.catalog import lookup
from materializers.plan import JobPlan

pytestmark = pytest.mark.integration

PRODUCTS = lookup("products")
# Only the search view, so each run exercises OpenSearch and nothing else. The mid-bulk crash
# test's driver loads it as `test_opensearch_batches:SEARCH_ONLY` (this directory on its path).
SEARCH_ONLY = replace(PRODUCTS, name="products_search", builtin_views=("search",))


def row(name: str, description: str | None = None) -> dict[str, Any]:
    return {"name": name, "description": description or f"{name} desc", "price": "1.00", "stock": 1}


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
