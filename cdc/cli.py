"""`cdc`: manage Debezium Postgres connectors and read their change events.

Endpoints come from the environment (KAFKA_CONNECT_URL, KAFKA_BOOTSTRAP_SERVERS, PG_DSN, and
SCHEMA_REGISTRY_URL for Avro records) and are overridden by --connect-url, --bootstrap-servers,
--pg-dsn, --registry-url; Connect's and the registry's login and TLS settings come from
KAFKA_CONNECT_USERNAME/_PASSWORD/_TOKEN/_CA_FILE/_CLIENT_CERT/_CLIENT_KEY and the same SCHEMA_REGISTRY_*
(kafkakit.http_auth). Connectors write Avro unless their spec names another `format`; an Avro
spec without `registry.url` gets the registry endpoint (it must be the URL Connect reaches too, as on
the local stack; where Connect sees the registry elsewhere, write registry.url in the spec). `tail`
reads registry Avro and JSON-with-schemas records alike. `--json` prints machine-readable output.
SIGTERM/SIGINT during `tail` stop it cleanly (the consumer is closed, nothing is committed).
librdkafka's warnings and errors are logged on stderr, its informational lines never (kafkakit.logs).
"""

from __future__ import annotations

import argparse
import json
import logging
import signal
import sys
from collections.abc import Callable, Sequence
from types import FrameType
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from cdc.change_event import decode_record
from cdc.column_types import ColumnFinding
from cdc.connect_client import ConnectClient, ConnectorStatus, ValidationResult
from cdc.connector_spec import ConnectorSpec
from cdc.errors import (
    ChangeEventDecodeError,
    ConnectorConfigInvalid,
    ConnectorFailed,
    ConnectRequestError,
    ConnectUnavailable,
    PreflightFailed,
    RegistryUnavailable,
    SecretUnresolved,
    SpecError,
    WaitTimeout,
)
from cdc.health import DEFAULT_RETAINED_WAL_WARN_BYTES, HealthReport, collect
from cdc.preflight import PreflightReport, examine
from cdc.registry_client import RegistryClient
from cdc.render import event_json, jsonable
from cdc.schema_refusal import explained_cause
from cdc.slots import drop_slot
from kafkakit.clients import make_consumer
from kafkakit.environment import SHARED, for_program, refuse_bad_settings
from kafkakit.errors import BadStartPosition, ToolkitError
from kafkakit.logs import configure_cli_logging
from kafkakit.positions import Edge, StartPosition, parse_partition_offsets, parse_timestamp, resolve
from kafkakit.replication import live_brokers, replication_problem
from kafkakit.secrets import masked
from kafkakit.settings import Endpoints

EXIT_OK = 0
EXIT_REFUSED = 1
EXIT_USAGE = 2
EXIT_FAILED = 3
EXIT_UNAVAILABLE = 4
EXIT_INTERRUPTED = 130

EXIT_CODES_HELP = """exit codes:
  0    success
  1    refused: invalid spec or config (named per field), pre-flight failure, bad start position,
       undecodable record, unknown connector
  2    usage error (bad arguments)
  3    a connector or task is FAILED (`status`, `apply`), or `health` found warnings
  4    a service (Connect, Kafka, the schema registry) is unreachable or answered with an unexpected
       error; or a wait timed out
  130  interrupted"""


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if (refused := refuse_bad_settings("cdc", for_program("cdc", SHARED), parser, args)) is not None:
        return refused
    configure_cli_logging(logging.WARNING)
    out = Console(highlight=False, soft_wrap=True)
    err = Console(stderr=True, highlight=False, soft_wrap=True)
    handler: Callable[[argparse.Namespace, Endpoints, Console], int] = args.handler
    try:
        # inside the try: a refused Kafka client config (KAFKA_CLIENT_*) is reported like any refusal
        endpoints = Endpoints.from_env().with_overrides(
            kafka_bootstrap_servers=getattr(args, "bootstrap_servers", None),
            kafka_connect_url=getattr(args, "connect_url", None),
            pg_dsn=getattr(args, "pg_dsn", None),
            schema_registry_url=getattr(args, "registry_url", None),
        )
        return handler(args, endpoints, out)
    except ConnectorConfigInvalid as exc:
        _print_field_errors(err, exc.field_errors, f"connector {exc.connector!r} not registered")
        return EXIT_REFUSED
    except PreflightFailed as exc:
        _print_field_errors(err, exc.problems, "pre-flight checks failed; nothing was registered")
        return EXIT_REFUSED
    except ConnectorFailed as exc:
        err.print(f"[red]{escape(masked(str(exc)))}[/red]")
        if exc.trace:
            err.print(masked(exc.trace), markup=False)
        return EXIT_FAILED
    except (ConnectUnavailable, WaitTimeout, RegistryUnavailable) as exc:
        err.print(f"[red]error:[/red] {escape(masked(str(exc)))}")
        return EXIT_UNAVAILABLE
    except ConnectRequestError as exc:
        err.print(f"[red]error:[/red] {escape(masked(str(exc)))}")
        return EXIT_REFUSED if exc.status_code in (400, 404, 409, 422) else EXIT_UNAVAILABLE
    except (SpecError, BadStartPosition, ChangeEventDecodeError, ToolkitError) as exc:
        err.print(f"[red]error:[/red] {escape(masked(str(exc)))}")
        return EXIT_REFUSED
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED


