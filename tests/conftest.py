"""Session fixtures shared by every integration test: one real stack for the whole run."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from devstack.session import StackHandle, open_stack


@pytest.fixture(scope="session")
def stack() -> Iterator[StackHandle]:
    """Postgres, Kafka, Connect+Debezium, Redis and Apicurio — reused, in containers, or local processes."""
    with open_stack() as handle:
        yield handle
