"""The toolkit's pytest plugin: the real stack and factory fixtures for your own integration tests.

Installed with the toolkit and loaded by pytest through the `pytest11` entry point `kafka_toolkit`
(with PYTEST_DISABLE_PLUGIN_AUTOLOAD set: `pytest -p devstack.pytest_plugin`). Fixtures:

- `toolkit_stack` (session) -> `StackHandle`: Postgres, Kafka, Connect + Debezium, Redis and Apicurio.
  The backend is `TOOLKIT_STACK` (or `--toolkit-stack`): `auto` (default: a running local stack, else
  testcontainers where a Docker engine answers, else the local processes), `containers`, `local` or
  `external` (the five endpoint variables; TOOLKIT_CONNECT_PG_DSN / TOOLKIT_CONNECT_REGISTRY_URL when
  Connect reaches Postgres / the registry elsewhere). See `devstack.session`.
- `topic_factory` -> `TopicFactory`: `topic_factory("orders", partitions=3)` makes a uniquely named topic;
  all are deleted after the test.
- `connector_format` -> "json" by default; parametrize it indirectly for other formats (`avro` is
  checked against the Connect worker's plugins).
- `connector_factory` -> `ConnectorFactory`: `spec(tables)` builds a ConnectorSpec whose database (and
  registry) is the address *Connect* reaches on this backend; `start(spec)` runs pre-flight, registers
  it and waits for its snapshot; connectors, slots and publications are removed after the test.
- `event_store_factory` -> `EventStoreFactory`: `event_store_factory("mypkg.orders:ORDER")` makes a
  store with its own topics and schemas and starts an `eventstore processor` process for it
  (`.client()` sends commands; crash the processor with `process_groups.crash`).
- `materializer_factory` -> `MaterializerFactory`: `start(LOW_STOCK, topic=...)` runs a `materializers
  start` driver (a `Materializer` defined at module level, or `module:attr`) with its own home,
  checkpoint, Redis prefix and dead-letter topic; `wait_caught_up(run)`, `stop(run)` (SIGTERM),
  `crash(run)` (or `process_groups.crash(run.process)`), `restart(run)`; its state is removed after.
- `process_groups` -> `ProcessGroups`: start a process in a group of its own, `crash(p)` is kill -9 of
  the group and a wait until it is gone; survivors are killed after the test.
- `secure_kafka` (session) -> `SecureKafka`: the local single-node stack's SASL_SSL listener (SCRAM
  user, self-signed CA): `.bootstrap_servers`, `.client_config`, `.endpoints(base)`, `.env()`. Skips
  the test where the stack has none (containers, external, the cluster); fails on a local single-node
  stack whose Kafka was started before the listener existed (restart it).
- `stack_faults` -> `StackFaults`: `crash("connect")`, `recover()`; whatever is still down is recovered
  after the test. Skipped on an external stack.

Bad input fails before any test body runs: a backend that is not available here (TOOLKIT_STACK=containers
without a Docker engine, an external stack whose endpoints do not answer, an unknown TOOLKIT_STACK) makes
`toolkit_stack` fail every test that uses it with the cause and the fix, and the stack is tried once;
an aggregate or a materializer that does not load is refused by its factory before any process starts.

Importing this module starts nothing and reads no environment: everything happens in fixtures, and
the service clients are imported there, so a pytest run that uses none of them pays nothing.
"""

from __future__ import annotations

from collections.abc import Generator, Iterator
from contextlib import ExitStack
from typing import TYPE_CHECKING

import pytest

from kafkakit.errors import ToolkitError

if TYPE_CHECKING:
    from pathlib import Path

    from devstack.connectors import ConnectorFactory
    from devstack.crash import ProcessGroups, StackFaults
    from devstack.event_stores import EventStoreFactory
    from devstack.kafka_security import SecureKafka
    from devstack.materializer_runs import MaterializerFactory
    from devstack.session import StackHandle
    from devstack.topics import TopicFactory

BACKEND_OPTION = "--toolkit-stack"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("kafka-toolkit", "kafka-toolkit's stack fixtures")
    group.addoption(
        BACKEND_OPTION,
        choices=("auto", "external", "containers", "local"),
        default=None,
        help="the stack backend for `toolkit_stack` (overrides TOOLKIT_STACK; default auto)",
    )


@pytest.fixture(scope="session")
def toolkit_stack(pytestconfig: pytest.Config) -> Iterator[StackHandle]:
    """The five services for the whole session: reused, in containers, local processes or external."""
    from devstack.session import StackChoice, open_stack

    with ExitStack() as resources:
        try:
            choice = StackChoice.from_env(backend=pytestconfig.getoption(BACKEND_OPTION))
            handle: StackHandle | None = resources.enter_context(open_stack(choice=choice))
        except ToolkitError as exc:  # a refusal names its cause and fix: show that, not a traceback
            handle, refusal = None, f"toolkit_stack: {exc}"
        if handle is None:
            pytest.fail(refusal, pytrace=False)
        yield handle


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """A failed test that used the stack says which of its services were down at that moment (a container
    by name and exit code), since a crash of one is the likeliest cause and its own error rarely says so."""
    report = yield
    used = getattr(item, "funcargs", {})
    handle = used.get("toolkit_stack") or used.get("stack")
    if report.failed and handle is not None and hasattr(handle, "stopped"):
        try:
            down = handle.stopped()
        except Exception as exc:  # a report must never fail because the engine went away
            down = [f"(could not ask: {exc})"]
        if down:
            report.sections.append(("toolkit_stack", "services down after this test: " + "; ".join(down)))
    return report


