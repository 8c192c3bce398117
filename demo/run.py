"""`make demo`: the whole toolkit end to end on the real stack, narrated.

1. a stack (reused from .stack/env, or started and stopped again);
2. a shop in Postgres captured by Debezium through `cdc` as Avro records (snapshot, then streaming);
3. concurrent clients driving the event-sourced Order aggregate, refused and retried commands included;
4. the products and orders materializers (Spark) under a live workload, with a live status;
5. a search query (answered by the backend the products' search view lives in: Tantivy, or OpenSearch
   with DEMO_SEARCH=opensearch), an `eventstore replay`, a materializer killed and restarted, `verify`
   on every view; the `sku_per_minute` aggregate over order lines arriving out of order and late
   (demo/aggregates.py), its late, refused and dead-lettered records counted and `verify` exact;
6. a summary table and demo-report/ (summary.json, lag-latency.png, logs/: the processor's and each
   materializer's output, and demo.log with this process's log records, librdkafka's lines included).
DEMO_SCALE (default 1) scales the data and the live phase. Exit 0 only if every check passed.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator, Mapping
from contextlib import ExitStack, contextmanager
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import psycopg
from confluent_kafka import TopicPartition
from rich.console import Console
from rich.live import Live
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from cdc.connect_client import ConnectClient
from cdc.connector_spec import ConnectorSpec, DatabaseSpec, RegistrySpec
from cdc.preflight import run_preflight
from cdc.slots import drop_slot
from demo import aggregates, live, orders, shop
from demo.environment import CHECKED
from demo.report import Summary, print_summary, print_time_spent, write_report
from demo.search import SearchChoice, SearchReader, backend_from_env, drop_indices, stack_opensearch_url
from devstack.config import StackConfig
from devstack.errors import StackError
from devstack.session import StackHandle, open_stack
from eventstore.config import StoreConfig
from kafkakit.clients import make_consumer
from kafkakit.environment import refuse_bad_settings
from kafkakit.errors import ConfigError
from kafkakit.logs import configure_demo_logging
from materializers import JobPlan, RunConfig, lookup, parse_search_backend, verify
from materializers.testing import (
    batch_medians,
    committed,
    end_offsets,
    query_delta,
    read_timeline,
    records_behind,
    startup_phases,
)

console = Console()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="demo", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--keep", action="store_true", help="leave the stack and the jobs' state for exploring"
    )
    parser.add_argument(
        "--scale", help="data and duration multiplier, a positive number (env DEMO_SCALE; default 1)"
    )
    parser.add_argument(
        "--report-dir", type=Path, default=Path("demo-report"), help="where the summary, plot and logs go"
    )
    parser.add_argument(
        "--search",
        help="the products' search view: tantivy (an index on the driver, the default) or opensearch "
        "(written from the executors; the stack's OpenSearch node) (env DEMO_SEARCH)",
    )
    return parser


@dataclass(frozen=True, slots=True, kw_only=True)
class DemoConfig:
    scale: float = 1.0
    keep: bool = False
    report_dir: Path = Path("demo-report")
    run_id: str = ""
    search: str = "tantivy"  # the products' search view: tantivy (embedded) or opensearch

    @classmethod
    def from_args(cls, argv: list[str] | None = None, environ: Mapping[str, str] | None = None) -> DemoConfig:
        """The flags over DEMO_SCALE / DEMO_SEARCH over the defaults. Every variable and flag the demo
        and the packages it runs read is checked first (demo.environment): a bad one ends the demo with
        one line naming it, its form and an example (exit 2), before anything starts."""
        env = os.environ if environ is None else environ
        parser = build_parser()
        args = parser.parse_args(argv)
        if (refused := refuse_bad_settings("demo", CHECKED, parser, args, env)) is not None:
            raise SystemExit(refused)
        try:
            search = parse_search_backend(args.search) if args.search else backend_from_env(env)
        except ConfigError as exc:
            parser.error(str(exc))
        return cls(
            scale=float(args.scale or env.get("DEMO_SCALE") or "1"),
            keep=args.keep,
            report_dir=args.report_dir,
            run_id=uuid.uuid4().hex[:6],
            search=search,
        )

    def count(self, base: int, least: int) -> int:
        return max(least, int(base * self.scale))

    @property
    def schema(self) -> str:
        return f"shop_{self.run_id}"

    @property
    def live_seconds(self) -> float:
        return max(12.0, 45.0 * self.scale)


@contextmanager
def step(title: str) -> Iterator[dict[str, bool]]:
    """A narrated step with a spinner and its duration; set `["ok"] = False` on the yielded dict to
    mark it failed (✗) instead of done."""
    with Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        TimeElapsedColumn(),
        console=console,
        transient=True,
    ) as bar:
        bar.add_task(title)
        started = time.monotonic()
        outcome = {"ok": True}
        yield outcome
    mark = "[green]✓[/green]" if outcome["ok"] else "[red]✗[/red]"
    console.print(f"{mark} {title} [dim]({time.monotonic() - started:.1f}s)[/dim]")


# ------------------------------------------------------------------------------------------- CDC


def capture_shop(stack: StackHandle, cfg: DemoConfig, cleanup: ExitStack) -> ConnectorSpec:
    with step(f"shop created in Postgres schema {cfg.schema}"):
        shop.create(stack.pg_dsn, cfg.schema, cfg.count(1000, 60), cfg.count(500, 20))
    spec = ConnectorSpec(
        name=f"demo-shop-{cfg.run_id}",
        # Postgres as the Connect worker reaches it (in containers: by its network name).
        database=DatabaseSpec.from_dsn(stack.connect_view.pg_dsn),
        topic_prefix=f"demo{cfg.run_id}",
        tables=tuple(f"{cfg.schema}.{t}" for t in ("customers", "products", "inventory")),
        # The default format, Avro: the smallest and fastest typed records (bench/results/cdc-formats.md),
        # read by the materializers (from_avro per writer schema id) and by `cdc tail` alike. The
        # registry is the one the Connect worker reaches, as its converter registers the schemas.
        registry=RegistrySpec.from_url(stack.connect_view.schema_registry_url),
    )
    connect = ConnectClient(stack.kafka_connect_url)
    cleanup.callback(connect.close)
    with step(
        f"Debezium connector {spec.name} registered with cdc ({spec.format} records), snapshot complete"
    ):
        run_preflight(replace(spec, database=DatabaseSpec.from_dsn(stack.pg_dsn)))  # checked from here
        connect.apply(spec.name, spec.to_config())
        if not cfg.keep:
            cleanup.callback(lambda: _release_connector(stack, connect, spec))
        connect.wait_running(spec.name, timeout=120)
        connect.wait_snapshot_complete(spec.name, timeout=300)
    return spec


def _release_connector(stack: StackHandle, connect: ConnectClient, spec: ConnectorSpec) -> None:
    connect.delete(spec.name)
    drop_slot(stack.pg_dsn, spec.resolved_slot_name, spec.resolved_publication_name)


# ------------------------------------------------------------------------------------ event store


def order_store(stack: StackHandle, cfg: DemoConfig, cleanup: ExitStack, summary: Summary) -> StoreConfig:
    store = StoreConfig.from_env(stack.endpoints.as_env()).with_overrides(
        name=f"demo-{cfg.run_id}", partitions=3
    )
    with (
        step(f"event store {store.name}: topics created, Avro schemas registered in Apicurio"),
        orders.store(store) as events,
    ):
        events.init()
    processor = orders.start_processor(store, cfg.report_dir / "logs" / "processor.log")
    cleanup.callback(_terminate, processor)
    tally = orders.Tally()
    clients, each = 4, cfg.count(12, 3)
    with step(f"{clients} concurrent clients placed, amended and cancelled {clients * each} orders"):
        orders.run_clients(store, clients, each, tally)
    summary.commands = dict(sorted(tally.counts.items()))
    refused = sum(v for k, v in tally.counts.items() if k.startswith("refused"))
    console.print(
        f"  accepted {tally.counts['accepted']}, refused {refused} "
        f"(invalid {tally.counts['refused: invalid']}, business rule {tally.counts['refused: business rule']}, "
        f"version conflict {tally.counts['refused: version conflict']}), "
        f"retries deduplicated {tally.counts['deduplicated retries']}"
    )
    # Each client asserts that a retried command id returned its first outcome; here every kind of
    # outcome must have occurred, or the demo showed less than it claims.
    kinds = (
        "accepted",
        "refused: invalid",
        "refused: business rule",
        "refused: version conflict",
        "deduplicated retries",
    )
    summary.checks["orders: accepted, refused and deduplicated as expected"] = all(
        tally.counts[k] > 0 for k in kinds
    )
    return store


def _terminate(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()


def _terminate_all(procs: dict[str, subprocess.Popen[bytes]]) -> None:
    for proc in procs.values():
        _terminate(proc)


# ---------------------------------------------------------------------------------- materializers

DRIVER = "materializers"  # the one Spark driver keeping every materializer
BASELINE_WAIT_S = 120.0  # how long past the live phase the kill may wait for its baseline


def job_plans(
    stack: StackHandle, cfg: DemoConfig, spec: ConnectorSpec, store: StoreConfig, search: SearchChoice
) -> list[JobPlan]:
    base = RunConfig.from_env(stack.endpoints.as_env()).with_overrides(**search.run_overrides())
    # The jobs' state (checkpoints, Tantivy, Delta) belongs to this run: an earlier run's checkpoints
    # are pinned to its own topics, so they are cleared, as the rest of the report is rewritten.
    home = cfg.report_dir / "materializers"
    shutil.rmtree(home, ignore_errors=True)
    products = base.with_overrides(home=str(home), topic=spec.topic_for(f"{cfg.schema}.products"),
                                   table=f"{cfg.schema}.products", redis_prefix=f"demo{cfg.run_id}")  # fmt: skip
    order_views = base.with_overrides(
        home=str(home), topic=store.events_topic, redis_prefix=f"demo{cfg.run_id}"
    )
    return [JobPlan.of(lookup("products"), products), JobPlan.of(lookup("orders"), order_views)]


def driver_args(plans: list[JobPlan], search: SearchChoice) -> list[str]:
    """The `materializers start` command line keeping every plan in one driver (pure)."""
    c = plans[0].config  # one home and one Redis base prefix for all
    args = [sys.executable, "-m", "materializers.cli", "--home", str(c.home), *search.driver_flags(), "start",
            *(p.spec.name for p in plans), "--from", "earliest", "--redis-prefix", c.redis_prefix]  # fmt: skip
    for plan in plans:
        args += ["--topic", f"{plan.spec.name}={plan.topic}"]
        if plan.config.table:
            args += ["--table", f"{plan.spec.name}={plan.config.table}"]
    return args


def start_driver(
    plans: list[JobPlan], stack: StackHandle, cfg: DemoConfig, search: SearchChoice
) -> subprocess.Popen[bytes]:
    """Every materializer in ONE Spark driver (a query each), started through the `materializers` CLI:
    two drivers are two JVMs, which on 2 cores took the CPU the queries need."""
    args = driver_args(plans, search)
    log_file = cfg.report_dir / "logs" / "materializers.log"
    log_file.parent.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, **stack.endpoints.as_env()}
    with log_file.open("ab") as out:
        return subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, env=env)


def wait_caught_up(plans: list[JobPlan], procs: dict[str, subprocess.Popen[bytes]], timeout: float) -> bool:
    """Every job's checkpoint has committed a batch reaching the topic's end offsets as of this call."""
    ends = {p.spec.name: end_offsets(p.config.endpoints.kafka_bootstrap_servers, p.topic) for p in plans}
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        dead = [name for name, proc in procs.items() if proc.poll() is not None]
        if dead:
            console.print(f"[red]materializer(s) {dead} exited; see their logs under demo-report/logs/[/red]")
            return False
        behind = [p for p in plans if records_behind(committed(p.checkpoint).offsets, ends[p.spec.name])]
        if not behind:
            return True
        time.sleep(0.5)
    return False


# --------------------------------------------------------------------------------------- live phase


def live_phase(stack: StackHandle, cfg: DemoConfig, plans: list[JobPlan], store: StoreConfig,
               procs: dict[str, subprocess.Popen[bytes]], summary: Summary, search: SearchChoice) -> None:  # fmt: skip
    readers = live.ViewReaders(plans[0])  # products: cache, search, warehouse
    workload = live.RowWorkload(stack.pg_dsn, cfg.schema, next_id=cfg.count(1000, 60) + 1)
    tally = orders.Tally()
    client = orders.OrderClient(store, worker=90, tally=tally, seed=99)
    probes: list[live.Probe] = []
    gauge = live.LagGauge(plans)
    started = summary.live_started_at = time.time()
    last_probe, latest = 0.0, None

    with (
        psycopg.connect(stack.pg_dsn, autocommit=True) as conn,
        Live(console=console, refresh_per_second=2) as view,
    ):
        n = 0
        while time.time() - started < _live_until(cfg, summary.killed_at_s):
            for _ in range(5):
                workload.step(conn)
            if n % 10 == 0:
                client.one_order(1000 + n)
            if time.time() - last_probe > 1.0:
                probes = live.supersede(probes, workload.probe(conn))
                last_probe = time.time()
            for seen_in, latency in live.settle_probes(probes, readers.due()):
                latest = latency
                summary.samples.append(live.sample(gauge, started, seen_in, latency))
                _note_recovery(summary, time.time() - started, latency)
            # The kill waits for a steady baseline: a third of the phase, a change seen in every view
            # and a batch of every job on its timeline (else a slow machine, whose restart outlasts the
            # phase, has no steady latency or batch of the slower views at all).
            if (
                summary.killed_at_s is None
                and time.time() - started > cfg.live_seconds / 3
                and {s.view for s in summary.samples} >= set(live.VIEWS)
                and all(_batch_since(plan, started) for plan in plans)
            ):
                view.console.print(
                    "[yellow]⚡ kill -9 the materializers' driver mid-stream, then start it again[/yellow]"
                )
                summary.killed_at_s = time.time() - started
                procs[DRIVER].kill()
                procs[DRIVER].wait()
                procs[DRIVER] = start_driver(plans, stack, cfg, search)
            view.update(live.status_table(gauge, latest, workload.changes, time.time() - started))
            n += 1
            time.sleep(0.05)
    client.close()
    elapsed = time.time() - started
    summary.throughput_per_s = workload.changes / elapsed
    for k, v in tally.counts.items():
        summary.commands[f"live {k}"] = v
    console.print(f"[green]✓[/green] live phase: {workload.changes} row changes and {tally.counts['accepted']} "
                  f"accepted order commands in {elapsed:.0f}s; the materializers' driver was killed and restarted")  # fmt: skip
    # The last probes still count once the view shows them: the restarted job's first batch can take
    # a minute on 2 cores, so wait as long as the catch-up check does.
    deadline = time.time() + 300
    while probes and time.time() < deadline:
        for seen_in, latency in live.settle_probes(probes, readers.due()):
            summary.samples.append(live.sample(gauge, started, seen_in, latency))
            _note_recovery(summary, time.time() - started, latency)
        time.sleep(0.2)


def note_time_spent(summary: Summary, plans: list[JobPlan], until: float) -> None:
    """Each job's restart phases (from the kill) and its steady batches' median steps: before the
    kill, and from shortly after the recovery (the restart's first batches are the recovery's)."""
    if summary.killed_at_s is None:
        return
    killed = summary.live_started_at + summary.killed_at_s
    recovered = summary.live_started_at + (summary.recovered_at_s or until - summary.live_started_at)
    for plan in plans:
        entries = read_timeline(plan.job_dir)
        summary.recovery_phases[plan.spec.name] = startup_phases(entries, after=killed)
        steady = [
            e
            for e in entries
            if summary.live_started_at <= e["at"] < killed or recovered + 5 <= e["at"] < until
        ]
        summary.steady_batches[plan.spec.name] = batch_medians(steady, 0.0, until)


def _batch_since(plan: JobPlan, since: float) -> bool:
    """Whether the job's timeline holds a batch that ended at `since` or later (the driver records
    its batches when it polls their progress, a moment after the views show them)."""
    return any(e["event"] == "batch" and e["at"] >= since for e in read_timeline(plan.job_dir))


def _live_until(cfg: DemoConfig, killed_at_s: float | None) -> float:
    """When the live phase ends (s from its start): `live_seconds`, later only on a machine where the
    kill waited past it for its baseline, and then 5 s after the kill, so changes committed after it
    show the recovery."""
    if killed_at_s is None:
        return cfg.live_seconds + BASELINE_WAIT_S
    return max(cfg.live_seconds, killed_at_s + 5.0)


def _note_recovery(summary: Summary, seen_at_s: float, latency_ms: float) -> None:
    """The first view update of a change committed after the kill: only the restarted driver wrote it
    (a change committed before may have been applied by the driver in its last moments)."""
    killed = summary.killed_at_s
    if killed is not None and summary.recovered_at_s is None and seen_at_s - latency_ms / 1000 > killed:
        summary.recovered_at_s = seen_at_s


# ------------------------------------------------------------------------------- demonstrations


def demonstrate_search(plans: list[JobPlan]) -> tuple[str, bool]:
    """The query answered by the products' search view, whichever backend holds it: (backend, hits?)."""
    reader = SearchReader(plans[0])
    hits = reader.search("walnut teapot", limit=3)
    cache = plans[0].cache()
    names = [(cache.read(h) or {}).get("name", "?") for h in hits]
    where = f"the {reader.label} index"
    if reader.opensearch is not None:
        where += f" (alias {reader.opensearch.alias} at {reader.opensearch.url})"
    console.print(f"  search 'walnut teapot' answered by {where}: {names}")
    return reader.label, bool(hits)


