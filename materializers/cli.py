"""`materializers` command line: start, status, stop, list, verify.

Exit codes: 0 success, 1 the job failed or `verify` found differences, 2 bad input (the message says
what to fix). Every check that needs no Spark (name, start position, Redis, topic, checkpoint owner)
runs before a SparkSession is built, so bad input fails in a second and writes nothing.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict

from kafkakit.errors import ToolkitError
from kafkakit.positions import StartPosition, parse_start, parse_timestamp
from materializers import positions, spark_session, status
from materializers.catalog import CATALOG, lookup
from materializers.config import RunConfig
from materializers.errors import JobNotRunning
from materializers.job import Job, JobPlan, claim_checkpoint, topic_partitions
from materializers.verify import verify

log = logging.getLogger("materializers")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="materializers", description=__doc__)
    parser.add_argument("--home", help="state directory (checkpoints, views, status); env MATERIALIZERS_HOME")
    sub = parser.add_subparsers(dest="command", required=True)

    start = sub.add_parser("start", help="run a materializer in the foreground until stopped")
    start.add_argument("name")
    where = start.add_mutually_exclusive_group()
    where.add_argument(
        "--from", dest="start", default="latest", help="earliest | latest | OFFSETS_JSON (first run only)"
    )
    where.add_argument("--from-timestamp", help="ISO-8601 time to start from (first run only)")
    start.add_argument("--trigger", help="micro-batch interval, e.g. 1s, 500ms (default 1s)")
    start.add_argument("--master", help="Spark master URL (default local[2])")
    start.add_argument("--available-now", action="store_true", help="process what is there, then exit")
    for p in (
        start,
        sub.add_parser("verify", help="compare a view with its source of truth; exit 1 on differences"),
    ):
        if p is not start:
            p.add_argument("name")
        p.add_argument("--topic", help="input topic (default: the materializer's)")
        p.add_argument("--table", help="Postgres table a CDC view mirrors (default: the materializer's)")
        p.add_argument("--checkpoint", help="checkpoint directory (default <home>/<name>/checkpoint)")
        p.add_argument("--dlq-topic", help="dead-letter topic (default <topic>.dlq)")
        p.add_argument("--redis-prefix", help="Redis key prefix (default mat)")

    show = sub.add_parser("status", help="per job: lag, rates, last batch, dead letters, last error")
    show.add_argument("--json", action="store_true")
    stop = sub.add_parser("stop", help="stop a running job gracefully (finishes its current batch)")
    stop.add_argument("name", nargs="?", help="job to stop (default: every running job)")
    stop.add_argument("--timeout", type=float, default=120.0)
    sub.add_parser("list", help="the materializers this toolkit knows")
    return parser


def _config(args: argparse.Namespace) -> RunConfig:
    flags = {
        k: getattr(args, k, None)
        for k in ("home", "topic", "table", "checkpoint", "dlq_topic", "redis_prefix", "trigger", "master")
    }
    return RunConfig.from_env().with_overrides(**flags)


def _start(args: argparse.Namespace) -> int:
    spec = lookup(args.name)
    begin: StartPosition = (
        parse_timestamp(args.from_timestamp) if args.from_timestamp else parse_start(args.start)
    )
    plan = JobPlan.of(spec, _config(args))
    plan.cache().check()
    partitions = topic_partitions(plan.config.endpoints.kafka_bootstrap_servers, plan.topic)
    positions.spark_start_options(begin, {plan.topic: partitions})  # a bad position fails here, not in Spark
    claim_checkpoint(plan)
    spark = spark_session.build(plan.config.master, f"materializer-{spec.name}")
    job = Job(spark, plan)
    code = job.run(begin, available_now=args.available_now)
    final = status.read(plan.job_dir)
    if code and final is not None:
        print(f"materializer {spec.name} failed: {final.last_error}", file=sys.stderr)
    return code


def _jobs(config: RunConfig) -> list[status.JobStatus]:
    if not config.home.is_dir():
        return []
    found = [status.read(d) for d in sorted(config.home.iterdir()) if d.is_dir()]
    return [s for s in found if s is not None]


def _status(args: argparse.Namespace) -> int:
    jobs = _jobs(_config(args))
    rows = []
    for job in jobs:
        state = job.state if job.state not in ("running", "starting") or status.alive(job.pid) else "dead"
        rows.append({**asdict(job), "state": state, "total_lag": job.total_lag})
    if args.json:
        print(json.dumps(rows, indent=2, sort_keys=True))
        return 0
    if not rows:
        print(f"no jobs under {_config(args).home}")
        return 0
    header = f"{'NAME':12} {'STATE':8} {'BATCH':>6} {'LAG':>8} {'IN/S':>8} {'OUT/S':>8} {'LAST MS':>8} {'DLQ':>5}  LAST ERROR"
    print(header)
    for r in rows:
        print(
            f"{r['name']:12} {r['state']:8} {r['batch_id']:>6} {r['total_lag']:>8} {r['input_rows_per_second']:>8.1f} "
            f"{r['processed_rows_per_second']:>8.1f} {r['last_batch_ms']:>8} {r['dead_letters']:>5}  {r['last_error'][:60]}"
        )
    return 0


def _stop(args: argparse.Namespace) -> int:
    config = _config(args)
    targets = [
        j
        for j in _jobs(config)
        if (args.name in (None, j.name)) and j.state in ("running", "starting") and status.alive(j.pid)
    ]
    if not targets:
        raise JobNotRunning(
            f"no running job{' named ' + args.name if args.name else ''} under {config.home}; see `materializers status`"
        )
    for job in targets:
        (config.job_dir(job.name) / "stop").touch()
        os.kill(job.pid, signal.SIGTERM)
    deadline = time.monotonic() + args.timeout
    while time.monotonic() < deadline and any(status.alive(j.pid) for j in targets):
        time.sleep(0.2)
    alive = [j.name for j in targets if status.alive(j.pid)]
    for job in targets:
        print(f"{job.name}: {'still stopping' if job.name in alive else 'stopped'}")
    return 1 if alive else 0


def _list(_args: argparse.Namespace) -> int:
    for spec in CATALOG.values():
        views = (
            ["cache"]
            + (["search"] if spec.search_fields else [])
            + (["warehouse.current"] if spec.current_table else [])
            + ["warehouse.history"]
        )
        print(f"{spec.name:10} {spec.kind:6} {spec.default_topic:28} {', '.join(views)}")
    return 0


def _verify(args: argparse.Namespace) -> int:
    plan = JobPlan.of(lookup(args.name), _config(args))
    differences = verify(plan)
    for diff in differences:
        print(diff)
    print(f"{args.name}: {len(differences)} difference(s)")
    return 1 if differences else 0


COMMANDS = {"start": _start, "status": _status, "stop": _stop, "list": _list, "verify": _verify}


def main(argv: Sequence[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    args = _parser().parse_args(argv)
    try:
        return COMMANDS[args.command](args)
    except ToolkitError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
