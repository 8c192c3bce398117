"""`materializers` command line: start, status, stop, list, verify, search, snapshot, restore, rebuild.

Exit codes: 0 success, 1 the job failed or `verify` found differences, 2 bad input (the message says
what to fix). Every check that needs no Spark (name, start position, Redis, topic, checkpoint owner)
runs before a SparkSession is built, so bad input fails in a second and writes nothing.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

from kafkakit.environment import SHARED, for_program, refuse_bad_settings
from kafkakit.errors import ToolkitError
from kafkakit.logs import configure_cli_logging
from kafkakit.positions import StartPosition, parse_start, parse_timestamp
from kafkakit.secrets import masked
from materializers import launch
from materializers.aggregates.verify import verify_aggregate
from materializers.catalog import ENTRY_POINT_GROUP, available, lookup
from materializers.config import (
    AUTO,
    DEFAULT_TRIGGER,
    DRIVER_ROWS,
    OPENSEARCH_URL,
    SEARCH_BACKENDS,
    RunConfig,
)
from materializers.decode import positions
from materializers.environment import VARIABLES
from materializers.errors import BadAggregate, ConflictingJobs, JobNotRunning, UnknownView
from materializers.materializer import Materializer
from materializers.ops import generations, lag, rebuild, snapshots
from materializers.ops.verify import verify
from materializers.runtime import lifecycle, status
from materializers.runtime.kafka_topics import topic_partitions
from materializers.spark import session as spark_session

log = logging.getLogger("materializers")
# `start` flags that belong to one materializer: its own topic, table, checkpoint, dead letters.
_PER_JOB_FLAGS = ("topic", "table", "checkpoint", "dlq_topic")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="materializers", description=__doc__)
    parser.add_argument("--home", help="state directory (checkpoints, views, status); env MATERIALIZERS_HOME")
    parser.add_argument(
        "--search-backend",
        choices=SEARCH_BACKENDS,
        help="where the search view lives: tantivy (an index on the driver, the default) or opensearch "
        "(env MATERIALIZERS_SEARCH_BACKEND)",
    )
    parser.add_argument(
        "--opensearch-url", help=f"OpenSearch address (env OPENSEARCH_URL; default {OPENSEARCH_URL})"
    )
    sub = parser.add_subparsers(dest="command", required=True)

    start = sub.add_parser(
        "start",
        help="run materializers in the foreground until stopped: several names share one Spark driver",
    )
    start.add_argument(
        "names",
        nargs="+",
        metavar="NAME",
        help="one or more materializers (each its own query and checkpoint): a name from `materializers "
        "list`, or module:attr naming a Materializer of your own (e.g. mypkg.views:orders_by_customer)",
    )
    where = start.add_mutually_exclusive_group()
    where.add_argument(
        "--from",
        dest="start",
        default="latest",
        help="earliest | latest | OFFSETS_JSON (first run only; after `restore` the snapshot's offsets win)",
    )
    where.add_argument("--from-timestamp", help="ISO-8601 time to start from (first run only)")
    start.add_argument("--trigger", help=f"micro-batch interval, e.g. 1s, 500ms (default {DEFAULT_TRIGGER})")
    start.add_argument(
        "--master",
        help="Spark master URL (env MATERIALIZERS_MASTER, then SPARK_MASTER_URL; default local[*])",
    )
    start.add_argument("--available-now", action="store_true", help="process what is there, then exit")
    start.add_argument(
        "--max-offsets-per-trigger",
        help="cap on records per micro-batch (default: --small-batch-rows on a local master when the "
        "warehouse or the Tantivy index is kept, where the driver applies a batch fastest; else all "
        "available)",
    )
    start.add_argument(
        "--small-batch-rows",
        help="a batch of at most this many records is applied whole from the driver in one Spark job "
        f"(low latency), larger ones by the executors (default {AUTO}: for the warehouse alone on a local "
        "master, as many as fit an eighth of the driver's memory at the topic's record bytes, else "
        f"{DRIVER_ROWS}; 0: always the executors; env MATERIALIZERS_SMALL_BATCH_ROWS)",
    )
    start.add_argument(
        "--warehouse-driver-rows",
        help="warehouse batches of at most this many changes are written from the driver with delta-rs, "
        f"larger ones by Spark (default {AUTO}, as --small-batch-rows; 0: always Spark; env "
        "MATERIALIZERS_WAREHOUSE_DRIVER_ROWS)",
    )
    for p in (
        start,
        sub.add_parser("verify", help="compare a view with its source of truth; exit 1 on differences"),
    ):
        if p is not start:
            p.add_argument("name")
        # `start` takes them per job: VALUE for one materializer, NAME=VALUE (repeated) for several.
        per_job: dict[str, Any] = {"action": "append", "metavar": "[NAME=]VALUE"} if p is start else {}
        p.add_argument("--topic", help="input topic (default: the materializer's)", **per_job)
        p.add_argument(
            "--table", help="Postgres table a CDC view mirrors (default: the materializer's)", **per_job
        )
        p.add_argument(
            "--checkpoint", help="checkpoint directory (default <home>/<name>/checkpoint)", **per_job
        )
        p.add_argument("--dlq-topic", help="dead-letter topic (default <topic>.dlq)", **per_job)
        p.add_argument("--redis-prefix", help="Redis key prefix (default mat)")
        p.add_argument("--views", help="views to keep, e.g. cache,warehouse (default cache,search,warehouse)")

    search = sub.add_parser("search", help="answer a query from the search view (either backend)")
    search.add_argument("name")
    search.add_argument("query", help="words to look for in the materializer's search fields")
    search.add_argument("--limit", type=int, default=10, help="most documents shown (default 10)")
    search.add_argument(
        "--redis-prefix", help="Redis key prefix (default mat; names the OpenSearch alias too)"
    )

    snap = sub.add_parser("snapshot", help="snapshot a stopped job's views + the offsets they reflect")
    snap.add_argument("name")
    snap.add_argument("--list", action="store_true", help="list the job's snapshots instead")
    restore = sub.add_parser(
        "restore", help="put a stopped job's views back to a snapshot; `start` continues"
    )
    restore.add_argument("name")
    restore.add_argument("snapshot", help="snapshot id (see `materializers snapshot NAME --list`)")
    rebuild = sub.add_parser("rebuild", help="build new views beside the live ones, then switch readers")
    rebuild.add_argument("name")
    rebuild.add_argument("--from", dest="start", default="earliest", help="earliest | OFFSETS_JSON | P:N")
    rebuild.add_argument("--from-timestamp", help="ISO-8601 time to rebuild from")
    rebuild.add_argument("--timeout", type=float, default=1800.0, help="seconds to catch up (default 1800)")
    rebuild.add_argument("--grace", type=float, default=5.0, help="seconds before the old views are deleted")
    for p in (snap, restore, rebuild):
        p.add_argument("--topic", help="input topic (default: the materializer's)")
        p.add_argument("--redis-prefix", help="Redis key prefix (default mat)")
    rebuild.add_argument(
        "--master",
        help="Spark master URL (env MATERIALIZERS_MASTER, then SPARK_MASTER_URL; default local[*])",
    )

    show = sub.add_parser("status", help="per job: lag, rates, last batch, dead letters, last error")
    show.add_argument("--json", action="store_true", help="machine-readable output")
    stop = sub.add_parser("stop", help="stop a running job gracefully (finishes its current batch)")
    stop.add_argument("name", nargs="?", help="job to stop (default: every running job)")
    stop.add_argument(
        "--timeout", type=float, default=120.0, help="seconds to wait for the job to stop (default 120)"
    )
    sub.add_parser(
        "list", help=f"the materializers found by name: built-in, and entry points of {ENTRY_POINT_GROUP}"
    )
    return parser


def _config(args: argparse.Namespace, *, per_job: dict[str, str] | None = None) -> RunConfig:
    """Flags over env over defaults; `per_job` replaces the flags `start` takes per materializer."""
    flags = {
        k: per_job.get(k) if per_job is not None and k in _PER_JOB_FLAGS else getattr(args, k, None)
        for k in (
            "home",
            "topic",
            "table",
            "checkpoint",
            "dlq_topic",
            "redis_prefix",
            "trigger",
            "master",
            "views",
            "max_offsets_per_trigger",
            "warehouse_driver_rows",
            "small_batch_rows",
            "search_backend",
            "opensearch_url",
        )
    }
    return RunConfig.from_env().with_overrides(**flags)


def per_job_flags(names: Sequence[str], given: dict[str, list[str] | None]) -> dict[str, dict[str, str]]:
    """{name: {flag: value}} from `--flag VALUE` (one materializer) or `--flag NAME=VALUE` (pure)."""
    out: dict[str, dict[str, str]] = {name: {} for name in names}
    for flag, values in given.items():
        for raw in values or ():
            name, sep, value = raw.partition("=")
            if sep and name in out:
                out[name][flag] = value
            elif len(names) == 1:
                out[names[0]][flag] = raw
            else:
                raise ConflictingJobs(
                    f"--{flag.replace('_', '-')} {raw!r}: with several materializers write NAME=VALUE, NAME one "
                    f"of {', '.join(names)}"
                )
    return out


def _start(args: argparse.Namespace) -> int:
    flags = per_job_flags(args.names, {f: getattr(args, f) for f in _PER_JOB_FLAGS})
    begin: StartPosition = (
        parse_timestamp(args.from_timestamp) if args.from_timestamp else parse_start(args.start)
    )
    plans = [generations.resolve(lookup(name), _config(args, per_job=flags[name])) for name in args.names]
    code = launch.start_plans(plans, begin, available_now=args.available_now)
    for plan in plans:
        final = status.read(plan.job_dir)
        if final is not None and final.state == "failed":
            print(f"materializer {plan.spec.name} failed: {final.last_error}", file=sys.stderr)
    return code


def _status(args: argparse.Namespace) -> int:
    config = _config(args)
    bootstrap = config.endpoints.kafka_bootstrap_servers
    measured = [
        lag.with_lag(job, bootstrap, client_config=config.endpoints.kafka_client)
        for job in lifecycle.jobs(config)
    ]
    rows = [{**asdict(job), "state": lifecycle.state(job), "total_lag": job.total_lag} for job in measured]
    if args.json:
        print(json.dumps(rows, indent=2, sort_keys=True))
        return 0
    if not rows:
        print(f"no jobs under {config.home}")
        return 0
    print(status.table(rows))
    return 0


def _stop(args: argparse.Namespace) -> int:
    config = _config(args)
    targets = lifecycle.running(config, args.name)
    if not targets:
        raise JobNotRunning(
            f"no running job{' named ' + args.name if args.name else ''} under {config.home}; see `materializers status`"
        )
    lifecycle.request_stop(config, targets)
    alive = lifecycle.wait_stopped(targets, args.timeout)
    for job in targets:
        print(f"{job.name}: {'still stopping' if job.name in alive else 'stopped'}")
    return 1 if alive else 0


def _latest_state(name: str, command: str) -> Materializer:
    """`lookup`, refusing an aggregate view: `command` knows the latest-state views only."""
    spec = lookup(name)
    if spec.aggregate is not None:
        raise BadAggregate(
            f"`materializers {command}` does not handle aggregate views yet ({name!r}); to rebuild one, stop "
            f"it, delete its checkpoint and table under its job directory and `materializers start {name} "
            "--from earliest`"
        )
    return spec


def _snapshot(args: argparse.Namespace) -> int:
    plan = generations.resolve(_latest_state(args.name, "snapshot"), _config(args))
    if args.list:
        for snap_id in snapshots.listing(plan.job_dir):
            print(snap_id)
        return 0
    manifest = snapshots.take(plan)
    print(
        f"{args.name}: snapshot {manifest.id} at batch {manifest.committed_batch}, offsets {json.dumps(manifest.offsets)}"
    )
    return 0


def _restore(args: argparse.Namespace) -> int:
    plan = generations.resolve(_latest_state(args.name, "restore"), _config(args))
    where, manifest = snapshots.check_restorable(plan, args.snapshot)  # every check before a change
    snapshots.restore(plan, where, manifest)
    print(
        f"{args.name}: restored snapshot {manifest.id}; `materializers start {args.name}` continues from "
        f"{json.dumps(manifest.offsets)}"
    )
    return 0


def _rebuild(args: argparse.Namespace) -> int:
    spec, config = _latest_state(args.name, "rebuild"), _config(args)
    begin: StartPosition = (
        parse_timestamp(args.from_timestamp) if args.from_timestamp else parse_start(args.start)
    )
    rebuild.check(begin, config)
    plan = generations.resolve(spec, config)
    for view in plan.views():
        view.check()
    partitions = topic_partitions(
        config.endpoints.kafka_bootstrap_servers, plan.topic, client_config=config.endpoints.kafka_client
    )
    positions.spark_start_options(begin, {plan.topic: partitions})
    spark_session.require_master(config.master)
    jit = spark_session.driver_jit(backlog=launch.backlog([plan], begin, fresh=True))  # a backfill, usually
    spark = spark_session.build(config.master, f"materializer-{spec.name}-rebuild", jit=jit)
    done = rebuild.rebuild(spark, spec, config, begin, timeout=args.timeout, grace=args.grace)
    print(
        f"{spec.name}: generation {done.new_generation} is live (was {done.old_generation or '(original)'}), "
        f"{done.passes} pass(es), {done.seconds:.1f}s"
    )
    if done.stopped_live_job:
        print(f"the live job was stopped for the switch; `materializers start {spec.name}` continues it")
    return 0


def _list(_args: argparse.Namespace) -> int:
    """Each materializer found by name, its views and where it comes from (built-in or an entry
    point of `kafka_toolkit.materializers`); module:attr ones are not listed: they are not installed."""
    for known in available():
        spec = known.spec
        views = [
            *(["cache"] if "cache" in spec.builtin_views else []),
            *(["search"] if spec.search_fields and "search" in spec.builtin_views else []),
            *(
                [*(["warehouse.current"] if spec.current_table else []), "warehouse.history"]
                if "warehouse" in spec.builtin_views
                else []
            ),
            *[f"{_view_name(v)} (own)" for v in spec.views],
            *(["aggregate (delta)"] if spec.aggregate is not None else []),
        ]
        print(f"{spec.name:10} {spec.kind:6} {spec.default_topic:28} {', '.join(views):52} {known.origin}")
    return 0


def _view_name(source: object) -> str:
    """A materializer's own view as `list` shows it: its name, or its factory's (built per run)."""
    name = getattr(source, "name", None)
    return name if isinstance(name, str) else f"{getattr(source, '__name__', type(source).__name__)}()"


def _verify(args: argparse.Namespace) -> int:
    if lookup(args.name).aggregate is not None:
        return _verify_aggregate(args)
    plan = generations.resolve(_latest_state(args.name, "verify"), _config(args))
    differences = verify(plan)
    for diff in differences:
        print(diff)
    print(f"{args.name}: {len(differences)} difference(s)")
    return 1 if differences else 0


def _verify_aggregate(args: argparse.Namespace) -> int:
    """The aggregate recomputed as a Spark batch job and compared window by window (aggregate_verify)."""
    config = _config(args)
    plan = generations.resolve(lookup(args.name), config)
    spark_session.require_master(config.master)
    check = verify_aggregate(spark_session.build(config.master, f"materializer-{args.name}-verify"), plan)
    for diff in check.differences:
        print(diff)
    print(f"{args.name}: {check.summary()}")
    return 1 if check.difference_count else 0


def _search(args: argparse.Namespace) -> int:
    """The live generation's search view answers: Tantivy's index or OpenSearch's alias."""
    plan = generations.resolve(_latest_state(args.name, "search"), _config(args))
    tantivy, remote = plan.search(), plan.opensearch()
    if remote is not None:
        remote.check()
        keys, backend = remote.search(args.query, args.limit), "OpenSearch"
    elif tantivy is not None:
        keys, backend = tantivy.search(args.query, args.limit), "Tantivy"
    else:
        raise UnknownView(f"materializer {args.name!r} has no search view (it names no search_fields)")
    for key in keys:
        print(key)
    print(f"{args.name}: {len(keys)} hit(s) from {backend}", file=sys.stderr)
    return 0


COMMANDS = {
    "start": _start,
    "status": _status,
    "stop": _stop,
    "list": _list,
    "verify": _verify,
    "search": _search,
    "snapshot": _snapshot,
    "restore": _restore,
    "rebuild": _rebuild,
}


def main(argv: Sequence[str] | None = None) -> int:
    configure_cli_logging(logging.INFO, fmt="%(asctime)s %(levelname)s %(name)s: %(message)s")
    parser = _parser()
    args = parser.parse_args(argv)
    environment = for_program("materializers", SHARED, VARIABLES)
    if (refused := refuse_bad_settings("materializers", environment, parser, args)) is not None:
        return refused
    try:
        return COMMANDS[args.command](args)
    except ToolkitError as exc:
        print(f"error: {masked(str(exc))}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