def demonstrate_replay(store: StoreConfig) -> bool:
    """Replay offsets [0, 6) of partition 0 to stdout: every record printed is in that range, in order.
    (Transaction markers occupy offsets too, so fewer than 6 records come back.)"""
    args = [sys.executable, "-m", "eventstore.cli", "replay", "--bootstrap-servers", store.bootstrap_servers,
            "--schema-registry-url", store.schema_registry_url, "--topic", store.events_topic,
            "--from-offset", "0:0", "--until-offset", "0:6", "--to-stdout"]  # fmt: skip
    done = subprocess.run(args, capture_output=True, text=True, timeout=120)
    records = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    console.print(
        f"  eventstore replay --topic {store.events_topic} --from-offset 0:0 --until-offset 0:6 --to-stdout:"
    )
    for record in records:
        console.print(
            f"    [dim]offset {record['offset']}: {record['key']} {dict(record['headers']).get('event-type')}[/dim]"
        )
    offsets = [r["offset"] for r in records]
    return (
        done.returncode == 0
        and bool(offsets)
        and offsets == sorted(offsets)
        and all(0 <= o < 6 for o in offsets)
    )


def demonstrate_aggregates(stack: StackHandle, cfg: DemoConfig, cleanup: ExitStack, summary: Summary) -> None:
    """The shop's `sku_per_minute` aggregate over order lines arriving out of order and late (demo/aggregates.py)."""
    bootstrap = stack.endpoints.kafka_bootstrap_servers
    topic = f"demo{cfg.run_id}.line-events"
    aggregates.create_topic(bootstrap, topic)
    if not cfg.keep:
        cleanup.callback(aggregates.delete_topics, bootstrap, [topic, f"{topic}.dlq"])
    home = cfg.report_dir / "aggregates"
    shutil.rmtree(home, ignore_errors=True)  # this run's checkpoint and table only
    feed = aggregates.Feed(topic=topic, home=home, env={**os.environ, **stack.endpoints.as_env()})
    with step(
        "aggregate sku_per_minute: order lines out of order, late, ahead and broken; two runs, verify"
    ) as done:
        outcome = aggregates.run(feed)
        done["ok"] = outcome.as_expected
    console.print(
        f"  {outcome.window_rows} window rows; late: {outcome.late_pairs} of {aggregates.LATE} late records "
        f"dropped ({outcome.late_dropped} as Spark counts them); refused and dead-lettered: "
        f"{outcome.refused}/{outcome.dead_letters}; verify: {outcome.differences} difference(s)"
    )
    summary.aggregate = {k: float(v) for k, v in asdict(outcome).items()}
    summary.checks[
        "aggregate sku_per_minute: late dropped and counted, refused dead-lettered, verify exact"
    ] = outcome.as_expected


