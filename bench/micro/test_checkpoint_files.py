"""Micro-benchmark: what writing a micro-batch's checkpoint costs, by Spark's checkpoint file manager.

Every micro-batch writes two files to its query's checkpoint before and after the sink runs
(`offsets/N`: walCommit, `commits/N`: commitOffsets). The materializers' checkpoints are local
paths. Spark's default manager writes them through Hadoop's FileContext, whose local file system
(without Hadoop's native library, as pip's pyspark ships) forks `readlink` and `chmod` processes
for each file; the materializers' session picks Spark's FileSystem-based manager instead
(`materializers.spark.session`, `CHECKPOINT_FILES`).

One driver JVM, both managers: a round is a streaming query over a folder of small JSON files, one
file per batch (`maxFilesPerTrigger`), `foreachBatch` doing nothing, `availableNow`; the benchmark
times the whole query per round, and records the median of Spark's own `walCommit` and
`commitOffsets` per batch (the first batch left out: it creates the checkpoint's folders) as extra
figures. Needs no stack.
"""

from __future__ import annotations

import statistics
import tempfile
from pathlib import Path
from typing import Any

import pytest

from materializers.spark import session as spark_session

((KEY, OURS),) = spark_session.CHECKPOINT_FILES.items()  # what the materializers' session sets
MANAGERS = {
    "filecontext_spark_default": OURS.rsplit(".", 1)[0] + ".FileContextBasedCheckpointFileManager",
    "filesystem_materializers": OURS,
}
STEPS = ("walCommit", "commitOffsets", "triggerExecution")


def one_query(spark: Any, manager: str, batches: int, work: Path) -> dict[str, float]:
    """Median ms per batch of each step over the query's batches after the first."""
    source = work / "in"
    source.mkdir(parents=True)
    for n in range(batches):
        (source / f"{n:05d}.json").write_text(f'{{"n": {n}}}\n')
    spark.conf.set(KEY, manager)
    query = (
        spark.readStream.schema("n long")
        .option("maxFilesPerTrigger", 1)
        .json(str(source))
        .writeStream.option("checkpointLocation", str(work / "checkpoint"))
        .foreachBatch(lambda _batch, _batch_id: None)
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    ran = [p["durationMs"] for p in query.recentProgress if "walCommit" in p["durationMs"]][1:]
    return {step: statistics.median(d.get(step, 0) for d in ran) for step in STEPS}


@pytest.mark.parametrize("manager", MANAGERS)
def test_checkpoint_writes(benchmark: Any, spark: Any, quick: bool, manager: str) -> None:
    batches, rounds = (6, 2) if quick else (30, 4)
    steps: list[dict[str, float]] = []
    with tempfile.TemporaryDirectory(prefix="bench-checkpoint-") as tmp:
        made = iter(range(rounds + 1))

        def query() -> None:
            steps.append(one_query(spark, MANAGERS[manager], batches, Path(tmp) / str(next(made))))

        benchmark.pedantic(query, rounds=rounds, iterations=1)
    benchmark.extra_info.update(
        batches_per_query=batches,
        **{f"{step}_ms_median": statistics.median(s[step] for s in steps) for step in STEPS},
    )
    assert all(s["walCommit"] >= 0 for s in steps)
