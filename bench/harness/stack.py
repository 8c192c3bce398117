"""The stack a benchmark runs on: the running local one reused, or one started for the run.

`services()` opens it through `devstack.session.open_stack` (a running `.stack/env` is reused and left
running; otherwise the chosen backend starts one and stops it after the run) and yields the
environment a scenario's process gets: the caller's environment plus the stack's endpoints, so each
scenario reads its addresses with `from_env()` as any toolkit process does.

The cluster topology (`make up-cluster`) is never started here: it takes ~8 minutes and 7 GiB; a
scenario that needs it runs only when `.stack-cluster/env` is present (`cluster_env()`).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from devstack.session import open_stack

REPO = Path(__file__).resolve().parents[2]
STACK_DIR = REPO / ".stack"
CLUSTER_ENV = REPO / ".stack-cluster" / "env"


@contextmanager
def services() -> Iterator[dict[str, str]]:
    with open_stack() as stack:
        yield {**os.environ, **stack.endpoints.as_env()}


def cluster_env() -> Path | None:
    """The cluster topology's env file when it is up, else None."""
    return CLUSTER_ENV if CLUSTER_ENV.is_file() else None