# ---- parser ------------------------------------------------------------------------------------
def _parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    # SUPPRESS lets the same flags appear before or after the sub-command without clobbering.
    common.add_argument(
        "--bootstrap-servers", default=argparse.SUPPRESS, help="Kafka (env KAFKA_BOOTSTRAP_SERVERS)"
    )
    common.add_argument(
        "--connect-url", default=argparse.SUPPRESS, help="Kafka Connect REST (env KAFKA_CONNECT_URL)"
    )
    common.add_argument("--pg-dsn", default=argparse.SUPPRESS, help="Postgres DSN for checks (env PG_DSN)")
    common.add_argument(
        "--registry-url",
        default=argparse.SUPPRESS,
        help="schema registry, for Avro records and for Avro specs without registry.url (env SCHEMA_REGISTRY_URL)",
    )
    common.add_argument(
        "--json", action="store_true", default=argparse.SUPPRESS, help="machine-readable output"
    )
    fmt = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(
        prog="cdc", description=__doc__, epilog=EXIT_CODES_HELP, formatter_class=fmt, parents=[common]
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name: str, help_: str, handler: Callable[..., int]) -> argparse.ArgumentParser:
        p = sub.add_parser(
            name, help=help_, description=help_, epilog=EXIT_CODES_HELP, formatter_class=fmt, parents=[common]
        )
        p.set_defaults(handler=handler)
        return p

    p = command(
        "validate", "check a spec file: pre-flight against Postgres, then Connect's validate", _validate
    )
    p.add_argument("file", help="connector spec (.yaml, .yml or .json)")
    p.add_argument("--skip-preflight", action="store_true", help="only ask Connect")
    _preflight_at(p)
    p = command("apply", "create or update the connector from a spec file (validates first)", _apply)
    p.add_argument("file", help="connector spec (.yaml, .yml or .json)")
    p.add_argument("--skip-preflight", action="store_true", help="do not check (or prepare) Postgres first")
    _preflight_at(p)
    p.add_argument(
        "--no-wait", action="store_true", help="return once registered, without waiting for RUNNING"
    )
    p.add_argument("--timeout", type=float, default=90.0, help="seconds to wait for RUNNING (default 90)")
    p = command("status", "connector and task states; exits 3 if anything FAILED (shows the trace)", _status)
    p.add_argument("name", nargs="?", help="one connector (default: all)")
    for verb, text in (("pause", "pause a connector"), ("resume", "resume a paused connector")):
        command(verb, text, _simple).add_argument("name")
    p = command("restart", "restart a connector and its tasks", _simple)
    p.add_argument("name")
    p.add_argument("--only-failed", action="store_true", help="restart only FAILED instances")
    p = command("delete", "delete a connector (its slot stays unless --drop-slot)", _simple)
    p.add_argument("name")
    p.add_argument("--drop-slot", action="store_true", help="also drop its replication slot and publication")
    p = command("tail", "print decoded change events of a topic as JSON lines", _tail)
    p.add_argument("topic")
    start = p.add_mutually_exclusive_group()
    start.add_argument("--from-beginning", action="store_true", help="start at the earliest offset")
    start.add_argument("--offset", metavar="P:N[,P:N]", help="start at partition:offset")
    start.add_argument("--timestamp", metavar="ISO", help="start at the first record at/after this time")
    p.add_argument("--max", type=int, metavar="N", help="stop after N records")
    p.add_argument("--idle-timeout", type=float, metavar="S", help="stop after S seconds without records")
    p.add_argument(
        "--on-error",
        choices=("stop", "skip"),
        default="stop",
        help="a record that cannot be decoded: stop (exit 1, the default) or print its position and reason "
        "to stderr and go on (exit 1 at the end if any was skipped)",
    )
    p = command(
        "health", "slot WAL retention, connector states, topic end offsets; exits 3 on warnings", _health
    )
    p.add_argument("name", nargs="?", help="one connector (default: all, plus orphan slots)")
    p.add_argument(
        "--warn-bytes",
        type=int,
        default=DEFAULT_RETAINED_WAL_WARN_BYTES,
        help="retained-WAL warning threshold",
    )
    return parser


