"""Session fixtures shared by every integration test: one real stack for the whole run.

The stack and the factory fixtures come from the toolkit's own pytest plugin (`devstack.pytest_plugin`,
loaded through its `pytest11` entry point): these tests use it as a user's tests would.
"""

from __future__ import annotations

import pytest

from devstack.kafka_security import KafkaAccess, SecureKafka
from devstack.session import StackHandle


@pytest.fixture(scope="session")
def stack(toolkit_stack: StackHandle) -> StackHandle:
    """The repository's name for the plugin's `toolkit_stack` (Postgres, Kafka, Connect+Debezium, Redis,
    Apicurio — reused, in containers, local processes or external)."""
    return toolkit_stack


@pytest.fixture(scope="session")
def kafka(stack: StackHandle, request: pytest.FixtureRequest) -> KafkaAccess:
    """How every suite reaches the stack's Kafka: its SASL_SSL listener where it has one (the local
    single-node stack), else PLAINTEXT.

    Every client, job and CLI run of the suites then authenticates with SCRAM over TLS, as against a
    production cluster. Stacks without the listener (containers, compose, the cluster topology) run
    the suites over PLAINTEXT. A local stack started before the listener existed fails here (restart
    it), as `secure_kafka` does.
    """
    try:
        secured: SecureKafka | None = request.getfixturevalue("secure_kafka")
    except pytest.skip.Exception:
        secured = None
    return KafkaAccess(stack.kafka_bootstrap_servers, secured)
