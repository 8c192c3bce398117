"""`eventstore` command line: init, processor, execute, read, subscribe, replay, schemas.

Settings: flags > environment (KAFKA_BOOTSTRAP_SERVERS, SCHEMA_REGISTRY_URL, EVENTSTORE_NAME, ...) >
defaults. `--json` prints machine-readable output (one JSON document or JSON lines).

Exit codes:
  0  success
  1  unexpected error (a bug: please report with the traceback)
  2  usage or configuration error (bad flag, bad JSON, unknown command type; StoreConfigError: the
     aggregate or the endpoints cannot make a store, e.g. a missing schema file or registry URL)
  3  WrongExpectedVersion: the stream moved; re-read and decide again
  4  domain error: the command broke a business rule; nothing was appended
  5  invalid input: schema violation / command rejected / incompatible schema; nothing was appended
  6  outcome unknown (timeout, broker down): retrying with the same --command-id is safe
  7  infrastructure error (Kafka, registry, topics, undecodable record, replay); also
     SubjectsNeedMigration: the store's schemas are still under the old `<store>-<record type>`
     subjects; run `eventstore schemas migrate --name NAME`, then retry
  8  not found: `read` of a stream that has no committed events (check the stream id)
  75 `processor`: a transaction stayed open 30 s (a Kafka client stuck on a vanished coordinator,
     librdkafka #5511); restart it (same --instance-id), as a supervisor would
"""

from __future__ import annotations

import argparse
import importlib
import json
import logging
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Sequence
from contextlib import closing
from dataclasses import asdict
from types import FrameType
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.progress import Progress
from rich.table import Table

from eventstore import errors
from eventstore.aggregate import Aggregate
from eventstore.config import StoreConfig
from eventstore.envelope import EventEnvelope
from eventstore.environment import VARIABLES
from eventstore.migration import Step, migrate
from eventstore.records import from_record, to_record
from eventstore.registry import HttpRegistry
from eventstore.replay import as_json, dumps, read_records, replay_to_topic
from eventstore.store import EventStore
from kafkakit.environment import SHARED, for_program, refuse_bad_settings
from kafkakit.errors import BadStartPosition, ConfigError
from kafkakit.logs import configure_cli_logging
from kafkakit.positions import parse_partition_offsets, parse_start, parse_timestamp
from kafkakit.secrets import masked

ENV_AGGREGATE = "EVENTSTORE_AGGREGATE"
EXIT = {
    errors.WrongExpectedVersion: 3,
    errors.DomainError: 4,
    errors.SchemaViolation: 5,
    errors.CommandRejected: 5,
    errors.SchemaIncompatible: 5,
    errors.OutcomeUnknown: 6,
    errors.StreamNotFound: 8,
    BadStartPosition: 2,
    ConfigError: 2,
}
out = Console()
err = Console(stderr=True)


