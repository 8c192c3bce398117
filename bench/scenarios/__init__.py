"""Every scenario, registered here and nowhere else: its name, how it runs, and its two sizes.

A scenario is either a module here run as `python -m bench.scenarios.<module> --out DIR <size args>`
(each module has `parse(argv)`, which builds its settings without touching a service, and
`main(argv) -> int`, which measures and writes through `bench.harness.results`), or a file of
pytest-benchmark tests in `bench/micro/` (`micro=True`) run by pytest with `--bench-size`.

Sizes: `full` is what the committed results were measured at (the modules' own defaults, plus the
arguments given here); `quick` is a smoke run of a few seconds to a minute each, so that
`python -m bench run --size quick` (every scenario, `make bench QUICK=1`) takes minutes and shows
that each still runs and produces numbers: not numbers to quote.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

Size = Literal["quick", "full"]
SIZES: tuple[Size, ...] = ("quick", "full")
MICRO = Path(__file__).resolve().parents[1] / "micro"


@dataclass(frozen=True, slots=True, kw_only=True)
class Scenario:
    name: str
    about: str
    quick: str  # arguments of a quick run (shell words)
    full: str = ""  # arguments of a full run, beside the module's defaults (shell words)
    needs: Literal["stack", "cluster"] = "stack"  # cluster: the cluster topology too (make up-cluster)
    micro: bool = False  # a pytest-benchmark file, bench/micro/test_<name>.py

    @property
    def module(self) -> str:
        return f"bench.scenarios.{self.name}"

    @property
    def test_file(self) -> Path:
        return MICRO / f"test_{self.name}.py"

    def arguments(self, size: Size) -> tuple[str, ...]:
        return tuple(shlex.split(self.quick if size == "quick" else self.full))


SCENARIOS: tuple[Scenario, ...] = (
    Scenario(
        name="cdc",
        about="Debezium snapshot rows/s and commit->Kafka latency, the committed connector spec vs tuned",
        quick="--quick --rows 2000 --rates 500 --rate-seconds 3 --baseline-seconds 2 --warmup-seconds 1 --variants default --baseline-snapshot-timeout 60",
    ),
    Scenario(
        name="cdc_formats",
        about="JSON / schemaless JSON / Avro: snapshot, decode, warehouse backfill vs the peer Delta job, latency",
        quick="--quick --rows 2000 --records 4000 --formats avro --latency-rows 500 --rates 200 --latency-warmup 3 --latency-seconds 5 --backfill-rounds 1",
    ),
    Scenario(
        name="eventstore",
        about="event store execute latency and events/s vs a raw idempotent producer and eventsourcing",
        quick="--quick",
    ),
    Scenario(
        name="materializers",
        about="products views backfill vs hand-written confluent-kafka->Redis loops; commit->view latency",
        quick="--records 5000 --backfill-views cache --drivers cache --table-rows 500 --rate 100 --warmup 5 --seconds 5",
    ),
    Scenario(
        name="materializers_recovery",
        about="a killed products driver: time until its views move again",
        quick="--rounds 1 --warmup 5 --table-rows 500 --rate 20 --without old_defaults",
    ),
    Scenario(
        name="materializers_restore",
        about="restore from a snapshot + catch-up vs a rebuild from offset 0",
        quick="--records 2000 --tail 200 --entities 500",
    ),
    Scenario(
        name="materializers_startup",
        about="a fresh driver to a SparkSession, a Kafka read and an Avro decode, with and without the class archive",
        quick="--rounds 1",
    ),
    Scenario(
        name="aggregate",
        about="a windowed aggregate view kept by the streaming job vs recomputed each minute",
        quick="--groups 500 --minutes 2 --probes 2 --driver-memory 1g",
    ),
    Scenario(
        name="aggregate_merge_engines",
        about="an aggregate view's MERGE by delta-rs from the driver vs Spark's Delta MERGE",
        quick="--groups 500 --minutes 2 --probes 2",
    ),
    Scenario(
        name="aggregate_state_store",
        about="the aggregate job on Spark's HDFS-backed and RocksDB state stores",
        quick="--groups 500 --minutes 2 --driver-memory 1g",
    ),
    Scenario(
        name="search_backends",
        about="OpenSearch from the executors vs a hand-written helpers.bulk loop vs Tantivy; commit->searchable",
        quick="--rows 1000 --records 2000 --latency-rows 500 --rates 200 --latency-warmup 3 --latency-seconds 5",
    ),
    Scenario(
        name="live_batch_bound",
        about="a live three-view driver at the batch bound before (10,000) and now",
        quick="--rows 1000 --rate 200 --warmup 3 --seconds 5",
    ),
    Scenario(
        name="cluster_scaling",
        about="event store appends and a cache backfill on the single-node stack vs the cluster topology",
        quick="--quick --records 2000",
        needs="cluster",
    ),
    Scenario(
        name="batch_overhead",
        about="a live-sized batch's decode in the driver: built each batch vs once vs in the query",
        quick="",
        micro=True,
    ),
    Scenario(
        name="checkpoint_files",
        about="a micro-batch's checkpoint writes by Spark's FileContext vs FileSystem checkpoint manager",
        quick="",
        micro=True,
    ),
    Scenario(
        name="kafka_source_fetch",
        about="one live-sized batch read by Spark's Kafka source at fetch.max.wait.ms 500 vs 10",
        quick="",
        micro=True,
    ),
)
BY_NAME = {s.name: s for s in SCENARIOS}
