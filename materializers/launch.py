"""Start materializers in one Spark driver, from a program: what `materializers start` does.

`run(products, "mypkg.views:orders_by_customer", config=RunConfig.from_env(), start="latest")` checks
everything that needs no Spark first (the views' stores, the topics, the start position, the
checkpoints' owners: bad input fails in a second and writes nothing), then builds one SparkSession and
runs a streaming query per materializer until each stops (`materializers stop NAME`, SIGTERM/SIGINT,
or `available_now` once caught up). Returns 0, or 1 when a query failed (its status says why).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence

from confluent_kafka import KafkaException

from kafkakit.errors import BadStartPosition
from kafkakit.positions import StartPosition, parse_start
from materializers.aggregates import job as aggregate_job
from materializers.catalog import lookup
from materializers.config import RunConfig
from materializers.decode import positions
from materializers.errors import SourceUnavailable
from materializers.materializer import Materializer
from materializers.ops import generations, lag
from materializers.plan import JobPlan
from materializers.runtime import driver_loop, timeline
from materializers.runtime.job import claim_checkpoint
from materializers.runtime.kafka_topics import topic_partitions
from materializers.spark import session as spark_session

log = logging.getLogger(__name__)


def run(
    *materializers: Materializer | str,
    config: RunConfig | None = None,
    start: str | StartPosition = "latest",
    available_now: bool = False,
) -> int:
    """Run `materializers` (objects, built-in names, entry-point names or `module:attr`) with one
    `config` (default: the environment's) from `start` (`earliest`, `latest` or offsets JSON)."""
    given = config or RunConfig.from_env()
    specs = [m if isinstance(m, Materializer) else lookup(m) for m in materializers]
    begin = parse_start(start) if isinstance(start, str) else start
    return start_plans(
        [generations.resolve(spec, given) for spec in specs], begin, available_now=available_now
    )


def start_plans(plans: Sequence[JobPlan], begin: StartPosition, *, available_now: bool = False) -> int:
    """Check every plan, claim its checkpoint, build the session and run a query per plan."""
    driver_loop.check_distinct(plans)
    spark_session.driver_jit()  # a bad MATERIALIZERS_DRIVER_JIT fails here, before any checkpoint
    spark_session.require_master(plans[0].config.master)
    for plan in plans:  # every check before anything is written
        for view in plan.views():  # built (and checked against the protocol) here, then checked
            view.check()
        partitions = topic_partitions(
            plan.config.endpoints.kafka_bootstrap_servers,
            plan.topic,
            client_config=plan.config.endpoints.kafka_client,
        )
        positions.spark_start_options(begin, {plan.topic: partitions})  # a bad position fails here
        if plan.spec.aggregate is not None:  # state built by another definition: refused here
            aggregate_job.check_state(plan)
    for plan in plans:
        claim_checkpoint(plan)
    names = "+".join(plan.spec.name for plan in plans)
    behind = backlog(plans, begin)
    jit = spark_session.driver_jit(backlog=behind)
    log.info(
        "driver JIT %s (%s records behind at the start)", jit, "unknown" if behind is None else f"{behind:,}"
    )
    spark = spark_session.build(plans[0].config.master, f"materializer-{names}", jit=jit)
    started = [
        timeline.event("process", timeline.process_started_at()),
        timeline.event(
            "session",
            time.time(),
            jit=jit,
            backlog=behind,
            heap=spark_session.driver_heap(spark),
            gc=spark_session.driver_collectors(spark),
        ),
    ]
    for plan in plans:
        timeline.append(plan.job_dir, started)
    return driver_loop.run(
        [aggregate_job.job_for(spark, plan) for plan in plans], begin, available_now=available_now
    )


def backlog(plans: Sequence[JobPlan], begin: StartPosition, *, fresh: bool = False) -> int | None:
    """The records the plans' queries read before they are caught up (`lag.backlog`); None when a
    broker does not answer or refuses the start: the JIT choice never fails a start (Spark's
    own source reports such a problem, with its reason)."""
    try:
        return sum(lag.backlog(plan, begin, fresh=fresh) for plan in plans)
    except (KafkaException, SourceUnavailable, BadStartPosition) as exc:
        log.info("records behind at the start not known (%s): the driver's JIT is chosen without them", exc)
        return None
