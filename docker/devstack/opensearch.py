"""OpenSearch as a local process: one node from the Maven Central jars, started by a small launcher.

The launcher (`OpenSearchNode.java`, shipped in this package and compiled into the artefact cache at
fetch time, see artifacts.py) subclasses `org.opensearch.node.Node` to hand it the HTTP transport,
analysis-common and Painless as plugin classes: the distribution would load them from its modules/
directory, which Maven does not ship. Every node setting is a `key=value` argument.

Guarantees: the node binds 127.0.0.1 only (no security plugin, so it must not be reachable from the
network), runs as a single-node cluster (no bootstrap checks, no discovery), keeps its data under
<state>/opensearch/data (it survives a restart), may write snapshots under <state>/opensearch/snapshots
(`path.repo`: the materializers' snapshots register an `fs` repository there), and is ready when
`_cluster/health` answers green or yellow. Assumptions: Java 17 (OpenSearch 2.19.x is the newest that runs on it); indices made for one
node need `number_of_replicas: 0`, or their health stays yellow (the view takes replicas from a setting).
"""

from __future__ import annotations

from pathlib import Path

import httpx

LAUNCHER_CLASS = "OpenSearchNode"
READY_STATUSES = ("green", "yellow")


def node_settings(state: Path, http_port: int, transport_port: int) -> dict[str, str]:
    """The node's settings (pure): paths under the state dir, loopback ports, one node."""
    base = state / "opensearch"
    return {
        "path.home": str(base / "home"),
        "path.data": str(base / "data"),
        "path.logs": str(base / "logs"),
        # Where `fs` snapshot repositories may live: OpenSearch refuses any location outside it.
        "path.repo": str(base / "snapshots"),
        "cluster.name": "devstack",
        "node.name": "devstack",
        "network.host": "127.0.0.1",
        "http.port": str(http_port),
        "transport.port": str(transport_port),
        # One node elects itself at once, and bootstrap checks (meant for production hosts) do not apply.
        "discovery.type": "single-node",
        # The launcher configures log4j without a config file: its console appender (our log file)
        # would only show errors.
        "logger.level": "INFO",
    }


def prepare(state: Path) -> None:
    for sub in ("home", "data", "logs", "snapshots"):
        (state / "opensearch" / sub).mkdir(parents=True, exist_ok=True)


def command(java: str, heap: str, lib: Path, launcher: Path, settings: dict[str, str]) -> list[str]:
    """The node's command line (pure). The heap is fixed (-Xms = -Xmx) so its RSS stays predictable."""
    return [
        java, f"-Xms{heap}", f"-Xmx{heap}", "-XX:+UseG1GC", "-Djava.awt.headless=true",
        "-Dtoolkit.service=opensearch", "-cp", f"{lib}/*:{launcher}", LAUNCHER_CLASS,
        *(f"{k}={v}" for k, v in settings.items()),
    ]  # fmt: skip


def healthy(url: str, timeout_s: float = 2.0) -> bool:
    """True when the cluster answers `_cluster/health` green or yellow (a real request, no log line)."""
    try:
        reply = httpx.get(f"{url.rstrip('/')}/_cluster/health", timeout=timeout_s)
        return reply.status_code == 200 and reply.json().get("status") in READY_STATUSES
    except (httpx.HTTPError, ValueError):
        return False
