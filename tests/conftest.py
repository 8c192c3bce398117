"""Session fixtures shared by every integration test: one real stack for the whole run.

The stack and the factory fixtures come from the toolkit's own pytest plugin (`devstack.pytest_plugin`,
loaded through its `pytest11` entry point): these tests use it as a user's tests would.
"""

from __future__ import annotations

import pytest

from devstack.session import StackHandle


@pytest.fixture(scope="session")
def stack(toolkit_stack: StackHandle) -> StackHandle:
    """The repository's name for the plugin's `toolkit_stack` (Postgres, Kafka, Connect+Debezium, Redis,
    Apicurio — reused, in containers, local processes or external)."""
    return toolkit_stack