def topic_sizes(stack: StackHandle, topics: list[str]) -> dict[str, int]:
    consumer = make_consumer({"bootstrap.servers": stack.kafka_bootstrap_servers, "group.id": "demo-sizes"})
    sizes = {}
    for topic in topics:
        meta = consumer.list_topics(topic, timeout=10).topics[topic]
        sizes[topic] = sum(
            hi - lo
            for lo, hi in (
                consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10) for p in meta.partitions
            )
        )
    consumer.close()
    return sizes


def view_sizes(plans: list[JobPlan]) -> dict[str, int]:

    sizes = {}
    for plan in plans:
        sizes[f"{plan.spec.name} cache (Redis keys)"] = len(plan.cache().entities())
        if plan.search() is not None or plan.opensearch() is not None:
            reader = SearchReader(plan)
            sizes[f"{plan.spec.name} search, {reader.label} (live documents)"] = reader.live_count()
        warehouse = plan.warehouse()
        if plan.spec.current_table:
            rows = query_delta(warehouse.current_path, "SELECT count(*) AS n FROM t WHERE NOT deleted")
            sizes[f"{plan.spec.name} Delta current rows"] = int(str(rows[0]["n"]))
        rows = query_delta(warehouse.history_path, "SELECT count(*) AS n FROM t")
        sizes[f"{plan.spec.name} Delta history rows"] = int(str(rows[0]["n"]))
    return sizes


