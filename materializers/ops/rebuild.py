"""Rebuild a materializer's views beside the live ones, then switch readers over atomically.

Steps (the live generation keeps serving readers until step 4):
1. a new generation `g<hex>` (new Redis prefix, index directory, Delta tables, checkpoint) is fed
   from `start` by availableNow passes until a pass leaves lag 0 (checkpoint offsets == end offsets)
   or commits nothing new;
2. if the live job is running it is stopped gracefully (it finishes its batch), because after the
   switch nothing may write the retired generation;
3. one more catch-up pass takes in what the live job had still applied;
4. switch: the pointer file is renamed over `live.json`, then the Redis pointer key is set;
5. after `grace` seconds (readers that resolved the old pointer finish their reads) the old
   generation's keys, directories and checkpoint are deleted.
A failure before step 4 leaves the live views untouched (the half-built generation is removed).
After a rebuild, `materializers start NAME` continues from the new generation's checkpoint.
"""

from __future__ import annotations

import logging
import shutil
import time
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kafkakit.positions import Edge, StartPosition
from materializers.config import RunConfig
from materializers.errors import BadRebuild, JobRunning, NotCaughtUp
from materializers.materializer import Materializer
from materializers.ops import generations
from materializers.ops.lag import end_offsets
from materializers.runtime import checkpoint, lifecycle
from materializers.runtime.job import Job, JobPlan

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class RebuildResult:
    old_generation: str
    new_generation: str
    passes: int
    stopped_live_job: bool
    seconds: float


def check(start: StartPosition, config: RunConfig) -> None:
    """Bad input, before anything is built."""
    if isinstance(start, Edge) and start.which == "latest":
        raise BadRebuild(
            "a rebuild --from latest would build empty views; use --from earliest, offsets or a timestamp"
        )
    if config.checkpoint:
        raise BadRebuild("--checkpoint cannot be given to a rebuild: each generation owns its checkpoint")


def catch_up(spark: SparkSession, plan: JobPlan, start: StartPosition, deadline: float) -> int:
    """availableNow passes until lag 0 or a pass that commits nothing; returns the number of passes."""
    bootstrap = plan.config.endpoints.kafka_bootstrap_servers
    passes = 0
    while True:
        before = checkpoint.committed(plan.checkpoint).batch_id
        query = Job(spark, plan).start(start, available_now=True)
        query.awaitTermination(max(1, int(deadline - time.monotonic())))
        passes += 1
        if query.isActive:
            query.stop()
            raise NotCaughtUp(f"rebuild of {plan.spec.name} timed out mid-pass; raise --timeout")
        if query.exception() is not None:
            raise NotCaughtUp(f"rebuild of {plan.spec.name} failed: {query.exception()}")
        done = checkpoint.committed(plan.checkpoint)
        ends = end_offsets(bootstrap, plan.topic, client_config=plan.config.endpoints.kafka_client)
        behind = checkpoint.lag(done.offsets, ends)
        if behind == 0 or done.batch_id == before:
            return passes
        if time.monotonic() > deadline:
            raise NotCaughtUp(
                f"rebuild of {plan.spec.name} is still {behind} record(s) behind; the input is faster than "
                "the rebuild — raise --timeout or rebuild when it is quieter"
            )


def retire(plan: JobPlan) -> None:
    """Delete one generation's Redis keys, index, Delta tables and checkpoint."""
    plan.cache().clear()
    remote = plan.opensearch()
    if remote is not None:
        remote.drop()
    index = plan.search()
    doomed = [plan.warehouse().root, plan.checkpoint, *([index.path] if index else [])]
    if plan.generation:
        doomed.append(plan.view_dir)
    for path in doomed:
        shutil.rmtree(path, ignore_errors=True)


def rebuild(
    spark: SparkSession,
    spec: Materializer,
    config: RunConfig,
    start: StartPosition,
    *,
    timeout: float = 1800.0,
    grace: float = 5.0,
) -> RebuildResult:
    check(start, config)
    began = time.monotonic()
    deadline = began + timeout
    live = generations.resolve(spec, config)
    fresh = JobPlan.of(spec, config, f"g{uuid.uuid4().hex[:8]}")
    log.info("rebuilding %s into generation %s beside %r", spec.name, fresh.generation, live.generation)
    try:
        passes = catch_up(spark, fresh, start, deadline)
        running = lifecycle.running(config, spec.name)
        if running:
            lifecycle.request_stop(config, running)
            if lifecycle.wait_stopped(running, max(10.0, deadline - time.monotonic())):
                raise JobRunning(
                    f"the live {spec.name} job (pid {running[0].pid}) did not stop for the switch; "
                    "stop it with `materializers stop` and run the rebuild again"
                )
            passes += catch_up(spark, fresh, start, deadline)
    except BaseException:
        retire(fresh)  # the live generation was never touched
        raise
    generations.switch(fresh)
    log.info(
        "%s now serves generation %s; retiring %r in %.1fs",
        spec.name,
        fresh.generation,
        live.generation,
        grace,
    )
    time.sleep(grace)  # an RCU-style grace period: readers holding the old pointer finish first
    retire(live)
    return RebuildResult(live.generation, fresh.generation, passes, bool(running), time.monotonic() - began)
