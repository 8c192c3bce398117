"""Settings of the local stack: where its state lives, which ports, how much heap.

`StackConfig.from_env` is the only place the environment is read (STACK_DIR, STACK_<SERVICE>_PORT,
STACK_READY_TIMEOUT, STACK_OPENSEARCH). A port set explicitly must be free; a default port that is taken is replaced by a
free one, and the choice is kept in <state>/ports.json so the stack keeps its addresses across restarts
(registered connectors store the Postgres port).
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from devstack.errors import PortTaken
from devstack.pins import REPO_ROOT

DEFAULT_PORTS = {
    "postgres": 55432,
    "kafka": 19092,
    "controller": 19093,
    "connect": 18083,
    "redis": 16379,
    "registry": 18080,
    "registry_management": 18089,
    "opensearch": 19200,
    "opensearch_transport": 19300,
}
# Ports that belong to a service of another name (the service that must be running to hold them).
PORT_OWNER = {"controller": "kafka", "registry_management": "registry", "opensearch_transport": "opensearch"}
# Services started only when asked for (STACK_<NAME>=1): OpenSearch costs ~10 CPU-seconds to start
# (~5 s more on a 2-core `make up`) and ~350 MB of RSS, and only the OpenSearch search backend needs it.
OPTIONAL_SERVICES = ("opensearch",)


DEFAULT_STATE_DIR = REPO_ROOT / ".stack"
DEFAULT_READY_TIMEOUT_S = 90.0
_YES = ("1", "true", "yes", "on")


@dataclass(frozen=True, slots=True, kw_only=True)
class StackConfig:
    state_dir: Path = DEFAULT_STATE_DIR
    explicit_ports: Mapping[str, int] = field(default_factory=dict)
    ready_timeout_s: float = DEFAULT_READY_TIMEOUT_S
    kafka_heap: str = "512m"
    # Connect's largest CPU cost at 5-10k changes/s is young-generation GC (bench/cdc_bench.py).
    connect_heap: str = "1g"
    registry_heap: str = "256m"
    opensearch_heap: str = "512m"
    # the optional services (OPTIONAL_SERVICES) this stack starts
    optional: frozenset[str] = frozenset()

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> StackConfig:
        env = os.environ if environ is None else environ
        ports = {
            name: int(env[var]) for name in DEFAULT_PORTS if (var := f"STACK_{name.upper()}_PORT") in env
        }
        state = Path(env["STACK_DIR"]).resolve() if env.get("STACK_DIR") else DEFAULT_STATE_DIR
        timeout = float(env.get("STACK_READY_TIMEOUT", DEFAULT_READY_TIMEOUT_S))
        optional = frozenset(
            name for name in OPTIONAL_SERVICES if env.get(f"STACK_{name.upper()}", "").lower() in _YES
        )
        return cls(state_dir=state, explicit_ports=ports, ready_timeout_s=timeout, optional=optional)

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
    for name, default in DEFAULT_PORTS.items():
        in_use_by_us = PORT_OWNER.get(name, name) in running
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
