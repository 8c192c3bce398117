"""Settings of the local stack: its topology, where its state lives, which ports, how much heap.

`StackConfig.from_env` is the only place the environment is read (STACK_TOPOLOGY, STACK_DIR,
STACK_<SERVICE>_PORT, STACK_READY_TIMEOUT, STACK_OPENSEARCH). A port set explicitly must be free; a default port that is taken is replaced by a
free one, and the choice is kept in <state>/ports.json so the stack keeps its addresses across restarts
(registered connectors store the Postgres port).
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

from devstack.errors import PortTaken, StackError
from devstack.pins import REPO_ROOT
from devstack.spark_cluster import WorkerResources


@dataclass(frozen=True, slots=True)
class Topology:
    """How many of each distributed engine's processes the stack runs."""

    name: str
    kafka_nodes: int  # each KRaft node is broker and controller
    connect_workers: int  # one Connect group
    spark_workers: int  # 0: no Spark standalone cluster (drivers run local[*])

    @property
    def replication_factor(self) -> int:
        return min(3, self.kafka_nodes)

    @property
    def min_insync_replicas(self) -> int:
        # RF 3 with min.insync 2: an acknowledged write survives one broker's loss and the topic
        # stays writable while one broker is down.
        return max(1, self.replication_factor - 1)


SINGLE = Topology("single", kafka_nodes=1, connect_workers=1, spark_workers=0)
# Three KRaft nodes, two Connect workers and a Spark master with two workers: the smallest layout in
# which every failover the toolkit relies on (leader election, task reassignment, task retry on
# another executor) can happen.
CLUSTER = Topology("cluster", kafka_nodes=3, connect_workers=2, spark_workers=2)
TOPOLOGIES = {t.name: t for t in (SINGLE, CLUSTER)}


def topology_named(name: str) -> Topology:
    try:
        return TOPOLOGIES[name]
    except KeyError:
        raise StackError(
            f"unknown stack topology {name!r} (STACK_TOPOLOGY or --topology); use one of {', '.join(TOPOLOGIES)}"
        ) from None


def numbered(base: str, index: int) -> str:
    """The name of a service's `index`-th instance (1-based): the first keeps the plain name, so the
    single-node stack's names stay as they were (kafka, connect)."""
    return base if index == 1 else f"{base}-{index}"


def port_key(service: str) -> str:
    return service.replace("-", "_")


DEFAULT_PORTS = {
    "postgres": 55432,
    "kafka": 19092,
    "controller": 19093,
    # the single node's SASL_SSL listener (devstack.kafka_security); the cluster has none
    "kafka_secure": 19098,
    "connect": 18083,
    "redis": 16379,
    "registry": 18080,
    "registry_management": 18089,
    "opensearch": 19200,
    "opensearch_transport": 19300,
}
# Ports that belong to a service of another name (the service that must be running to hold them).
PORT_OWNER = {
    "controller": "kafka",
    "kafka_secure": "kafka",
    "registry_management": "registry",
    "opensearch_transport": "opensearch",
}
# The cluster topology's further processes, numbered as `numbered` names them.
CLUSTER_PORTS = {
    "kafka_2": 19094,
    "controller_2": 19095,
    "kafka_3": 19096,
    "controller_3": 19097,
    "connect_2": 18084,
    "spark_master": 17077,
    "spark_master_ui": 18090,
    "spark_worker_ui": 18091,
    "spark_worker_2_ui": 18092,
}
CLUSTER_PORT_OWNER = {
    "controller_2": "kafka-2",
    "controller_3": "kafka-3",
    "spark_master_ui": "spark-master",
    "spark_worker_ui": "spark-worker",
    "spark_worker_2_ui": "spark-worker-2",
}
# Services started only when asked for (STACK_<NAME>=1): OpenSearch costs ~10 CPU-seconds to start
# (~5 s more on a 2-core `make up`) and ~350 MB of RSS, and only the OpenSearch search backend needs it.
OPTIONAL_SERVICES = ("opensearch",)
# Ports only the single-node topology uses.
SINGLE_ONLY_PORTS = ("kafka_secure",)


DEFAULT_STATE_DIR = REPO_ROOT / ".stack"
# The cluster keeps its own state (and ports): it can run beside the single-node stack.
DEFAULT_CLUSTER_STATE_DIR = REPO_ROOT / ".stack-cluster"
DEFAULT_READY_TIMEOUT_S = 90.0
_YES = ("1", "true", "yes", "on")