def _wants_json(args: argparse.Namespace) -> bool:
    return bool(getattr(args, "json", False))


def _emit(out: Console, doc: Any) -> None:
    out.print_json(json.dumps(jsonable(doc)))


def _print_field_errors(err: Console, errors: Sequence[tuple[str, str]], title: str) -> None:
    table = Table(title=title, title_justify="left")
    table.add_column("field", style="bold", overflow="fold")
    table.add_column("problem", overflow="fold")  # long column names and SQL fold rather than crop
    for field, msg in errors:
        table.add_row(escape(field), escape(masked(msg)))
    err.print(table)


def _preflight_at(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--preflight-at",
        metavar="HOST:PORT",
        help="where this machine reaches the spec's Postgres, when the spec names the address Connect uses "
        "(compose: postgres:5432 inside, 127.0.0.1:55432 here); default: the spec's own",
    )


# ---- handlers ----------------------------------------------------------------------------------
def _load_spec(path: str, ep: Endpoints) -> ConnectorSpec:
    """The spec at `path`; an Avro one naming no registry gets the configured registry endpoint
    (--registry-url, else SCHEMA_REGISTRY_URL, else Endpoints' default), like every other service."""
    return ConnectorSpec.from_file(path, registry_url=ep.schema_registry_url)


def _validate(args: argparse.Namespace, ep: Endpoints, out: Console) -> int:
    spec = _load_spec(args.file, ep)
    problems: list[tuple[str, str]] = []
    warnings: tuple[ColumnFinding, ...] = ()
    if not args.skip_preflight:
        try:
            report = examine(spec, create_heartbeat_table=False, at=args.preflight_at)
        except SecretUnresolved:
            raise  # refused before anything, even the placeholder, is sent to Connect
        except PreflightFailed as exc:  # the login failed: report it with Connect's findings
            problems.extend(exc.problems)
        else:
            problems.extend(report.problems)
            warnings = report.warnings
    with ConnectClient(ep.kafka_connect_url, auth=ep.kafka_connect_auth) as connect:
        result: ValidationResult = connect.validate({**spec.to_config(), "name": spec.name})
    # The heartbeat table is created by `apply`; its absence is not a problem at validate time. (Matched
    # exactly: a user table whose name merely contains the heartbeat table's must keep its problems.)
    missing_heartbeat = f"table {spec.heartbeat.table} does not exist in database "
    problems = [p for p in problems if not p[1].startswith(missing_heartbeat)]
    problems.extend(result.field_errors)
    problems.extend(_replication_problems(spec, ep))
    if _wants_json(args):
        _emit(
            out,
            {
                "connector": spec.name,
                "valid": not problems,
                "errors": [list(p) for p in problems],
                "warnings": [jsonable(w) for w in warnings],
            },
        )
        return EXIT_OK if not problems else EXIT_REFUSED
    _print_column_warnings(out, warnings)
    if problems:
        _print_field_errors(out, problems, f"connector {spec.name!r} is invalid")
    else:
        out.print(
            f"connector {escape(repr(spec.name))} is valid"
            + (" (see the warnings above)" if warnings else "")
        )
    return EXIT_OK if not problems else EXIT_REFUSED


def _replication_problems(spec: ConnectorSpec, ep: Endpoints) -> list[tuple[str, str]]:
    """Connect creates the topics on the first record; a factor the cluster cannot place would fail the
    task then, so it is refused now (only a factor the spec names needs a look at the brokers)."""
    wanted = spec.topics.replication_factor
    if wanted is None:
        return []
    problem = replication_problem(
        wanted,
        live_brokers(ep.kafka_bootstrap_servers, client_config=ep.kafka_client),
        "topics.replication_factor",
    )
    return [("topics.replication_factor", problem)] if problem else []