SCHEMAS_HELP = """\
Subjects follow TopicRecordNameStrategy, `<topic>-<record full name>` (e.g.
orders.events-kafkatoolkit.order.OrderCreated); the outcome record has one subject per topic it is
written to (orders.outcomes-..., orders.replies-...).

  list      every subject with its latest version and schema id
  check     what `register` would do; registers nothing
  register  register new and evolved schemas (an incompatible one is refused: exit 5)
  migrate   move a store registered under the old `<store>-<record type>` subjects: every version of
            each old subject is registered under the new subject(s), oldest first, with the same
            schema ids; old subjects stay. Repeatable: a second run changes nothing and says so.
            Until a store is migrated, init, register, check, the processor and execute refuse to
            run (SubjectsNeedMigration, exit 7) rather than start new subjects beside the old ones.
"""


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--name", help="store name: prefix of its topics, hence of its subjects (env EVENTSTORE_NAME)"
    )
    p.add_argument("--bootstrap-servers", help="Kafka bootstrap servers (env KAFKA_BOOTSTRAP_SERVERS)")
    p.add_argument(
        "--schema-registry-url", help="Confluent-compatible registry URL (env SCHEMA_REGISTRY_URL)"
    )
    p.add_argument("--partitions", type=int, help="partitions per store topic (env EVENTSTORE_PARTITIONS)")
    p.add_argument(
        "--replication-factor",
        type=int,
        help="replicas per store topic (env EVENTSTORE_REPLICATION_FACTOR; default: the cluster's "
        "default.replication.factor)",
    )
    p.add_argument(
        "--aggregate",
        help=f"module:attribute of your Aggregate, e.g. mypkg.orders:ORDER (env {ENV_AGGREGATE})",
    )
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument("-v", "--verbose", action="store_true", help="log progress to stderr")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="eventstore", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="cmd", required=True)

    p = sub.add_parser("init", help="create the store's topics and register its schemas")
    _common(p)

    p = sub.add_parser("processor", help="run the command processor (SIGTERM: finish or abort, then exit)")
    _common(p)
    p.add_argument(
        "--instance-id", default=socket.gethostname(), help="stable per instance; restarts reuse it"
    )
    p.add_argument(
        "--batch-size", type=int, default=200, help="commands decided per transaction, at most (default 200)"
    )
    p.add_argument("--snapshot-every", type=int, help="snapshot a stream every N events (0: never)")
    p.add_argument(
        "--rebuild-window",
        type=int,
        help="a takeover reads about this many event records per partition beyond snapshots",
    )
    p.add_argument(
        "--transaction-timeout-ms",
        type=int,
        help="the Kafka transaction timeout (env EVENTSTORE_TRANSACTION_TIMEOUT_MS; default 60000)",
    )
    p.add_argument("--max-idle", type=float, help="exit after this many idle seconds")

    p = sub.add_parser("execute", help="send one command and wait for its outcome")
    _common(p)
    p.add_argument("--command", required=True, help="command type, e.g. order.create")
    p.add_argument("--data", required=True, help="command fields as a JSON object")
    p.add_argument("--stream", help="stream id (default: derived by the aggregate)")
    p.add_argument("--expected-version", type=int, help="fail unless the stream is at this version (0: new)")
    p.add_argument("--command-id", help="idempotency key; reuse it to retry safely")
    p.add_argument("--timeout", type=float, help="seconds to wait for the reply")

    p = sub.add_parser("read", help="print one stream's events in version order")
    _common(p)
    p.add_argument("stream")

    p = sub.add_parser("subscribe", help="print committed events from a start position")
    _common(p)
    p.add_argument("--from", dest="start", default="earliest", help="earliest|latest|P:N,..|JSON|ISO time")
    p.add_argument("--until-end", action="store_true", help="stop at the end offsets seen at start")
    p.add_argument("--idle-timeout", type=float, help="stop after this many seconds without events")
    p.add_argument("--dlq-topic", help="copy undecodable events here instead of stopping")

    p = sub.add_parser("replay", help="copy a topic range to another topic (exactly once) or to stdout")
    _common(p)
    p.add_argument("--topic", required=True, help="source topic")
    start = p.add_mutually_exclusive_group(required=True)
    start.add_argument("--from-offset", help="P:N[,P:N] first offsets")
    start.add_argument("--from-timestamp", help="ISO-8601 time")
    p.add_argument("--until-offset", help="P:N[,P:N] end offsets (exclusive); default: the current end")
    dest = p.add_mutually_exclusive_group(required=True)
    dest.add_argument("--to-topic", help="copy the range to this topic, exactly once")
    dest.add_argument("--to-stdout", action="store_true", help="print the range as JSON lines instead")

    p = sub.add_parser(
        "schemas",
        help="list, check, register or migrate the store's Avro schemas",
        description=SCHEMAS_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _common(p)
    p.add_argument(
        "action", choices=["list", "check", "register", "migrate"], help="what to do (described above)"
    )
    return parser


def _config(args: argparse.Namespace) -> StoreConfig:
    return StoreConfig.from_env().with_overrides(
        name=args.name,
        bootstrap_servers=args.bootstrap_servers,
        schema_registry_url=args.schema_registry_url,
        partitions=args.partitions,
        replication_factor=args.replication_factor,
        snapshot_every=getattr(args, "snapshot_every", None),
        rebuild_window=getattr(args, "rebuild_window", None),
        transaction_timeout_ms=getattr(args, "transaction_timeout_ms", None),
        dlq_topic=getattr(args, "dlq_topic", None),
    )


def load_aggregate(spec: str) -> Aggregate[Any]:
    if not spec:
        raise ConfigError(
            f"no aggregate named: give --aggregate module:attribute (e.g. mypkg.orders:ORDER) or set "
            f"{ENV_AGGREGATE}; the store's commands, events and schemas are the aggregate's"
        )
    module, _, attr = spec.partition(":")
    try:
        found = getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError) as exc:
        raise ConfigError(f"--aggregate {spec!r} not found ({exc}); write module:attribute") from exc
    if not isinstance(found, Aggregate):
        raise ConfigError(f"--aggregate {spec!r} is a {type(found).__name__}, not an Aggregate")
    return found