@pytest.fixture(scope="session")
def secure_kafka(toolkit_stack: StackHandle) -> SecureKafka:
    """The local stack's secured Kafka listener (devstack.kafka_security), from its env file."""
    from devstack.config import StackConfig
    from devstack.kafka_security import SecureKafka
    from devstack.stack import read_env

    config = StackConfig.from_env()
    if not toolkit_stack.backend.startswith("local") or config.topology.name != "single":
        pytest.skip(
            f"no secured Kafka listener on this stack ({toolkit_stack.backend}): only the local single-node stack has one"
        )
    found = SecureKafka.from_stack_env(read_env(config.env_file)) if config.env_file.exists() else None
    if found is None:  # a local stack whose Kafka started before the listener existed: not a pass
        pytest.fail(
            f"the local stack ({config.env_file}) has no secured Kafka listener: its Kafka was started before it existed; restart it (make down && make up)"
        )
    return found


@pytest.fixture
def topic_factory(toolkit_stack: StackHandle) -> Iterator[TopicFactory]:
    """Creates uniquely named topics (`topic_factory(prefix, partitions=, config=)`); deleted afterwards."""
    from devstack.topics import TopicFactory

    with TopicFactory(toolkit_stack.endpoints.kafka_bootstrap_servers) as factory:
        yield factory


@pytest.fixture
def connector_format(request: pytest.FixtureRequest, toolkit_stack: StackHandle) -> str:
    """The record format `connector_factory` writes: "json" unless parametrized indirectly
    (`@pytest.mark.parametrize("connector_format", ["json", "avro"], indirect=True)`)."""
    from devstack.connectors import require_record_format

    try:
        return require_record_format(
            toolkit_stack.endpoints.kafka_connect_url, str(getattr(request, "param", "json"))
        )
    except ToolkitError as exc:
        pytest.fail(f"connector_format: {exc}", pytrace=False)


@pytest.fixture
def connector_factory(toolkit_stack: StackHandle, connector_format: str) -> Iterator[ConnectorFactory]:
    """Debezium connectors Connect can act on, on every backend; removed (with slot and publication) after."""
    from cdc.connect_client import ConnectClient
    from devstack.connectors import ConnectorFactory

    with ConnectClient(toolkit_stack.endpoints.kafka_connect_url) as connect:
        factory = ConnectorFactory.for_stack(toolkit_stack, connect, connector_format)
        try:
            yield factory
        finally:
            factory.cleanup()


@pytest.fixture
def event_store_factory(
    toolkit_stack: StackHandle, process_groups: ProcessGroups, tmp_path: Path
) -> Iterator[EventStoreFactory]:
    """Fresh event stores (`event_store_factory("mypkg.orders:ORDER")`): topics and schemas created, a
    processor process running (crash it with `process_groups.crash`); processors killed and topics
    deleted after the test."""
    from devstack.event_stores import EventStoreFactory

    factory = EventStoreFactory(toolkit_stack, process_groups, tmp_path / "processors")
    try:
        yield factory
    finally:
        factory.close()


@pytest.fixture
def materializer_factory(
    toolkit_stack: StackHandle, process_groups: ProcessGroups, tmp_path: Path
) -> Iterator[MaterializerFactory]:
    """Materializer drivers (`materializer_factory.start(LOW_STOCK, topic=...)`), each with its own home,
    checkpoint, Redis prefix and dead letters; `wait_caught_up`, `stop`, `crash`, `restart`. Drivers
    killed and their state (home, Redis keys, dead-letter topic) removed after the test."""
    from devstack.materializer_runs import MaterializerFactory

    factory = MaterializerFactory(toolkit_stack, process_groups, tmp_path / "materializers")
    try:
        yield factory
    finally:
        factory.close()


@pytest.fixture
def process_groups() -> Iterator[ProcessGroups]:
    """Processes started in groups of their own; `crash(p)` = kill -9 of the group, then wait until gone."""
    from devstack.crash import ProcessGroups

    groups = ProcessGroups()
    try:
        yield groups
    finally:
        groups.close()


@pytest.fixture
def stack_faults(toolkit_stack: StackHandle) -> Iterator[StackFaults]:
    """kill -9 and recovery of the stack's services; a service left down is recovered after the test."""
    from devstack.crash import StackFaults

    if not toolkit_stack.can_inject_faults:
        pytest.skip(
            f"fault injection needs a stack this session controls, not the {toolkit_stack.backend} one"
        )
    faults = StackFaults(toolkit_stack)
    try:
        yield faults
    finally:
        faults.close()
