"""The fault matrix's stack: the cluster topology (`make test-cluster`, STACK_TOPOLOGY=cluster), started
or reused through the same plugin fixtures as every other integration test.

Every test module here is marked `cluster` and `integration` (`pytestmark`); `make test` deselects them. A run against the
single-node stack fails at once saying how to run them, instead of passing on one broker.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator

import pytest
from cluster_helpers import Cluster

from devstack import stack
from devstack.config import CLUSTER, StackConfig
from devstack.crash import StackFaults
from devstack.session import StackHandle


@pytest.fixture(scope="session")
def cluster(toolkit_stack: StackHandle) -> Iterator[Cluster]:
    config = StackConfig.from_env()
    if config.topology != CLUSTER:
        pytest.fail(
            "the fault matrix needs the cluster topology: run `make test-cluster` "
            "(or STACK_TOPOLOGY=cluster pytest -m cluster tests/cluster)",
            pytrace=False,
        )
    env = stack.read_env(config.env_file)
    # Drivers started by the tests (materializers) run on the Spark cluster, their executors in the
    # workers' own environment.
    saved = {k: os.environ.get(k) for k in ("SPARK_MASTER_URL", "PYSPARK_PYTHON")}
    os.environ.update({k: env[k] for k in saved})
    try:
        yield Cluster(toolkit_stack, config, env)
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


@pytest.fixture
def faults(cluster: Cluster, stack_faults: StackFaults) -> StackFaults:
    """kill -9 a node of the cluster (`faults.crash("kafka-2")`); whatever is down is restarted after."""
    return stack_faults


@pytest.fixture
def fault_record(cluster: Cluster) -> Iterator[dict[str, object]]:
    """A test fills it with what it measured; a passing test's record is appended to
    <state>/fault-matrix.jsonl (the numbers the closing notes and docs/operations/scaling.md quote)."""
    record: dict[str, object] = {}
    yield record
    if record:
        with (cluster.config.state_dir / "fault-matrix.jsonl").open("a") as out:
            out.write(json.dumps({**record, "at": time.strftime("%Y-%m-%dT%H:%M:%S")}) + "\n")