def _table(title: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    table = Table(title=title)
    for column in columns:
        table.add_column(column)
    for row in rows:
        table.add_row(*(escape(str(c)) for c in row))  # stream ids and data are not markup
    out.print(table)


def _event_json(event: EventEnvelope) -> dict[str, Any]:
    return {
        "stream_id": event.stream_id,
        "version": event.version,
        "event_type": event.event_type,
        "data": to_record(event.event),
        "command_id": event.command_id,
        "timestamp_ms": event.timestamp_ms,
        "position": str(event.position),
    }


def cmd_init(args: argparse.Namespace, store: EventStore[Any]) -> int:
    report = store.init()
    if args.json:
        print(json.dumps({"topics": dict(report.topics), "schemas": [asdict(r) for r in report.schemas]}))
    else:
        _table("topics", ["topic", "status"], report.topics)
        _table(
            "schemas",
            ["subject", "status", "version", "id"],
            [(r.subject, r.status, r.version, r.schema_id) for r in report.schemas],
        )
    return 0


# `eventstore processor` exits with this when a transaction stays open TRANSACTION_STUCK_S (a hung
# client library): a supervisor restarts it, and the restart's init_transactions (same transactional
# id) aborts the stuck transaction, so exiting before the broker's own timeout loses nothing. A
# failover keeps a transaction open a little past the broker's session timeout (9 s by default, then
# leaders move); 30 s is well past that.
EXIT_TRANSACTION_HUNG = 75
TRANSACTION_STUCK_S = 30.0


def _watch_transactions(processor: Any, limit_s: float) -> None:
    """Exit the process when a transaction stays open longer than `limit_s` (see
    `CommandProcessor.transaction_open_for`): only a new process gets past a librdkafka call that
    ignores its timeout."""
    while True:
        time.sleep(1.0)
        stuck = processor.transaction_open_for()
        if stuck > limit_s:
            logging.getLogger(__name__).critical(
                "a transaction has been open for %.0fs (limit %.0fs); "
                "the Kafka client is stuck, exiting with %d for the supervisor to restart this processor",
                stuck, limit_s, EXIT_TRANSACTION_HUNG,
            )  # fmt: skip
            os._exit(EXIT_TRANSACTION_HUNG)


def cmd_processor(args: argparse.Namespace, store: EventStore[Any]) -> int:
    processor = store.processor(args.instance_id, batch_size=args.batch_size)
    threading.Thread(target=_watch_transactions, args=(processor, TRANSACTION_STUCK_S), daemon=True).start()

    def stop(signum: int, _frame: FrameType | None) -> None:
        logging.getLogger(__name__).info("signal %d: finishing the current transaction, then exiting", signum)
        processor.stop_requested.set()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    processor.run(max_idle_s=args.max_idle)
    return 0


def cmd_execute(args: argparse.Namespace, store: EventStore[Any]) -> int:
    aggregate = store.aggregate
    cls = aggregate.record_class(args.command)
    if cls is None or cls not in aggregate.command_types:
        names = [c.command_type for c in aggregate.command_types]  # type: ignore[attr-defined]
        raise ConfigError(f"unknown command type {args.command!r}; known: {names}")
    try:
        data = json.loads(args.data)
    except json.JSONDecodeError as exc:
        raise ConfigError(f'--data is not JSON ({exc.msg}); write e.g. \'{{"order_id": "42"}}\'') from exc
    if not isinstance(data, dict):
        raise ConfigError(
            f'--data must be a JSON object of the command\'s fields, not {type(data).__name__}; write e.g. \'{{"order_id": "42"}}\''
        )
    store.serde.validate(args.command, data)  # names the field before anything is sent
    with store.client() as client:
        outcome = client.execute(
            from_record(cls, data),
            expected_version=args.expected_version,
            command_id=args.command_id,
            stream_id=args.stream,
            timeout=args.timeout,
        )
    if args.json:
        print(json.dumps(asdict(outcome)))
    else:
        out.print(
            f"[green]ok[/] {outcome.stream_id} now at version {outcome.last_version} (command {outcome.command_id})"
        )
    return 0


def cmd_read(args: argparse.Namespace, store: EventStore[Any]) -> int:
    found = store.read(args.stream)
    if not found:
        name = store.aggregate.name
        raise errors.StreamNotFound(
            f"stream {args.stream!r} has no committed events in {store.config.events_topic}; check the id "
            f"(stream ids are {name}-<id>, e.g. {name}-42) and the store --name"
        )
    if args.json:
        for event in found:
            print(dumps(_event_json(event)))
    else:
        _table(
            args.stream,
            ["version", "type", "position", "data"],
            [(e.version, e.event_type, e.position, to_record(e.event)) for e in found],
        )
    return 0


def cmd_subscribe(args: argparse.Namespace, store: EventStore[Any]) -> int:
    events = store.subscribe(
        parse_start(args.start), until_end=args.until_end, idle_timeout=args.idle_timeout
    )
    for event in events:
        if args.json:
            print(dumps(_event_json(event)), flush=True)
        else:
            out.print(
                f"{event.position} {event.stream_id} v{event.version} {event.event_type} {to_record(event.event)}"
            )
    return 0


def cmd_replay(args: argparse.Namespace, config: StoreConfig) -> int:
    """Replay copies or prints records of any topic: it needs no aggregate (bytes are copied as they
    are, values printed with their writer schema from the registry)."""
    topic = args.topic or config.events_topic
    start = (
        parse_partition_offsets(args.from_offset)
        if args.from_offset
        else parse_timestamp(args.from_timestamp)
    )
    until = None
    if args.until_offset:
        until = {p: n for _, p, n in parse_partition_offsets(args.until_offset).by_partition}
    if args.to_stdout:
        with closing(HttpRegistry(config.schema_registry_url, auth=config.schema_registry_auth)) as registry:
            for msg in read_records(
                config.bootstrap_servers, topic, start, until, client_config=config.kafka_client
            ):
                print(dumps(as_json(msg, registry)), flush=True)
        return 0
    with Progress(console=err, disable=args.json) as progress:
        task = progress.add_task(f"{topic} -> {args.to_topic}", total=None)
        report = replay_to_topic(
            config.bootstrap_servers,
            topic,
            start,
            args.to_topic,
            until=until,
            on_batch=lambda n: progress.advance(task, n),
            client_config=config.kafka_client,
        )
    if args.json:
        print(
            json.dumps({"copied": report.copied, "resumed_from": report.resumed_from, "total": report.total})
        )
    else:
        _table(
            "replayed",
            ["partition", "copied", "resumed from"],
            [(p, n, report.resumed_from.get(p, "")) for p, n in sorted(report.copied.items())],
        )
    return 0


def cmd_schemas(args: argparse.Namespace, store: EventStore[Any]) -> int:
    if args.action == "migrate":
        return _migrate(args, store)
    if args.action in ("register", "check"):
        reports = store.register_schemas(dry_run=args.action == "check")
    else:
        rows = []
        for record_type in sorted(store.serde.catalog.texts):
            for subject in store.serde.subjects(record_type):
                latest = store.registry.latest(subject)
                rows.append(
                    (
                        subject,
                        record_type,
                        latest.version if latest else "-",
                        latest.schema_id if latest else "-",
                    )
                )
        if args.json:
            print(
                json.dumps(
                    [
                        dict(zip(("subject", "record_type", "version", "schema_id"), r, strict=True))
                        for r in rows
                    ]
                )
            )
        else:
            _table("schemas", ["subject", "record type", "version", "id"], rows)
        return 0
    if args.json:
        print(json.dumps([asdict(r) for r in reports]))
    else:
        _table(
            f"schemas ({args.action})",
            ["subject", "status", "version", "id"],
            [(r.subject, r.status, r.version, r.schema_id) for r in reports],
        )
    return 0


def _migrate(args: argparse.Namespace, store: EventStore[Any]) -> int:
    steps = migrate(store.registry, store.serde.names)
    copied = sum(step.status == "copied" for step in steps)
    if args.json:
        print(json.dumps({"copied": copied, "steps": [_step_json(step) for step in steps]}))
        return 0
    if not steps:
        out.print(f"no old subjects {store.config.name}-<record type> found: nothing to migrate")
        return 0
    _table(
        "schemas (migrate)",
        ["old subject", "version", "new subject", "new version", "id", "status"],
        [(s.old_subject, s.old_version, s.new_subject, s.new_version, s.schema_id, s.status) for s in steps],
    )
    out.print(
        f"copied {copied} version(s)"
        if copied
        else "nothing to do: every old version is already under its new subject"
    )
    return 0


def _step_json(step: Step) -> dict[str, Any]:
    return {k: v for k, v in asdict(step).items() if k != "text"}


COMMANDS = {
    "init": cmd_init,
    "processor": cmd_processor,
    "execute": cmd_execute,
    "read": cmd_read,
    "subscribe": cmd_subscribe,
    "schemas": cmd_schemas,
}


def exit_code(exc: BaseException) -> int:
    for cls, code in EXIT.items():
        if isinstance(exc, cls):
            return code
    return 7 if isinstance(exc, errors.EventStoreError) else 1


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    environment = for_program("eventstore", SHARED, VARIABLES)
    if (refused := refuse_bad_settings("eventstore", environment, parser, args)) is not None:
        return refused
    # librdkafka's INFO lines stay off stderr even with --verbose; its warnings show (kafkakit.logs).
    configure_cli_logging(logging.INFO if args.verbose else logging.WARNING)
    try:
        if args.cmd == "replay":
            return cmd_replay(args, _config(args))
        aggregate = load_aggregate(args.aggregate or os.environ.get(ENV_AGGREGATE, ""))
        with EventStore(_config(args), aggregate) as store:
            return COMMANDS[args.cmd](args, store)
    except (errors.EventStoreError, BadStartPosition, ConfigError) as exc:
        if args.json:
            print(json.dumps({"error": type(exc).__name__, "message": masked(str(exc)), **_details(exc)}))
        err.print(f"[red]{type(exc).__name__}[/]: {escape(masked(str(exc)))}")
        return exit_code(exc)


def _details(exc: BaseException) -> dict[str, Any]:
    keys = (
        "field",
        "reason",
        "stream_id",
        "expected",
        "actual",
        "command_id",
        "may_have_been_applied",
        "topic",
        "partition",
        "offset",
        "subjects",
    )
    return {k: getattr(exc, k) for k in keys if hasattr(exc, k)}


if __name__ == "__main__":
    sys.exit(main())
