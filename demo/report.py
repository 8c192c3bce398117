"""The demo's report: a summary table on the terminal, and demo-report/ with the summary as JSON and
a PNG plot of lag and commit-to-view latency over time."""

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


@dataclass(slots=True)
class Summary:
    records_per_topic: dict[str, int] = field(default_factory=dict)
    view_sizes: dict[str, int] = field(default_factory=dict)
    checks: dict[str, bool] = field(default_factory=dict)
    commands: dict[str, int] = field(default_factory=dict)
    throughput_per_s: float = 0.0
    latency_p50_ms: float | None = None
    latency_p99_ms: float | None = None
    samples: list[Sample] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return bool(self.checks) and all(self.checks.values())

    def finish_latency(self) -> None:
        values = sorted(s.latency_ms for s in self.samples if s.latency_ms is not None)
        if values:
            self.latency_p50_ms = statistics.median(values)
            self.latency_p99_ms = values[min(len(values) - 1, round(0.99 * (len(values) - 1)))]


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
    table.add_row("latency p50 commit->view", _ms(summary.latency_p50_ms))
    table.add_row("latency p99 commit->view", _ms(summary.latency_p99_ms))
    for check, ok in summary.checks.items():
        table.add_row(check, "[green]pass[/green]" if ok else "[red]FAIL[/red]")
    console.print(table)


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f} ms"


def write_report(directory: Path, summary: Summary) -> Path:
    import matplotlib

    matplotlib.use("Agg")  # no display on a server
    import matplotlib.pyplot as plt

    directory.mkdir(parents=True, exist_ok=True)
    (directory / "summary.json").write_text(
        json.dumps(asdict(summary) | {"passed": summary.passed}, indent=2)
    )
    fig, (lag_ax, lat_ax) = plt.subplots(2, 1, figsize=(9, 6), sharex=True)
    times = [s.at_s for s in summary.samples]
    lag_ax.plot(times, [s.lag_records for s in summary.samples], color="tab:blue")
    lag_ax.set_ylabel("lag (records)")
    lat = [(s.at_s, s.latency_ms) for s in summary.samples if s.latency_ms is not None]
    lat_ax.plot([t for t, _ in lat], [v for _, v in lat], color="tab:red")
    lat_ax.set_ylabel("commit -> view (ms)")
    lat_ax.set_xlabel("seconds since the workload started")
    fig.suptitle("kafka-toolkit demo: lag and latency")
    fig.tight_layout()
    plot = directory / "lag-latency.png"
    fig.savefig(plot, dpi=100)
    plt.close(fig)
    return plot
