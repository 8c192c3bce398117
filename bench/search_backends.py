"""Benchmark: a search backfill into each search backend, side by side in one run.

`--records` (default 200,000) Debezium-shaped product rows (materializers_bench.produce_snapshot) on a
2-partition topic, read from offset 0 by the products materializer with the search view alone, in
micro-batches of `records / 4`, on `local[2]`:
1. `tantivy`: the embedded index, written from the driver (the batch collected there);
2. `opensearch`: written from the executors with the bulk API, external versions (this toolkit's
   OpenSearch view: requests of `opensearch_bulk.CHUNK` documents, one in flight while the next is
   encoded), the index's default refresh interval (1 s);
3. `hand_written_loop`: what a user writes without Spark — a confluent-kafka consumer, JSON decoded
   in Python, `opensearch-py`'s `helpers.bulk` per consumed batch of 500, the same external versions.
Results in bench/results/search-backends.json + .md. Needs the stack with OpenSearch
(`STACK_OPENSEARCH=1 devstack up`, `source .stack/env`). On a shared 2-core machine the numbers are
noisy: the load average before and after each phase is recorded; read the ratios.
Not measured here (issue 21 asks for it): the 2M-change backfill and commit→searchable latency at
2k rows/s.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from confluent_kafka.admin import NewTopic  # type: ignore[attr-defined]
from materializers_bench import backfill, consumed, produce_snapshot

from kafkakit.clients import make_admin
from materializers import spark_session
from materializers.catalog import lookup
from materializers.config import RunConfig
from materializers.job import JobPlan
from materializers.views.opensearch_bulk import CHUNK

RESULTS = Path(__file__).parent / "results"


def load() -> float:
    return round(os.getloadavg()[0], 2)


def hand_written_loop(config: RunConfig, topic: str, records: int, index: str) -> dict[str, Any]:
    """Consume, decode, `helpers.bulk` each consumed batch at version = the record's position."""
    from opensearchpy import OpenSearch, helpers

    client = OpenSearch(hosts=[config.opensearch_url], timeout=60)
    began = time.monotonic()
    for msgs in consumed(config, topic, records):
        actions = []
        for msg in msgs:
            payload = json.loads(msg.value())["payload"]
            after = payload["after"]
            source = {k: str(after[k]) for k in ("name", "description", "price", "stock")}
            actions.append(
                {"_index": index, "_id": str(after["id"]), "version": payload["source"]["lsn"] * 10,
                 "version_type": "external", "_source": source}
            )  # fmt: skip
        if actions:
            helpers.bulk(client, actions, raise_on_error=False)
    seconds = time.monotonic() - began
    return {"seconds": round(seconds, 2), "rows_per_s": round(records / seconds)}


def documents(plan: JobPlan, backend: str) -> int:
    if backend == "tantivy":
        index = plan.search()
        assert index is not None
        return len(index.live_documents())
    remote = plan.opensearch()
    assert remote is not None
    remote.refresh()
    return int(remote.client().count(index=remote.index)["count"])


def run(base: RunConfig, records: int, work: Path) -> dict[str, Any]:
    bootstrap = base.endpoints.kafka_bootstrap_servers
    tag = uuid.uuid4().hex[:6]
    topic = f"bench-search-{tag}"
    admin = make_admin({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(timeout=30)
    products = replace(lookup("products"), name="products")
    results: dict[str, Any] = {
        "records": records, "topic_partitions": 2, "master": base.master, "bulk_documents_per_request": CHUNK,
    }  # fmt: skip
    remotes = []
    try:
        results["produce_seconds"] = round(produce_snapshot(bootstrap, topic, records), 2)
        spark = spark_session.build(base.master, "bench-search-backends")
        try:
            for backend in ("tantivy", "opensearch"):
                config = replace(
                    base, topic=topic, home=work / backend, redis_prefix=f"bench-{tag}-{backend}",
                    views=("search",), search_backend=backend, max_offsets_per_trigger=max(records // 4, 1),
                )  # fmt: skip
                plan = JobPlan.of(products, config)
                remotes += [plan.opensearch()]
                print(f"backfill -> {backend} (load {load()}) ...", flush=True)
                before = load()
                results[backend] = backfill(spark, plan, records)
                results[backend].update(
                    load_before=before, load_after=load(), documents=documents(plan, backend)
                )
                print(f"  {results[backend]['rows_per_s']} rows/s", flush=True)
        finally:
            spark.stop()
        index = f"bench-{tag}-loop"
        before = load()
        print(f"baseline hand_written_loop (load {before}) ...", flush=True)
        results["hand_written_loop"] = hand_written_loop(base, topic, records, index)
        results["hand_written_loop"].update(load_before=before, load_after=load())
        print(f"  {results['hand_written_loop']['rows_per_s']} rows/s", flush=True)
    finally:
        admin.delete_topics([topic, f"{topic}.dlq"])
        for remote in [r for r in remotes if r is not None]:
            remote.client().indices.delete(index=f"bench-{tag}-*", ignore_unavailable=True)
    results["opensearch_vs_hand_written"] = round(
        results["opensearch"]["rows_per_s"] / results["hand_written_loop"]["rows_per_s"], 2
    )
    return results


def render_markdown(res: dict[str, Any]) -> str:
    rows = [
        f"| {name} | {res[name]['rows_per_s']:,} | {res[name]['seconds']} | "
        f"{res[name].get('load_before')} → {res[name].get('load_after')} |"
        for name in ("tantivy", "opensearch", "hand_written_loop")
    ]
    return "\n".join(
        [
            f"# Search backfill: {res['records']:,} product changes, 2 partitions, local[2]",
            "",
            "| writer | rows/s | seconds | load average (1 min) before → after |",
            "|---|---|---|---|",
            *rows,
            "",
            f"OpenSearch from the executors vs the hand-written `helpers.bulk` loop: "
            f"**{res['opensearch_vs_hand_written']}x** (issue 21's target: at least 2x).",
            f"Bulk requests of {res.get('bulk_documents_per_request', 1000):,} documents from the view, 500 from "
            "the loop. Refresh interval: OpenSearch's default (1 s). Measured on a 2-core machine shared with other "
            "benchmarks (see the load averages): read the ratio, re-run before drawing conclusions.",
            "",
        ]
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--out", type=Path, default=RESULTS / "search-backends.json")
    args = parser.parse_args(argv)
    base = RunConfig.from_env()
    work = Path(tempfile.mkdtemp(prefix="bench-search-"))
    try:
        results = run(base, args.records, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    args.out.with_suffix(".md").write_text(render_markdown(results))
    print(render_markdown(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
