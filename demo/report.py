"""The demo's report: a summary table on the terminal, and demo-report/ with the summary as JSON and
a PNG plot of lag and commit-to-view latency over time, the kill and the recovery marked.

Latency is split as a user lives it: steady (probes that neither waited through the outage nor were
committed during it) apart from the recovery, the time from `kill -9` of the driver to the first view
update after its restart. Targets (issue 18, 2 cores, whole stack running): steady p99 <= 2 s,
recovery <= 15 s; a miss is printed as a miss."""

from __future__ import annotations

import json
import statistics
from dataclasses import asdict, dataclass, field
from pathlib import Path

from rich.console import Console
from rich.table import Table


@dataclass(slots=True)
class Sample:
    """One observation of the live pipeline."""

    at_s: float  # seconds since the workload started
    lag_records: int
    latency_ms: float | None  # commit -> view, of the newest change observed in the view


STEADY_P99_TARGET_MS = 2000.0
RECOVERY_TARGET_S = 15.0


@dataclass(slots=True)
class Summary:
    records_per_topic: dict[str, int] = field(default_factory=dict)
    view_sizes: dict[str, int] = field(default_factory=dict)
    checks: dict[str, bool] = field(default_factory=dict)
    commands: dict[str, int] = field(default_factory=dict)
    throughput_per_s: float = 0.0
    latency_p50_ms: float | None = None  # steady: outside the outage
    latency_p99_ms: float | None = None
    samples: list[Sample] = field(default_factory=list)
    backfill_rows_per_s: float | None = None  # snapshot + events read to caught up, from the driver's start
    killed_at_s: float | None = None  # seconds since the workload started
    recovered_at_s: float | None = None  # the first view update after the kill

    @property
    def passed(self) -> bool:
        return bool(self.checks) and all(self.checks.values())

    @property
    def recovery_s(self) -> float | None:
        if self.killed_at_s is None or self.recovered_at_s is None:
            return None
        return self.recovered_at_s - self.killed_at_s

    def finish_latency(self) -> None:
        values = sorted(s.latency_ms for s in self.samples if s.latency_ms is not None and self._steady(s))
        if values:
            self.latency_p50_ms = statistics.median(values)
            self.latency_p99_ms = values[min(len(values) - 1, round(0.99 * (len(values) - 1)))]

    def _steady(self, s: Sample) -> bool:
        """Seen before the kill, or committed after the recovery: it never waited on the outage."""
        if self.killed_at_s is None or s.latency_ms is None:
            return True
        committed_at = s.at_s - s.latency_ms / 1000
        return s.at_s < self.killed_at_s or (
            self.recovered_at_s is not None and committed_at >= self.recovered_at_s
        )


def print_summary(console: Console, summary: Summary) -> None:
    table = Table(title="summary", title_justify="left")
    table.add_column("what")
    table.add_column("value", justify="right")
    for topic, count in summary.records_per_topic.items():
        table.add_row(f"records in {topic}", str(count))
    for view, size in summary.view_sizes.items():
        table.add_row(f"size of {view}", str(size))
    for outcome, count in summary.commands.items():
        table.add_row(f"commands {outcome}", str(count))
    table.add_row("throughput (changes/s)", f"{summary.throughput_per_s:.0f}")
    if summary.backfill_rows_per_s is not None:
        table.add_row(
            "backfill caught up (records/s, from the driver's start)", f"{summary.backfill_rows_per_s:.0f}"
        )
    table.add_row("steady latency p50 commit->cache", _ms(summary.latency_p50_ms))
    p99 = summary.latency_p99_ms
    table.add_row(
        f"steady latency p99 commit->cache (target {STEADY_P99_TARGET_MS / 1000:.0f} s)",
        _ms(p99) + _verdict(p99 is not None and p99 <= STEADY_P99_TARGET_MS),
    )
    recovery = summary.recovery_s
    table.add_row(
        f"recovery: kill -9 -> first view update (target {RECOVERY_TARGET_S:.0f} s)",
        ("-" if recovery is None else f"{recovery:.1f} s")
        + _verdict(recovery is not None and recovery <= RECOVERY_TARGET_S),
    )
    for check, ok in summary.checks.items():
        table.add_row(check, "[green]pass[/green]" if ok else "[red]FAIL[/red]")
    console.print(table)


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f} ms"


def _verdict(met: bool) -> str:
    return " [green]met[/green]" if met else " [red]MISSED[/red]"


def write_report(directory: Path, summary: Summary) -> Path:
    import matplotlib

    matplotlib.use("Agg")  # no display on a server
    import matplotlib.pyplot as plt

    directory.mkdir(parents=True, exist_ok=True)
    (directory / "summary.json").write_text(
        json.dumps(asdict(summary) | {"passed": summary.passed, "recovery_s": summary.recovery_s}, indent=2)
    )
    fig, (lag_ax, lat_ax) = plt.subplots(2, 1, figsize=(9, 6), sharex=True)
    times = [s.at_s for s in summary.samples]
    lag_ax.plot(times, [s.lag_records for s in summary.samples], color="tab:blue")
    lag_ax.set_ylabel("lag (records)")
    lat = [(s.at_s, s.latency_ms) for s in summary.samples if s.latency_ms is not None]
    lat_ax.plot([t for t, _ in lat], [v for _, v in lat], color="tab:red")
    lat_ax.set_ylabel("commit -> view (ms)")
    for at, label, colour in (
        (summary.killed_at_s, "kill -9", "black"),
        (summary.recovered_at_s, "recovered", "green"),
    ):
        if at is not None:
            for ax in (lag_ax, lat_ax):
                ax.axvline(at, color=colour, linestyle="--", linewidth=1)
            lag_ax.annotate(label, (at, 0), xytext=(3, 3), textcoords="offset points", fontsize=8)
    lat_ax.set_xlabel("seconds since the workload started")
    fig.suptitle("kafka-toolkit demo: lag and latency")
    fig.tight_layout()
    plot = directory / "lag-latency.png"
    fig.savefig(plot, dpi=100)
    plt.close(fig)
    return plot
