"""`up` / `down` of a second, private local stack: failed starts leave nothing running, a crashed
service is brought back by the next `up`, `down` leaves no process behind."""

from __future__ import annotations

from pathlib import Path

import pytest

from devstack import processes, stack
from devstack.config import StackConfig
from devstack.errors import ServiceNotReady
from devstack.session import StackChoice, open_stack

pytestmark = pytest.mark.integration


def test_failed_start_leaves_nothing_then_up_crash_recover_down(tmp_path: Path) -> None:
    state = tmp_path / "stack"
    impatient = StackConfig(state_dir=state, ready_timeout_s=0.2)
    with pytest.raises(ServiceNotReady) as failure:
        stack.up(impatient)
    assert "last lines of" in str(failure.value)
    assert processes.pids_mentioning(str(state)) == []
    assert all(s.pid is None for s in stack.status(impatient))

    config = StackConfig(state_dir=state)
    try:
        result = stack.up(config)
        ports = {s.name: s.port for s in stack.status(config)}
        assert len(set(ports.values())) == len(ports), "each service got its own port"
        exported = {
            line.split("=", 1)[0].removeprefix("export ") for line in (state / "env").read_text().splitlines()
        }
        assert exported == {
            "KAFKA_BOOTSTRAP_SERVERS", "KAFKA_CONNECT_URL", "PG_DSN", "REDIS_URL", "SCHEMA_REGISTRY_URL",
            "KAFKA_SECURE_BOOTSTRAP_SERVERS", "KAFKA_SECURE_CLIENT_CONFIG", "PG_SECURE_DSN",  # the secured logins
        }  # fmt: skip
        assert (state / "env").stat().st_mode & 0o077 == 0, "PG_SECURE_DSN holds a password: owner-only"
        assert all(s.ready for s in stack.status(config))
        assert set(result.ready_seconds) == {"postgres", "redis", "kafka", "registry", "connect"}

        stack.kill(config, "redis")
        assert not next(s for s in stack.status(config) if s.name == "redis").ready
        again = stack.up(config)
        assert set(again.ready_seconds) == {"redis"}, "only the crashed service is started again"
        assert {s.name: s.port for s in stack.status(config)} == ports, "ports survive a restart"

        stack.kill(config, "redis")  # a session opened over a stack with a service down completes it...
        with open_stack(config, choice=StackChoice(backend="local")) as handle:
            assert handle.backend == "local (completed)"
            assert all(s.ready for s in stack.status(config))
        assert all(s.ready for s in stack.status(config)), "...and leaves it running: it did not start it"
    finally:
        stack.down(config)
    assert processes.pids_mentioning(str(state)) == []
    assert all(s.pid is None for s in stack.status(config))
    assert not (state / "env").exists()
