"""The demo's live phase: row changes and order commands keep flowing while the materializers run;
commit-to-view latency is probed in each view of the products (Redis cache, search index, Delta
current table), and the jobs' status is shown live."""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal

import psycopg
from rich.table import Table

from demo.report import Sample
from demo.search import SearchReader
from materializers import JobPlan
from materializers.testing import JobStatus, read_status, with_lag

PROBE_IDS = 40


VIEWS = ("cache", "search", "warehouse")  # the products materializer's views, each probed


@dataclass(slots=True)
class Probe:
    """A product name written at `committed_at`; done when every view shows it."""

    product_id: int
    name: str
    committed_at: float
    unseen: set[str] = field(default_factory=lambda: set(VIEWS))


@dataclass(slots=True)
class RowWorkload:
    """Updates, deletes and inserts on the shop's products (and their inventory)."""

    dsn: str
    schema: str
    next_id: int
    rng: random.Random = field(default_factory=lambda: random.Random(3))
    changes: int = 0
    deleted: set[int] = field(default_factory=set)

    probes_sent: int = 0

    def step(self, conn: psycopg.Connection[tuple[object, ...]]) -> None:
        roll = self.rng.random()
        victim = self.rng.randint(1, self.next_id - 1)
        # Products below PROBE_IDS are kept for latency probes: never deleted.
        if roll < 0.08 and victim >= PROBE_IDS and victim not in self.deleted:
            conn.execute(f"delete from {self.schema}.products where id = %s".encode(), (victim,))
            self.deleted.add(victim)
        elif roll < 0.16:
            conn.execute(
                f"insert into {self.schema}.products (id, name, description, price, stock) "
                "values (%s, %s, %s, %s, %s)".encode(),
                (
                    self.next_id,
                    f"Limited Edition No. {self.next_id}",
                    "A new arrival. " * 200,
                    Decimal("42.00"),
                    5,
                ),
            )
            self.next_id += 1
        else:
            conn.execute(
                f"update {self.schema}.products set stock = stock + 1 where id = %s".encode(), (victim,)
            )
        self.changes += 1

    def probe(self, conn: psycopg.Connection[tuple[object, ...]]) -> Probe:
        """Give a product a name no other probe used (its own name + " #N") and note when it
        committed; every view keeps the name (the search index too). Probes cycle through the probe
        products, so a later probe rarely overwrites one not yet seen."""
        product_id = 1 + self.probes_sent % (min(self.next_id, PROBE_IDS) - 1)
        self.probes_sent += 1
        row = conn.execute(
            f"update {self.schema}.products set name = regexp_replace(name, ' #[0-9]+$', '') || %s "
            "where id = %s returning name".encode(),
            (f" #{self.probes_sent}", product_id),
        ).fetchone()
        assert row is not None, f"probe product {product_id} is missing"
        self.changes += 1
        return Probe(product_id, str(row[0]), time.time())


def supersede(probes: list[Probe], new: Probe) -> list[Probe]:
    """Add `new`; a pending probe of the same product can no longer be seen (its price is replaced)."""
    return [p for p in probes if p.product_id != new.product_id] + [new]


NameReader = Callable[[list[int]], dict[int, str]]


def settle_probes(probes: list[Probe], readers: dict[str, NameReader]) -> list[tuple[str, float]]:
    """(view, latency ms) of each probe a view now shows; a probe every view showed is removed.
    `readers`: the views to look at this time, each giving the names it holds for some products."""
    seen = []
    for view, read in readers.items():
        waiting = [p for p in probes if view in p.unseen]
        if not waiting:
            continue
        names = read(sorted({p.product_id for p in waiting}))
        for probe in waiting:
            if names.get(probe.product_id) == probe.name:
                seen.append((view, (time.time() - probe.committed_at) * 1000))
                probe.unseen.discard(view)
    probes[:] = [p for p in probes if p.unseen]
    return seen


@dataclass
class ViewReaders:
    """Reads probe products' names from each view of the products plan. The warehouse (a Delta
    scan in this process) is read at most every `warehouse_every_s`: polled as often as Redis, it
    would take a core from the driver it measures."""

    plan: JobPlan
    warehouse_every_s: float = 0.25
    _warehouse_at: float = field(default=float("-inf"), init=False)
    _search: SearchReader | None = field(default=None, init=False)

    def due(self) -> dict[str, NameReader]:
        readers: dict[str, NameReader] = {"cache": self.cache, "search": self.search}
        if time.monotonic() - self._warehouse_at >= self.warehouse_every_s:
            self._warehouse_at = time.monotonic()
            readers["warehouse"] = self.warehouse
        return readers

    def cache(self, ids: list[int]) -> dict[int, str]:
        cache = self.plan.cache()
        return {i: str(row["name"]) for i in ids if (row := cache.read(str(i))) and "name" in row}

    def search(self, ids: list[int]) -> dict[int, str]:
        """Names a search finds now, on the backend the view lives in (demo.search)."""
        if self._search is None:
            self._search = SearchReader(self.plan)
        return self._search.names(ids)

    def warehouse(self, ids: list[int]) -> dict[int, str]:
        try:
            rows = self.plan.warehouse().read([str(i) for i in ids])
        except OSError:  # the table is mid-commit or not created yet: read again next time
            return {}
        return {int(key): str(row["name"]) for key, row in rows.items()}


@dataclass
class LagGauge:
    """The jobs' statuses with their lag measured (topic end offsets - checkpoint) at most once per
    `every_s`: measuring asks Kafka, and the live loop redraws many times a second."""

    plans: list[JobPlan]
    every_s: float = 1.0
    _at: float = field(default=float("-inf"), init=False)
    _jobs: dict[str, JobStatus | None] = field(default_factory=dict, init=False)

    def jobs(self) -> dict[str, JobStatus | None]:
        if time.monotonic() - self._at >= self.every_s:
            self._jobs = {p.spec.name: _measured(p) for p in self.plans}
            self._at = time.monotonic()
        return self._jobs


def _measured(plan: JobPlan) -> JobStatus | None:
    job = read_status(plan.job_dir)
    return None if job is None else with_lag(job, plan.config.endpoints.kafka_bootstrap_servers)


def status_table(gauge: LagGauge, latency_ms: float | None, changes: int, elapsed: float) -> Table:
    table = Table(title=f"live: {changes} changes written in {elapsed:.0f}s", title_justify="left")
    for column in ("job", "state", "batch", "lag", "in rows/s", "out rows/s", "last batch", "dead letters"):
        table.add_column(column, justify="right" if column != "job" else "left")
    for name, job in gauge.jobs().items():
        if job is None:
            table.add_row(name, "starting", "-", "-", "-", "-", "-", "-")
            continue
        shown_lag = "-" if job.total_lag is None else str(job.total_lag)
        table.add_row(
            job.name, job.state, str(job.batch_id), shown_lag, f"{job.input_rows_per_second:.0f}",
            f"{job.processed_rows_per_second:.0f}", f"{job.last_batch_ms} ms", str(job.dead_letters),
        )  # fmt: skip
    table.caption = f"latest commit->view latency: {'-' if latency_ms is None else f'{latency_ms:.0f} ms'}"
    return table


def sample(gauge: LagGauge, started: float, view: str, latency_ms: float | None) -> Sample:
    behind = sum(job.total_lag or 0 for job in gauge.jobs().values() if job is not None)
    return Sample(at_s=time.time() - started, lag_records=behind, latency_ms=latency_ms, view=view)