# --------------------------------------------------------------------------------------------- main


def run(stack: StackHandle, cfg: DemoConfig) -> Summary:
    summary = Summary()
    search = SearchChoice(
        backend=cfg.search, opensearch_url=stack_opensearch_url() if cfg.search == "opensearch" else ""
    )
    search.require()  # before anything is created
    console.rule(
        f"[bold]kafka-toolkit demo[/bold] · stack: {stack.backend} · search: {search.label} · "
        f"scale {cfg.scale:g} · run {cfg.run_id}"
    )
    with ExitStack() as cleanup:
        spec = capture_shop(stack, cfg, cleanup)
        store = order_store(stack, cfg, cleanup, summary)
        plans = job_plans(stack, cfg, spec, store, search)
        if not cfg.keep:  # registered before the driver's stop: released after it
            cleanup.callback(drop_indices, plans[0])
        backfill_started = time.monotonic()
        procs = {DRIVER: start_driver(plans, stack, cfg, search)}
        cleanup.callback(_terminate_all, procs)
        with step(
            f"materializers products (Redis, {search.label}, Delta) and orders (Redis, Delta) caught up"
        ) as done:
            done["ok"] = summary.checks["materializers caught up with the backfill"] = wait_caught_up(
                plans, procs, timeout=300
            )
            backlog = sum(topic_sizes(stack, [p.topic for p in plans]).values())
            summary.backfill_rows_per_s = backlog / (time.monotonic() - backfill_started)
        live_phase(stack, cfg, plans, store, procs, summary, search)
        with step("materializers caught up after the live phase") as done:
            done["ok"] = summary.checks["materializers caught up after the live phase"] = wait_caught_up(
                plans, procs, timeout=300
            )
        note_time_spent(summary, plans, until=time.time())
        backend, answered = demonstrate_search(plans)
        summary.checks[f"search answered from the index ({backend})"] = answered
        summary.checks["replay from an offset"] = demonstrate_replay(store)
        for plan in plans:
            differences = verify(plan)
            for diff in differences[:10]:
                console.print(f"  [red]{diff}[/red]")
            console.print(f"  materializers verify {plan.spec.name}: {len(differences)} difference(s)")
            summary.checks[f"verify {plan.spec.name}: view equals its source of truth"] = not differences
        demonstrate_aggregates(stack, cfg, cleanup, summary)
        topics = [p.topic for p in plans]
        summary.records_per_topic = topic_sizes(stack, topics)
        summary.view_sizes = view_sizes(plans)
        summary.finish_latency()
    return summary


