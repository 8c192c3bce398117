"""Benchmark (not a test): how long a restarted materializer driver takes to be ready, with and without
the JVM class archive (materializers.spark.session), and against the code of another commit
(`--baseline REF`), side by side and interleaved in one run.

A driver killed with -9 serves no view until its replacement has a SparkSession and has run its first
batch; the demo's recovery line (kill -> first view update) is that plus the batch's own work. Each
round starts a fresh Python process per variant (as a restart does) that builds the session, runs a
small job, then what a first batch loads: a Kafka read through Spark's Kafka source and an Avro
decode (`from_avro`). Variants, in an order that rotates round by round:
- `archive`: this tree, its archive written beforehand as `devstack fetch` writes it;
- `no_archive`: this tree with `MATERIALIZERS_JVM_CACHE=off`;
- `baseline` (with `--baseline REF`): the tree at REF (a git worktree), its own archive written
  beforehand by its own `warm_class_archive`.
`--spark-conf-folder` runs every variant under a Spark conf folder with files in it (SPARK_CONF_DIR), as
on a host with a Spark install (its conf/ ships templates), which Spark's launcher puts on the driver's
class path. Needs a broker (KAFKA_BOOTSTRAP_SERVERS: `make up`). Writes
bench/results/materializers_startup/latest.{json,md} (`--out` another folder for a `--spark-conf-folder` run).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from bench.harness import results as bench_results
from bench.harness.stack import REPO

STEPS = ("session_s", "first_job_s", "kafka_s", "avro_s", "ready_s")
PROBE = """
import json, sys, time
t0 = time.monotonic()
from materializers.spark import session as spark_session
spark = spark_session.build("local[2]", "startup-bench")
t1 = time.monotonic()
spark.range(1000).selectExpr("id % 7 as k").groupBy("k").count().collect()
t2 = time.monotonic()
bootstrap, topic = sys.argv[1], sys.argv[2]
read = spark.read.format("kafka").option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic)
assert read.load().count() == 100
t3 = time.monotonic()
from pyspark.sql.avro.functions import from_avro
schema = '{"type": "record", "name": "r", "fields": [{"name": "n", "type": "long"}]}'
# zig-zag varints: 2 -> 1, 84 -> 42
frame = spark.createDataFrame([(bytes([2]),), (bytes([84]),)], "v binary")
assert sorted(r.a.n for r in frame.select(from_avro("v", schema).alias("a")).collect()) == [1, 42]
t4 = time.monotonic()
print(json.dumps({"session_s": t1 - t0, "first_job_s": t2 - t1, "kafka_s": t3 - t2, "avro_s": t4 - t3}))
spark.stop()
"""
WARM = "from materializers.spark import session as s; print(s.warm_class_archive())"


def run_python(code: str, tree: Path, env: dict[str, str], *args: str) -> list[str]:
    """`code` in a fresh interpreter importing the packages of `tree` (cwd outside every tree): the
    lines it printed."""
    out = subprocess.run(
        [sys.executable, "-c", code, *args],
        env={**env, "PYTHONPATH": str(tree)},
        cwd=tempfile.gettempdir(),
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    )
    return out.stdout.strip().splitlines()


def measure(tree: Path, env: dict[str, str], bootstrap: str, topic: str) -> dict[str, float]:
    # The last line the probe printed: a JVM that fails to write its archive at exit (the baseline's
    # under a conf folder) prints "Error occurred during initialization of VM" after it.
    printed = run_python(PROBE, tree, env, bootstrap, topic)
    found: dict[str, float] = json.loads([line for line in printed if line.startswith("{")][-1])
    found["ready_s"] = sum(found.values())
    return found


@contextmanager
def probe_topic(bootstrap: str) -> Iterator[str]:
    """A one-partition topic of 100 records, deleted afterwards."""
    topic = f"bench-startup-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1)])[topic].result(30)
    try:
        producer = Producer({"bootstrap.servers": bootstrap})
        for n in range(100):
            producer.produce(topic, key=str(n).encode(), value=b"x" * 200)
        assert producer.flush(30) == 0
        yield topic
    finally:
        admin.delete_topics([topic])[topic].result(30)


@contextmanager
def worktree(ref: str | None, into: Path) -> Iterator[Path | None]:
    """The tree at `ref` (a detached git worktree, removed afterwards); None without a ref."""
    if ref is None:
        yield None
        return
    subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", str(into), ref], check=True)
    try:
        yield into
    finally:
        subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(into)], check=False)


def conf_folder(into: Path) -> Path:
    """A Spark conf folder as a Spark install ships it: templates, and a spark-defaults.conf that sets
    nothing."""
    into.mkdir()
    (into / "spark-defaults.conf").write_text("# spark.master spark://master:7077\n")
    (into / "log4j2.properties.template").write_text("rootLogger.level = info\n")
    (into / "spark-env.sh.template").write_text("# SPARK_LOCAL_IP=\n")
    return into


def summarize(runs: list[dict[str, float]]) -> dict[str, float]:
    return {k: round(statistics.median(r[k] for r in runs), 2) for k in runs[0]}


def render(result: dict[str, Any]) -> str:
    names = list(result["median"])
    baseline = f" (`baseline`: {result['baseline']})" if result.get("baseline") else ""
    lines = [
        "# Materializer driver start-up: JVM class archive vs none, and vs a baseline commit",
        "",
        f"{result['rounds']} rounds, the variants' order rotating, a fresh process each{baseline}"
        f"{' under a Spark conf folder with files in it (SPARK_CONF_DIR)' if result.get('conf_folder') else ''}; medians, "
        "seconds; 2 cores, the local stack running. `kafka_s`: a batch read of 100 records through "
        "Spark's Kafka source; `avro_s`: a `from_avro` decode; `ready_s`: the sum.",
        "",
        "| step | " + " | ".join(names) + " | archive / " + " | archive / ".join(names[1:]) + " |",
        "|---|" + "---:|" * (2 * len(names) - 1),
    ]
    for key in STEPS:
        values = [result["median"][n][key] for n in names]
        ratios = [f"{values[0] / v:.2f}" for v in values[1:]]
        lines.append(f"| {key} | " + " | ".join(str(v) for v in values) + " | " + " | ".join(ratios) + " |")
    return "\n".join(lines) + "\n"


def parse(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--baseline", help="a git ref whose tree runs as the `baseline` variant (e.g. HEAD~1)")
    p.add_argument(
        "--out",
        type=Path,
        default=bench_results.RESULTS / "materializers_startup",
        help="the results' folder",
    )
    p.add_argument("--spark-conf-folder", action="store_true", help="every variant under a Spark conf folder")
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    run_start = bench_results.Began()
    args = parse(argv)
    bootstrap = os.environ["KAFKA_BOOTSTRAP_SERVERS"]
    with (
        tempfile.TemporaryDirectory(prefix="bench-startup-") as work,
        probe_topic(bootstrap) as topic,
        worktree(args.baseline, Path(work) / "baseline") as old,
    ):
        base = dict(os.environ)
        if args.spark_conf_folder:
            base["SPARK_CONF_DIR"] = str(conf_folder(Path(work) / "conf"))
        variants = {
            name: (REPO, {**base, "MATERIALIZERS_JVM_CACHE": cache})
            for name, cache in (("archive", str(Path(work) / "jvm")), ("no_archive", "off"))
        }
        if old is not None:
            variants["baseline"] = (
                old,
                {**base, "MATERIALIZERS_JVM_CACHE": str(Path(work) / "jvm-old")},
            )
        for name in ("archive", "baseline"):  # written before the first measured start, as `make fetch` does
            if name in variants:
                run_python(WARM, *variants[name])
        runs: dict[str, list[dict[str, float]]] = {name: [] for name in variants}
        names = list(variants)
        for i in range(args.rounds):
            for name in names[i % len(names) :] + names[: i % len(names)]:
                runs[name].append(measure(*variants[name], bootstrap, topic))
    result = {
        "rounds": args.rounds,
        "baseline": args.baseline,
        "conf_folder": args.spark_conf_folder,
        "runs": runs,
        "median": {k: summarize(v) for k, v in runs.items()},
    }
    bench_results.write(args.out, result, render(result), began=run_start)
    print(render(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
