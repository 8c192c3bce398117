"""The micro-benchmarks' fixtures: one Spark driver (`local[2]`, the materializers' session) per run,
the stack's Kafka from the environment, and the run's size (`--bench-size quick|full`).

These files run only under their own pytest invocation (`python -m bench run NAME`, which passes
`--benchmark-json` and the stack's endpoints): the test suite's `testpaths` is `tests/`, so they never
add to `make test`'s time.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from materializers.config import RunConfig
from materializers.spark import session as spark_session


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--bench-size", choices=("quick", "full"), default="full", help="rounds and sizes")


@pytest.fixture(scope="session")
def quick(request: pytest.FixtureRequest) -> bool:
    return bool(request.config.getoption("--bench-size") == "quick")


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    session = spark_session.build("local[2]", "bench-micro")
    yield session
    session.stop()


@pytest.fixture(scope="session")
def bootstrap() -> str:
    return RunConfig.from_env().endpoints.kafka_bootstrap_servers