def stack_config(cfg: DemoConfig) -> StackConfig:
    """The local stack's settings, with the OpenSearch node when the demo's search view lives there
    (a running stack without it is completed, not replaced)."""
    config = StackConfig.from_env()
    if cfg.search == "opensearch":
        return replace(config, optional=config.optional | {"opensearch"})
    return config


def _stop_on_sigterm(signum: int, _frame: object) -> None:
    raise SystemExit(128 + signum)  # unwinds the ExitStack: connector, slot, jobs and stack are released


def main(argv: list[str] | None = None) -> int:
    cfg = DemoConfig.from_args(argv)
    # The console is the narration's: every log record (librdkafka's lines included) goes to this
    # file, beside the processor's and the materializers' logs; see kafkakit.logs.
    configure_demo_logging(cfg.report_dir / "logs" / "demo.log")
    signal.signal(signal.SIGTERM, _stop_on_sigterm)
    with ExitStack() as resources:
        try:
            stack = resources.enter_context(open_stack(stack_config(cfg), keep_started=cfg.keep))
        except StackError as exc:  # a backend that cannot run here: its cause and fix, not a traceback
            console.print(f"[red]error:[/red] {exc}")
            return 2
        summary = run(stack, cfg)
        print_summary(console, summary)
        print_time_spent(console, summary)
        plot = write_report(cfg.report_dir, summary)
        console.print(f"report: {cfg.report_dir / 'summary.json'}, {plot}")
        if cfg.keep:
            console.print("stack kept running: `source .stack/env`, then try `cdc status`, `materializers status`, "
                          "`eventstore read order-w0-1 --name demo-" + cfg.run_id + "`; `make down` when done")  # fmt: skip
    console.print("[green]every check passed[/green]" if summary.passed else "[red]some checks FAILED[/red]")
    return 0 if summary.passed else 1


if __name__ == "__main__":
    sys.exit(main())