def _apply(args: argparse.Namespace, ep: Endpoints, out: Console) -> int:
    spec = _load_spec(args.file, ep)
    warnings: tuple[ColumnFinding, ...] = ()
    refused = _replication_problems(spec, ep)
    if refused:
        raise PreflightFailed(refused)  # main prints them; nothing is registered
    if not args.skip_preflight:
        report: PreflightReport = examine(spec, at=args.preflight_at)
        warnings = report.warnings
        if not _wants_json(args):
            _print_column_warnings(out, warnings)
        if report.problems:
            raise PreflightFailed(report.problems)  # main prints them; nothing is registered
    with ConnectClient(ep.kafka_connect_url, auth=ep.kafka_connect_auth) as connect:
        result = connect.apply(spec.name, spec.to_config())
        status = None if args.no_wait else connect.wait_running(spec.name, timeout=args.timeout)
    verb = "created" if result.created else "updated"
    if _wants_json(args):
        _emit(
            out,
            {
                "connector": spec.name,
                "result": verb,
                "state": status.state if status else None,
                "warnings": [jsonable(w) for w in warnings],
            },
        )
    else:
        out.print(
            f"connector {escape(repr(spec.name))} {verb}" + (f", {escape(status.state)}" if status else "")
        )
    return EXIT_OK


def _print_column_warnings(out: Console, warnings: Sequence[ColumnFinding]) -> None:
    """Columns whose values Debezium may carry wrong in some rows; the connector is not refused for them."""
    if not warnings:
        return
    table = Table(
        title="pre-flight warnings: some values of these columns would not arrive exactly",
        title_justify="left",
    )
    for col in ("table", "column", "type", "problem", "workaround"):
        # fold, not crop: a workaround's SQL has long words and must reach the reader whole
        table.add_column(col, style="bold" if col == "column" else None, overflow="fold")
    for w in warnings:
        table.add_row(*(escape(v) for v in (w.table, w.column, w.type, w.problem, w.workaround)))
    out.print(table)


def _status(args: argparse.Namespace, ep: Endpoints, out: Console) -> int:
    with ConnectClient(ep.kafka_connect_url, auth=ep.kafka_connect_auth) as connect:
        names = [args.name] if args.name else list(connect.list_connectors())
        statuses = [connect.status(n) for n in names]
        causes = {
            s.name: explained_cause(
                s.failure_trace,
                connect.config(s.name),
                pg_dsn=ep.pg_dsn,
                registry_url=ep.schema_registry_url,
                registry_auth=ep.schema_registry_auth,
            )
            for s in statuses
            if s.failed
        }
    if _wants_json(args):
        _emit(out, [_status_doc(s, causes.get(s.name)) for s in statuses])
    else:
        _print_status(out, statuses, causes)
    return EXIT_FAILED if any(s.failed for s in statuses) else EXIT_OK


def _status_doc(s: ConnectorStatus, cause: str | None) -> dict[str, Any]:
    return {**jsonable(s), "failed": s.failed, "cause": cause}


def _print_status(out: Console, statuses: Sequence[ConnectorStatus], causes: dict[str, str | None]) -> None:
    table = Table(title="connectors", title_justify="left")
    for col in ("connector", "state", "tasks", "worker"):
        table.add_column(col)
    for s in statuses:
        tasks = ", ".join(f"{t.id}:{t.state}" for t in s.tasks) or "-"
        style = "red" if s.failed else ("green" if s.running else "yellow")
        table.add_row(
            escape(s.name), f"[{style}]{escape(s.state)}[/{style}]", escape(tasks), escape(s.worker_id)
        )
    out.print(table)
    for s in statuses:
        if s.failed:
            if causes.get(s.name):
                out.print(f"[red]{escape(s.name)} failed:[/red] {escape(str(causes[s.name]))}")
            out.print(f"[red]{escape(s.name)} failure trace:[/red]")
            out.print(s.failure_trace or "(no trace reported)", markup=False)


def _simple(args: argparse.Namespace, ep: Endpoints, out: Console) -> int:
    with ConnectClient(ep.kafka_connect_url, auth=ep.kafka_connect_auth) as connect:
        if args.command == "pause":
            connect.pause(args.name)
        elif args.command == "resume":
            connect.resume(args.name)
        elif args.command == "restart":
            connect.restart(args.name, only_failed=args.only_failed)
        else:
            config = connect.config(args.name) if args.drop_slot else {}
            connect.delete(args.name)
            if args.drop_slot:
                drop_slot(ep.pg_dsn, config.get("slot.name", "debezium"), config.get("publication.name"))
    if _wants_json(args):
        _emit(out, {"connector": args.name, "action": args.command, "ok": True})
    else:
        out.print(f"{args.command}: {escape(args.name)} ok")
    return EXIT_OK


def _start_position(args: argparse.Namespace) -> StartPosition:
    if args.offset:
        return parse_partition_offsets(args.offset)
    if args.timestamp:
        return parse_timestamp(args.timestamp)
    return Edge("earliest" if args.from_beginning else "latest")


class _Stop:
    """Set by SIGTERM/SIGINT so the poll loop can finish the current record and close the consumer."""

    requested = False

    def __call__(self, signum: int, frame: FrameType | None) -> None:
        self.requested = True


