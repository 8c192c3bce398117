"""The container stack on a real Docker engine (`make test-containers`): what it publishes and where, how
it refuses, and what it leaves. The session's own stack is the one under test; the failures start
stacks of their own."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from contextlib import suppress
from typing import Any

import pytest
from docker.errors import NotFound

from devstack import containers, images, session
from devstack.errors import BackendUnavailable, ImagesNotBuilt, ServiceNotReady
from devstack.pins import Pins
from devstack.session import StackChoice, StackHandle, open_stack

pytestmark = [pytest.mark.integration, pytest.mark.containers]


@pytest.fixture(scope="module")
def engine(toolkit_stack: StackHandle) -> Iterator[Any]:
    if toolkit_stack.backend != "testcontainers":
        pytest.fail(
            f"these tests run on the containers backend (make test-containers), not {toolkit_stack.backend}"
        )
    client = images.docker_client()
    try:
        yield client
    finally:
        client.close()


def ours(client: Any, **labels: str) -> list[Any]:
    wanted = {images.LABEL: "stack", containers.OWNER_LABEL: str(os.getpid()), **labels}
    return client.containers.list(all=True, filters={"label": [f"{k}={v}" for k, v in wanted.items()]})


def test_every_port_is_published_on_the_loopback_only_and_containers_are_named(engine: Any) -> None:
    running = ours(engine)
    names = {c.name.rsplit("-", 1)[-1] for c in running}
    assert {"postgres", "redis", "registry", "kafka", "connect", "opensearch"} <= names
    for container in running:
        assert container.name.startswith("kafka-toolkit-"), container.name
        bindings = [
            b
            for spec in engine.api.inspect_container(container.id)["HostConfig"]["PortBindings"].values()
            for b in spec
        ]
        published = engine.api.port(container.id, next(iter(container.ports)).split("/")[0])
        assert bindings and all(b["HostIp"] == "127.0.0.1" for b in bindings), (container.name, bindings)
        assert all(p["HostIp"] == "127.0.0.1" for p in published), (container.name, published)


def test_a_container_that_exits_at_start_is_named_with_its_last_lines_and_nothing_is_left(
    engine: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = {c.id for c in ours(engine)}
    broken = containers.kafka_env() | {"KAFKA_PROCESS_ROLES": "nonsense"}
    monkeypatch.setattr(containers, "kafka_env", lambda: broken)
    with pytest.raises(ServiceNotReady) as failure:
        containers.start_container_stack(ready_timeout_s=120, optional=frozenset())
    message = str(failure.value)
    assert message.startswith("kafka (container kafka-toolkit-"), message
    assert "exited with code" in message and "--- last log lines ---" in message
    assert "nonsense" in message.split("--- last log lines ---")[1], "Kafka's own complaint is shown"
    assert {c.id for c in ours(engine)} == before, "the failed stack's containers were removed"
    networks = engine.networks.list(filters={"label": [f"{containers.OWNER_LABEL}={os.getpid()}"]})
    assert len(networks) == 1, f"only the session's network is left: {[n.name for n in networks]}"


def test_missing_or_stale_images_are_refused_in_one_line_and_auto_runs_local(
    engine: Any, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # Another base gives every image another tag: the engine has none of them, as after a pin change.
    monkeypatch.setenv("TOOLKIT_BASE_IMAGE", "kafka-toolkit/base:not-built")
    with pytest.raises(ImagesNotBuilt) as missing:
        containers.choose_images(engine, Pins.load(), frozenset())
    assert "kafka-toolkit/postgres:" in str(missing.value) and "devstack images build" in str(missing.value)
    with pytest.raises(BackendUnavailable) as refused, open_stack(choice=StackChoice(backend="containers")):
        pass
    text = str(refused.value)
    assert "\n" not in text and "TOOLKIT_STACK=local" in text and "devstack images build" in text
    with caplog.at_level(logging.WARNING, logger="devstack.session"):
        assert session._containers_usable() is False
    assert any("runs the services as local processes instead" in r.getMessage() for r in caplog.records)


def test_prune_removes_only_the_stacks_whose_owner_is_gone(engine: Any) -> None:
    base = images.Base.from_machine()
    dead_owner = 2**22 + 12345  # above the default pid_max: no process has it
    made = [
        engine.containers.run(
            base.tag, ["sleep", "300"], detach=True, labels=containers.stack_labels(owner) | {"test": "prune"}
        )
        for owner in (dead_owner, os.getpid())
    ]
    try:
        removed = containers.prune(engine)
        left = {c.id for c in engine.containers.list(all=True, filters={"label": ["test=prune"]})}
        assert f"container {made[0].name}" in removed and made[0].id not in left
        assert made[1].id in left, "a living owner's container is kept"
        assert len(ours(engine)) >= 6, "the session's own stack is untouched"
    finally:
        for container in made:
            with suppress(NotFound):
                container.remove(force=True)


def test_a_container_killed_mid_test_is_named_and_recovers(engine: Any, toolkit_stack: StackHandle) -> None:
    (redis_container,) = [c for c in ours(engine) if c.name.endswith("-redis")]
    redis_container.kill()  # from outside the fixtures, as a crash would
    down = toolkit_stack.stopped()
    assert down == [f"redis (container {redis_container.name}: exited, exit code 137)"], down
    toolkit_stack.recover()
    assert toolkit_stack.stopped() == []
