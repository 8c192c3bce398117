"""The public API and the pytest plugin proven from the outside: the toolkit's wheel and the example
project (examples/inventory: its own aggregate, its own materializer with a view of its own, and their
tests) installed into a fresh virtualenv, the example's tests run there against this session's stack
as an `external` one, with no source tree on the path."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

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
        [str(venv / "bin" / "pip"), "install", "-q", str(wheel), f"{project}[test]"],
        cwd=tmp_path,
        timeout=900,
    )
    shutil.rmtree(project / "inventory")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTEST_ADDOPTS")}
    env |= toolkit_stack.endpoints.as_env() | {"TOOLKIT_STACK": "external"}
    out = run([str(venv / "bin" / "pytest"), "-q", "-p", "no:cacheprovider", "tests"], cwd=project, env=env,
              timeout=600)  # fmt: skip
    assert "4 passed" in out, out[-2000:]
    located = run([str(venv / "bin" / "python"), "-c", "import eventstore, inventory; print(eventstore.__file__, inventory.__file__)"],
                  cwd=tmp_path, env=env, timeout=60)  # fmt: skip
    assert str(ROOT) not in located and str(venv) in located  # both from the virtualenv's site-packages