def _tail(args: argparse.Namespace, ep: Endpoints, out: Console) -> int:
    import time

    start = _start_position(args)
    consumer = make_consumer(
        {
            "bootstrap.servers": ep.kafka_bootstrap_servers,
            "group.id": "cdc-tail",  # assign() only; nothing is committed, so the group is never used
            "enable.auto.commit": False,
            "enable.partition.eof": False,
        },
        client_config=ep.kafka_client,
    )
    # asked only when an Avro record arrives
    registry = RegistryClient(ep.schema_registry_url, auth=ep.schema_registry_auth)
    stop = _Stop()
    previous = {s: signal.signal(s, stop) for s in (signal.SIGTERM, signal.SIGINT)}
    skipped = 0
    try:
        consumer.assign(resolve(consumer, args.topic, start))
        seen, idle_since = 0, time.monotonic()
        while not stop.requested and (args.max is None or seen < args.max):
            msg = consumer.poll(0.5)
            if msg is None:
                if args.idle_timeout is not None and time.monotonic() - idle_since > args.idle_timeout:
                    break
                continue
            if msg.error():
                raise ConnectUnavailable(f"Kafka error while reading {args.topic}: {msg.error()}")
            seen, idle_since = seen + 1, time.monotonic()
            try:
                item = decode_record(
                    topic=args.topic,
                    partition=msg.partition() or 0,
                    offset=msg.offset() or 0,
                    key=msg.key(),
                    value=msg.value(),
                    schemas=registry,
                )
            except ChangeEventDecodeError as exc:
                if args.on_error == "stop":
                    raise
                skipped += 1
                _report_skipped(exc, json_lines=_wants_json(args))
                continue
            sys.stdout.write(json.dumps(event_json(item), ensure_ascii=False) + "\n")
            sys.stdout.flush()
    finally:
        consumer.close()
        registry.close()
        for s, h in previous.items():
            signal.signal(s, h)
    return EXIT_REFUSED if skipped else EXIT_OK


def _report_skipped(exc: ChangeEventDecodeError, *, json_lines: bool) -> None:
    """One line on stderr per skipped record: where it sits and why, so it can be found and read again."""
    where = {"topic": exc.topic, "partition": exc.partition, "offset": exc.offset}
    if json_lines:
        line = json.dumps({"skipped": where, "table": exc.table, "column": exc.column, "error": str(exc)})
    else:
        line = f"skipped {exc.topic}[{exc.partition}]@{exc.offset}: {exc}"
    sys.stderr.write(line + "\n")
    sys.stderr.flush()


def _health(args: argparse.Namespace, ep: Endpoints, out: Console) -> int:
    with ConnectClient(ep.kafka_connect_url, auth=ep.kafka_connect_auth) as connect:
        report = collect(
            connect=connect,
            pg_dsn=ep.pg_dsn,
            bootstrap_servers=ep.kafka_bootstrap_servers,
            kafka_client=ep.kafka_client,
            registry_url=ep.schema_registry_url,
            registry_auth=ep.schema_registry_auth,
            threshold_bytes=args.warn_bytes,
            only=args.name,
        )
    if _wants_json(args):
        _emit(out, {**jsonable(report), "healthy": report.healthy})
    else:
        _print_health(out, report)
    return EXIT_OK if report.healthy else EXIT_FAILED


def _print_health(out: Console, report: HealthReport) -> None:
    table = Table(title="CDC health", title_justify="left")
    for col in ("connector", "state", "slot", "active", "retained WAL", "set aside", "topic end offsets"):
        table.add_column(col)
    for c in report.connectors:
        ends = ", ".join(f"{e.topic}[{e.partition}]={e.end_offset}" for e in c.topic_ends) or "-"
        retained = "-" if c.slot is None or c.slot.retained_bytes is None else f"{c.slot.retained_bytes} B"
        active = "-" if c.slot is None else str(c.slot.active)
        aside = "-" if c.oversize_topic is None else str(c.oversize_records)
        table.add_row(
            *(escape(v) for v in (c.name, c.status.state, c.slot_name, active, retained, aside, ends))
        )
    for s in report.orphan_slots:
        table.add_row("(none)", "-", escape(s.slot_name), str(s.active), f"{s.retained_bytes} B", "-", "-")
    out.print(table)
    for w in report.warnings:
        out.print(f"[yellow]warning:[/yellow] {escape(w)}")
    if report.healthy:
        out.print("[green]healthy[/green]")


if __name__ == "__main__":
    raise SystemExit(main())
