"""The README's "Testing your own pipelines": its test file, run as a user would, on the containers
backend (a stack of its own, started and removed by the plugin in that pytest process)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from devstack import containers, images

pytestmark = [pytest.mark.integration, pytest.mark.containers]

README = Path(__file__).resolve().parents[3] / "README.md"


def readme_test_file() -> str:
    section = README.read_text().split("## Testing your own pipelines", 1)[1].split("\n## ", 1)[0]
    found = re.search(r"```python\n(# test_capture\.py[^\n]*\n.*?)```", section, re.DOTALL)
    assert found, "the README's testing section lost its test file"
    return found.group(1)


def test_the_readmes_test_passes_on_containers_and_leaves_none(tmp_path: Path) -> None:
    (tmp_path / "test_capture.py").write_text(readme_test_file())
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "TOOLKIT_STACK"))}
    env |= {"TOOLKIT_STACK": "containers", "STACK_OPENSEARCH": "0"}
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_capture.py"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert "1 passed" in run.stdout, run.stdout[-3000:] + run.stderr[-2000:]
    client = images.docker_client()
    try:  # the user's pytest has exited: a container whose owner is gone is one it left
        left = [
            c.name
            for c in client.containers.list(all=True, filters={"label": [f"{images.LABEL}=stack"]})
            if not containers.alive(int(c.labels.get(containers.OWNER_LABEL, "0")))
        ]
    finally:
        client.close()
    assert left == [], f"the user's session left containers behind: {left}"
