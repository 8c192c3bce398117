"""The plugin's helpers without services: Connect's view of Postgres and the registry on each backend,
connector specs built from it, crash of a whole process group, redacted endpoints."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

import pytest

from cdc.connect_client import ConnectClient
from cdc.connector_spec import DatabaseSpec
from devstack.connectors import ConnectorFactory
from devstack.crash import ProcessGroups, crash_group, wait_until
from devstack.probes import redact
from devstack.processes import group_members
from devstack.session import ConnectView, StackChoice, StackHandle
from kafkakit.settings import Endpoints

HOST = Endpoints(
    pg_dsn="postgresql://test:pw@localhost:32771/test",
    schema_registry_url="http://localhost:32775/apis/ccompat/v7",
)


def _never(*_: Any) -> None:
    raise AssertionError("no fault injection in these tests")


def _handle(view: ConnectView) -> StackHandle:
    return StackHandle(HOST, "testcontainers", _never, _never, view)


def test_the_container_stack_gives_connect_the_network_addresses() -> None:
    from devstack.containers import ContainerStack

    containers = ContainerStack(
        endpoints=HOST,
        pg_host_for_connect="postgres",
        pg_port_for_connect=5432,
        kafka_bootstrap_for_connect="kafka:9092",
        registry_url_for_connect="http://apicurio:8080",
        services=(),
        network=None,  # type: ignore[arg-type]
    )
    assert containers.pg_dsn_for_connect == "postgresql://test:pw@postgres:5432/test"
    db = DatabaseSpec.from_dsn(containers.pg_dsn_for_connect)
    assert (db.hostname, db.port, db.user, db.password, db.dbname) == ("postgres", 5432, "test", "pw", "test")


@pytest.fixture
def factory() -> Any:
    view = ConnectView(
        pg_dsn="host=postgres port=5432 user=test password=pw dbname=test",
        schema_registry_url="http://apicurio:8080",
    )
    with ConnectClient("http://127.0.0.1:9") as connect:  # never called: specs are pure
        yield ConnectorFactory.for_stack(_handle(view), connect, "avro")


def test_specs_carry_connects_view_and_pre_flight_gets_the_hosts(factory: ConnectorFactory) -> None:
    spec = factory.spec(["public.t"])
    assert (spec.database.hostname, spec.database.port, spec.database.user) == ("postgres", 5432, "test")
    assert spec.registry is not None and spec.registry.base_url == "http://apicurio:8080"
    config = spec.to_config()
    assert config["database.hostname"] == "postgres" and config["database.port"] == "5432"
    assert "apicurio:8080" in config["value.converter.apicurio.registry.url"]
    local = factory.as_host_sees_it(spec)
    assert (local.database.hostname, local.database.port, local.database.user) == ("localhost", 32771, "test")
    assert local.registry == spec.registry and local.name == spec.name


def test_a_database_the_caller_chose_is_left_alone(factory: ConnectorFactory) -> None:
    chosen = DatabaseSpec(hostname="replica", port=6432, user="cdc", dbname="test")
    spec = factory.spec(["public.t"], database=chosen, format="json")
    assert spec.database == chosen and spec.registry is None
    assert factory.as_host_sees_it(spec) == spec


def test_a_local_stack_uses_one_address_for_both() -> None:
    with ConnectClient("http://127.0.0.1:9") as connect:
        local = ConnectorFactory.for_stack(_handle(ConnectView.same_as(HOST)), connect)
        spec = local.spec(["public.t"])
    assert (spec.database.hostname, spec.database.port) == ("localhost", 32771)
    assert local.as_host_sees_it(spec) == spec


def test_an_external_stack_takes_connects_view_from_the_environment() -> None:
    env = {
        "TOOLKIT_STACK": "external",
        "PG_DSN": HOST.pg_dsn,
        "TOOLKIT_CONNECT_PG_DSN": "postgresql://test:pw@postgres:5432/test",
    }
    choice = StackChoice.from_env(env)
    view = choice.external_connect_view()
    assert choice.backend == "external" and view.pg_dsn.endswith("@postgres:5432/test")
    assert view.schema_registry_url == Endpoints().schema_registry_url  # not set: the host's own


def test_crash_kills_the_whole_group_and_waits_until_it_is_gone() -> None:
    groups = ProcessGroups()
    # A parent and a child it forked (a driver and its JVM): both must go.
    parent = groups.start(["bash", "-c", "sleep 300 & sleep 300"])
    wait_until(lambda: len(group_members(parent.pid)) >= 2, timeout_s=10, what="parent and child running")
    assert groups.crash(parent) == -9
    assert group_members(parent.pid) == []
    groups.close()


def test_close_kills_what_a_failed_test_left_running() -> None:
    groups = ProcessGroups()
    survivor = groups.start([sys.executable, "-c", "import time; time.sleep(300)"])
    groups.close()
    assert survivor.poll() == -9 and group_members(survivor.pid) == []


def test_crash_refuses_the_callers_own_group() -> None:
    """A process started without a session of its own shares ours: killing its group would kill us."""

    class SameGroup:
        pid = os.getpgid(0)

    with pytest.raises(ValueError, match="start_new_session"):
        crash_group(SameGroup())  # type: ignore[arg-type]


def test_wait_until_stops_as_soon_as_the_process_exits() -> None:
    quitter = subprocess.Popen(["true"])
    with pytest.raises(RuntimeError, match="exited with status 0"):
        wait_until(lambda: False, timeout_s=30, what="a marker", process=quitter)


def test_endpoints_in_messages_carry_no_password() -> None:
    assert redact("postgresql://app:s3cret@db:5432/app") == "postgresql://app:***@db:5432/app"
    assert redact("host=db user=app password=s3cret dbname=app") == "host=db user=app password=*** dbname=app"
    assert redact("redis://127.0.0.1:6379/0") == "redis://127.0.0.1:6379/0"