@dataclass(frozen=True, slots=True, kw_only=True)
class StackConfig:
    state_dir: Path = DEFAULT_STATE_DIR
    topology: Topology = SINGLE
    explicit_ports: Mapping[str, int] = field(default_factory=dict)
    ready_timeout_s: float = DEFAULT_READY_TIMEOUT_S
    kafka_heap: str = "512m"
    # Connect's largest CPU cost at 5-10k changes/s is young-generation GC (bench/cdc_bench.py).
    connect_heap: str = "1g"
    registry_heap: str = "256m"
    opensearch_heap: str = "512m"
    spark_worker: WorkerResources = field(default_factory=WorkerResources)
    # the optional services (OPTIONAL_SERVICES) this stack starts
    optional: frozenset[str] = frozenset()

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> StackConfig:
        env = os.environ if environ is None else environ
        topology = topology_named(env.get("STACK_TOPOLOGY") or SINGLE.name)
        ports = {
            name: int(env[var])
            for name in {**DEFAULT_PORTS, **CLUSTER_PORTS}
            if (var := f"STACK_{name.upper()}_PORT") in env
        }
        default_state = DEFAULT_STATE_DIR if topology == SINGLE else DEFAULT_CLUSTER_STATE_DIR
        state = Path(env["STACK_DIR"]).resolve() if env.get("STACK_DIR") else default_state
        timeout = float(env.get("STACK_READY_TIMEOUT", DEFAULT_READY_TIMEOUT_S))
        optional = frozenset(
            name for name in OPTIONAL_SERVICES if env.get(f"STACK_{name.upper()}", "").lower() in _YES
        )
        return cls(
            state_dir=state,
            topology=topology,
            explicit_ports=ports,
            ready_timeout_s=timeout,
            optional=optional,
        )

    def with_topology(self, name: str) -> StackConfig:
        """`--topology NAME` over STACK_TOPOLOGY; the state dir follows unless STACK_DIR set one."""
        topology = topology_named(name)
        state = self.state_dir
        if state in (DEFAULT_STATE_DIR, DEFAULT_CLUSTER_STATE_DIR):
            state = DEFAULT_STATE_DIR if topology == SINGLE else DEFAULT_CLUSTER_STATE_DIR
        return replace(self, topology=topology, state_dir=state)

    def port_names(self) -> dict[str, int]:
        """Every port this topology uses, with its default."""
        if self.topology == CLUSTER:
            return {k: v for k, v in DEFAULT_PORTS.items() if k not in SINGLE_ONLY_PORTS} | CLUSTER_PORTS
        return dict(DEFAULT_PORTS)

    @staticmethod
    def port_owner(port: str) -> str:
        """The service that holds `port` while it runs."""
        return (PORT_OWNER | CLUSTER_PORT_OWNER).get(port, port.replace("_", "-"))

    @property
    def topology_file(self) -> Path:
        return self.state_dir / "topology"

    @property
    def ports_file(self) -> Path:
        return self.state_dir / "ports.json"

    @property
    def env_file(self) -> Path:
        return self.state_dir / "env"

    def log_file(self, service: str) -> Path:
        return self.state_dir / "logs" / f"{service}.log"

    def pid_file(self, service: str) -> Path:
        return self.state_dir / "pids" / f"{service}.pid"


def port_is_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def choose_ports(config: StackConfig, running: set[str]) -> dict[str, int]:
    """Ports for every service; services already running keep theirs unchecked."""
    saved: dict[str, int] = json.loads(config.ports_file.read_text()) if config.ports_file.exists() else {}
    chosen: dict[str, int] = {}
    for name, default in config.port_names().items():
        in_use_by_us = config.port_owner(name) in running
        if name in config.explicit_ports:
            port = config.explicit_ports[name]
            if not in_use_by_us and not port_is_free(port):
                raise PortTaken(
                    f"port {port} for {name} (STACK_{name.upper()}_PORT) is already in use; "
                    f"free it or set STACK_{name.upper()}_PORT to another port"
                )
        else:
            port = saved.get(name, default)
            if not in_use_by_us and not port_is_free(port):
                port = free_port()
        chosen[name] = port
    config.ports_file.parent.mkdir(parents=True, exist_ok=True)
    config.ports_file.write_text(json.dumps(chosen, indent=2))
    return chosen
