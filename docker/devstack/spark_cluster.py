"""A Spark standalone cluster (a master and workers) from pyspark's own jars, for the cluster topology.

pyspark's pip package carries `bin/spark-class` but none of the sbin start scripts, so the daemons are
started as `spark-class org.apache.spark.deploy.master.Master|...worker.Worker` in the foreground.

The executors run Python from the workers' own environment: a virtualenv under the state dir with the
toolkit (and the example shop's plug-in) installed from wheels built from this checkout, as a user's
workers would have it; never the checkout itself. It is rebuilt when the sources change.
"""

from __future__ import annotations

import fcntl
import hashlib
import importlib.util
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import httpx

from devstack.errors import PrerequisiteMissing, StackError
from devstack.pins import REPO_ROOT

MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
# What the workers' environment installs, and the sources whose change rebuilds it.
WHEEL_SOURCES = (REPO_ROOT, REPO_ROOT / "examples" / "shop")
_HASHED = ("cdc", "eventstore", "materializers", "kafkakit", "docker/devstack", "examples/shop/shop")


@dataclass(frozen=True, slots=True)
class WorkerResources:
    """What each worker offers its executors (Spark's --cores / --memory)."""

    cores: int = 1
    memory: str = "2g"


def spark_home() -> Path:
    spec = importlib.util.find_spec("pyspark")
    if spec is None or spec.origin is None:
        raise PrerequisiteMissing("pyspark is not installed in this Python; run `make venv`")
    return Path(spec.origin).parent


def daemon_environment(state: Path) -> dict[str, str]:
    return {
        "SPARK_HOME": str(spark_home()),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_LOG_DIR": str(state / "logs"),
        "PYSPARK_PYTHON": str(worker_python(state)),
    }


def _spark_class() -> str:
    return str(spark_home() / "bin" / "spark-class")


def master_command(port: int, ui_port: int) -> list[str]:
    return [
        _spark_class(),
        MASTER_CLASS,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--webui-port",
        str(ui_port),
    ]


def worker_command(
    state: Path, name: str, master_url: str, ui_port: int, resources: WorkerResources
) -> list[str]:
    return [
        _spark_class(), WORKER_CLASS, "--host", "127.0.0.1", "--cores", str(resources.cores),
        "--memory", resources.memory, "--webui-port", str(ui_port), "--work-dir", str(state / name / "work"),
        master_url,
    ]  # fmt: skip


def master_state(ui_port: int) -> dict[str, object] | None:
    try:
        answer = httpx.get(f"http://127.0.0.1:{ui_port}/json/", timeout=2.0)
        found = answer.json() if answer.status_code == 200 else None
    except (httpx.HTTPError, ValueError):
        return None
    return found if isinstance(found, dict) else None


def master_answers(ui_port: int) -> bool:
    state = master_state(ui_port)
    return state is not None and state.get("status") == "ALIVE"


def alive_workers(ui_port: int) -> list[dict[str, object]]:
    state = master_state(ui_port) or {}
    workers = state.get("workers")
    return [w for w in workers if w.get("state") == "ALIVE"] if isinstance(workers, list) else []


def worker_registered(master_ui_port: int, worker_ui_port: int) -> bool:
    """Ready = the master lists this worker (known by its web UI port) as ALIVE."""
    suffix = f":{worker_ui_port}"
    return any(str(w.get("webuiaddress", "")).endswith(suffix) for w in alive_workers(master_ui_port))


def prepare_master(state: Path) -> None:
    (state / "spark-master").mkdir(parents=True, exist_ok=True)


def prepare_worker(state: Path, name: str) -> None:
    (state / name / "work").mkdir(parents=True, exist_ok=True)
    ensure_worker_environment(state)


# ---------------------------------------------------------------- the workers' Python environment


def worker_venv(state: Path) -> Path:
    return state / "worker-venv"


def worker_python(state: Path) -> Path:
    return worker_venv(state) / "bin" / "python"


def sources_digest() -> str:
    digest = hashlib.sha256()
    for root in (REPO_ROOT / "pyproject.toml", REPO_ROOT / "examples" / "shop" / "pyproject.toml"):
        digest.update(root.read_bytes())
    for package in _HASHED:
        for path in sorted((REPO_ROOT / package).rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts:
                digest.update(str(path.relative_to(REPO_ROOT)).encode())
                digest.update(path.read_bytes())
    return digest.hexdigest()


def environment_current(state: Path) -> bool:
    """The workers' environment holds the toolkit as the sources are now (else `up` restarts the
    workers, which rebuilds it: executors must not run yesterday's code)."""
    marker = worker_venv(state) / ".sources-digest"
    return marker.exists() and marker.read_text() == sources_digest()


def ensure_worker_environment(state: Path) -> None:
    """The workers' virtualenv with the toolkit's wheels, rebuilt when the sources changed (one builder
    at a time: both workers prepare at start-up)."""
    venv = worker_venv(state)
    marker = venv / ".sources-digest"
    state.mkdir(parents=True, exist_ok=True)
    with (state / "worker-venv.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        digest = sources_digest()
        if marker.exists() and marker.read_text() == digest:
            return
        wheels = state / "wheels"
        for old in wheels.glob("*.whl"):
            old.unlink()
        for source in WHEEL_SOURCES:
            _run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(wheels), str(source)])
        if not worker_python(state).exists():
            _run([sys.executable, "-m", "venv", str(venv)])
        built = sorted(str(w) for w in wheels.glob("*.whl"))
        # The dependencies come from the wheels' own metadata (the pins a user's worker would get);
        # the toolkit itself is always reinstalled, its version string does not change with the code.
        _run([str(worker_python(state)), "-m", "pip", "install", "-q", *built])
        _run(
            [
                str(worker_python(state)),
                "-m",
                "pip",
                "install",
                "-q",
                "--no-deps",
                "--force-reinstall",
                *built,
            ]
        )
        marker.write_text(digest)


def _run(argv: list[str]) -> None:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=900)
    if done.returncode != 0:
        raise StackError(
            f"building the Spark workers' environment failed: {' '.join(argv[:4])} ... exited "
            f"{done.returncode}:\n{done.stdout[-3000:]}{done.stderr[-3000:]}"
        )
