"""The public API and the pytest plugin proven from the outside: the toolkit's wheel and the example
project (examples/inventory: its own aggregate, its own materializer with a view of its own, and their
tests) installed into a fresh virtualenv, the example's tests run there against this session's stack
as an `external` one, with no source tree on the path; then the wheel's console scripts from there:
`devstack up`, `eventstore` init/processor/execute/read and `cdc validate`. (`materializers start`
from the wheel runs in the example's own tests, and on the Spark workers in tests/cluster.)"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict

from devstack.config import StackConfig
from devstack.session import StackHandle

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = ROOT / "examples" / "inventory"


def run(argv: list[str], *, cwd: Path, env: dict[str, str] | None = None, timeout: float) -> str:
    done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, (
        f"{' '.join(argv[:4])} ... exited {done.returncode}:\n{done.stdout[-4000:]}{done.stderr[-4000:]}"
    )
    return done.stdout


def test_the_example_project_passes_its_tests_from_installed_wheels(
    toolkit_stack: StackHandle, tmp_path: Path
) -> None:
    run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(tmp_path / "dist"), str(ROOT)],
        cwd=tmp_path, timeout=300)  # fmt: skip
    (wheel,) = (tmp_path / "dist").glob("kafka_toolkit-*.whl")
    venv = tmp_path / "venv"
    run([sys.executable, "-m", "venv", str(venv)], cwd=tmp_path, timeout=120)
    # The example's own files are copied: its tests must import the installed `inventory`, not a checkout.
    project = tmp_path / "inventory"
    shutil.copytree(EXAMPLE, project, ignore=shutil.ignore_patterns("*.egg-info", "__pycache__", "build"))
    run(
        # --no-compile: byte-compiling every installed module (pyspark's thousands) took a third of the
        # install; the tests compile what they import.
        [
            str(venv / "bin" / "pip"),
            "install",
            "-q",
            "--no-compile",
            f"{wheel}[containers]",
            f"{project}[test]",
        ],
        cwd=tmp_path,
        timeout=900,
    )
    shutil.rmtree(project / "inventory")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTEST_ADDOPTS")}
    env |= toolkit_stack.external_env()  # the session's stack, Connect's view of it included
    out = run([str(venv / "bin" / "pytest"), "-q", "-p", "no:cacheprovider", "tests"], cwd=project, env=env,
              timeout=600)  # fmt: skip
    assert "6 passed" in out, out[-2000:]  # its 4 own tests and the view contract's 2
    located = run([str(venv / "bin" / "python"), "-c", "import eventstore, inventory; print(eventstore.__file__, inventory.__file__)"],
                  cwd=tmp_path, env=env, timeout=60)  # fmt: skip
    assert str(ROOT) not in located and str(venv) in located  # both from the virtualenv's site-packages
    # The console scripts from the same installed wheel, run outside any checkout: the dev stack's
    # `up` (this session's stack, found by its state dir: every service answers, nothing restarts),
    # an event store initialised, written and read through `eventstore`, a spec checked by `cdc`.
    bin_ = venv / "bin"
    if toolkit_stack.backend.startswith("local"):
        up = run([str(bin_ / "devstack"), "up"], cwd=tmp_path, env=env | {"STACK_DIR": str(StackConfig.from_env().state_dir)},
                 timeout=300)  # fmt: skip
        assert f"KAFKA_BOOTSTRAP_SERVERS={toolkit_stack.endpoints.kafka_bootstrap_servers}" in up
    else:  # the wheel carries the images' Dockerfiles: the tags it computes are on the engine (else exit 1)
        run([str(bin_ / "devstack"), "images", "list"], cwd=tmp_path, env=env, timeout=120)
    store = [
        "--name",
        f"wheel-{uuid.uuid4().hex[:8]}",
        "--aggregate",
        "inventory.stock:STOCK",
        "--partitions",
        "1",
    ]
    run([str(bin_ / "eventstore"), "init", *store], cwd=tmp_path, env=env, timeout=120)
    processor = subprocess.Popen([str(bin_ / "eventstore"), "processor", *store, "--max-idle", "60"], cwd=tmp_path,
                                 env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    try:
        run([str(bin_ / "eventstore"), "execute", *store, "--command", "stock.receive", "--data",
             '{"sku": "W1", "quantity": 3}'], cwd=tmp_path, env=env, timeout=180)  # fmt: skip
        read = run([str(bin_ / "eventstore"), "read", *store, "--json", "stock-W1"], cwd=tmp_path, env=env,
                   timeout=120)  # fmt: skip
    finally:
        processor.kill()
    (event,) = [json.loads(line) for line in read.splitlines() if line.strip()]
    assert event["version"] == 1 and event["data"]["quantity"] == 3, event
    table = f"public.wheel_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(toolkit_stack.endpoints.pg_dsn, autocommit=True) as pg:
        pg.execute(f"CREATE TABLE {table} (id int PRIMARY KEY, v text)")  # type: ignore[arg-type]
    try:
        # The spec names Postgres as Connect reaches it; pre-flight runs from here (--preflight-at).
        db = conninfo_to_dict(toolkit_stack.connect_view.pg_dsn)
        here = conninfo_to_dict(toolkit_stack.endpoints.pg_dsn)
        spec = {"name": f"wheel-{uuid.uuid4().hex[:8]}", "topic_prefix": "wheel", "tables": [table],
                "database": {"hostname": db["host"], "port": int(db["port"]), "user": db["user"],
                             "password": db.get("password", ""), "dbname": db["dbname"]}}  # fmt: skip
        (tmp_path / "spec.json").write_text(json.dumps(spec))
        checked = run([str(bin_ / "cdc"), "validate", "--json", str(tmp_path / "spec.json"),
                       "--preflight-at", f"{here['host']}:{here['port']}"], cwd=tmp_path, env=env, timeout=120)  # fmt: skip
        assert json.loads(checked)["valid"] is True, checked
    finally:
        with psycopg.connect(toolkit_stack.endpoints.pg_dsn, autocommit=True) as pg:
            pg.execute(f"DROP TABLE {table}")  # type: ignore[arg-type]
