"""The demo's live phase: row changes and order commands keep flowing while the materializers run;
commit-to-view latency is probed through the Redis cache, and the jobs' status is shown live."""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal

import psycopg
from rich.table import Table

from demo.report import Sample
from materializers import lag, status
from materializers.job import JobPlan

PROBE_IDS = 40


@dataclass(slots=True)
class Probe:
    """A price written at `committed_at`; done when the cache shows it."""

    product_id: int
    price: str
    committed_at: float


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
        """Give a product a price no other probe used and note when it committed. Probes cycle
        through the probe products, so a later probe rarely overwrites one not yet seen."""
        product_id = 1 + self.probes_sent % (min(self.next_id, PROBE_IDS) - 1)
        self.probes_sent += 1
        price = f"{self.probes_sent}.{self.rng.randint(10, 99)}"
        conn.execute(
            f"update {self.schema}.products set price = %s where id = %s".encode(), (price, product_id)
        )
        self.changes += 1
        return Probe(product_id, price, time.time())


def supersede(probes: list[Probe], new: Probe) -> list[Probe]:
    """Add `new`; a pending probe of the same product can no longer be seen (its price is replaced)."""
    return [p for p in probes if p.product_id != new.product_id] + [new]


def settle_probes(probes: list[Probe], read_price: Callable[[int], str | None]) -> list[float]:
    """Latencies (ms) of the probes the cache now reflects; those are removed from `probes`."""
    seen = []
    for probe in list(probes):
        if read_price(probe.product_id) == probe.price:
            seen.append((time.time() - probe.committed_at) * 1000)
            probes.remove(probe)
    return seen


@dataclass
class LagGauge:
    """The jobs' statuses with their lag measured (topic end offsets - checkpoint) at most once per
    `every_s`: measuring asks Kafka, and the live loop redraws many times a second."""

    plans: list[JobPlan]
    every_s: float = 1.0
    _at: float = field(default=float("-inf"), init=False)
    _jobs: dict[str, status.JobStatus | None] = field(default_factory=dict, init=False)

    def jobs(self) -> dict[str, status.JobStatus | None]:
        if time.monotonic() - self._at >= self.every_s:
            self._jobs = {p.spec.name: _measured(p) for p in self.plans}
            self._at = time.monotonic()
        return self._jobs


def _measured(plan: JobPlan) -> status.JobStatus | None:
    job = status.read(plan.job_dir)
    return None if job is None else lag.with_lag(job, plan.config.endpoints.kafka_bootstrap_servers)


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
    table.caption = f"latest commit->cache latency: {'-' if latency_ms is None else f'{latency_ms:.0f} ms'}"
    return table


def sample(gauge: LagGauge, started: float, latency_ms: float | None) -> Sample:
    behind = sum(job.total_lag or 0 for job in gauge.jobs().values() if job is not None)
    return Sample(at_s=time.time() - started, lag_records=behind, latency_ms=latency_ms)
