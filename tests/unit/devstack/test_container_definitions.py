"""The container stack's definitions, without a Docker engine: what each container would publish, where,
and with which settings. testcontainers asks the engine for its version when a container object is
made, so its client is replaced by a stand-in; nothing is started."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from devstack import containers
from devstack.pins import Pins
from kafkakit.settings import Endpoints

COMPOSE = Path(__file__).resolve().parents[3] / "docker" / "compose.yaml"
PG_PASSWORD = "Drawn-For-This-Stack-4k9"


class NoEngine:
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass


@pytest.fixture
def define(monkeypatch: pytest.MonkeyPatch) -> Any:
    import testcontainers.core.container

    monkeypatch.setattr(testcontainers.core.container, "DockerClient", NoEngine)

    def make(optional: frozenset[str] = frozenset(), pg_password: str = PG_PASSWORD) -> dict[str, Any]:
        images = containers.Images.official(Pins.load())
        services, _endpoints = containers._define(
            images,
            object(),  # type: ignore[arg-type]
            60,
            {"/host": "/mount"},
            optional,
            pg_password=pg_password,
        )
        return {s.name: s.container for s in services}

    return make


def test_every_published_port_binds_the_loopback_only_each_on_its_own_host_port(define: Any) -> None:
    made = define(frozenset({"opensearch"}))
    published = {name: c.ports for name, c in made.items()}
    assert all(len(ports) == 1 for ports in published.values()), published
    bindings = [binding for ports in published.values() for binding in ports.values()]
    assert all(isinstance(b, tuple) and b[0] == "127.0.0.1" for b in bindings), bindings
    assert len({port for _ip, port in bindings}) == len(bindings)
    assert set(published["kafka"]) == {str(containers.KAFKA_HOST_LISTENER_PORT)}
    assert set(published["postgres"]) == {str(containers.PG_PORT)}


def test_opensearch_is_started_only_when_the_stack_asks_for_it(define: Any) -> None:
    assert list(define()) == ["postgres", "redis", "registry", "kafka", "connect"]
    node = define(frozenset({"opensearch"}))["opensearch"]
    assert node.image == f"opensearchproject/opensearch:{Pins.load().opensearch}"
    assert set(node.ports) == {str(containers.OPENSEARCH_PORT)}
    assert node.env["discovery.type"] == "single-node"
    assert node.env["DISABLE_SECURITY_PLUGIN"] == "true"  # plain HTTP, as the local node
    assert node.env["path.repo"]  # the materializers' snapshots need a repository location
    assert node._network_aliases == [containers.OPENSEARCH_ALIAS]


def test_the_opensearch_settings_are_composes() -> None:
    compose = yaml.safe_load(COMPOSE.read_text())["services"]["opensearch"]
    assert compose["environment"] == containers.opensearch_env(), (
        "change opensearch_env() in docker/devstack/containers.py or the opensearch service in "
        "docker/compose.yaml: they must agree"
    )
    assert compose["ports"] == [f"127.0.0.1:19200:{containers.OPENSEARCH_PORT}"]


def test_without_opensearch_there_is_no_url() -> None:
    assert containers.opensearch_url([]) is None


def test_postgres_gets_the_stacks_password_never_the_well_known_one(define: Any) -> None:
    pg = define()["postgres"]
    pg._configure()  # what start() does first: the container's environment from its settings
    assert pg.env["POSTGRES_PASSWORD"] == PG_PASSWORD != "postgres"
    assert pg.password == PG_PASSWORD  # what get_connection_url puts in the DSN the stack hands out


def test_each_stack_draws_a_new_url_safe_password() -> None:
    drawn = {containers.new_pg_password() for _ in range(20)}
    assert len(drawn) == 20
    assert all(len(p) >= 20 and p.replace("-", "").replace("_", "").isalnum() for p in drawn)


def test_connect_gets_the_dsn_with_the_password_at_postgres_network_address() -> None:
    endpoints = Endpoints(
        kafka_bootstrap_servers="127.0.0.1:1",
        kafka_connect_url="http://127.0.0.1:2",
        pg_dsn=f"postgresql://postgres:{PG_PASSWORD}@127.0.0.1:49153/postgres",
        redis_url="redis://127.0.0.1:3/0",
        schema_registry_url="http://127.0.0.1:4/apis/ccompat/v7",
    )
    stack = containers.ContainerStack(
        endpoints=endpoints,
        pg_host_for_connect=containers.PG_ALIAS,
        pg_port_for_connect=containers.PG_PORT,
        kafka_bootstrap_for_connect="kafka:9092",
        registry_url_for_connect="http://apicurio:8080",
        services=(),
        network=object(),  # type: ignore[arg-type]
    )
    assert stack.pg_dsn_for_connect == f"postgresql://postgres:{PG_PASSWORD}@postgres:5432/postgres"
