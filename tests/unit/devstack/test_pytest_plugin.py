"""The toolkit's pytest plugin from the outside: registered as a `pytest11` entry point, importable with
nothing running, and refusing a backend that is not available before any test body runs (no services)."""

from __future__ import annotations

import subprocess
import sys
from importlib.metadata import entry_points

import pytest

from devstack.config import free_port
from devstack.session import StackChoice
from kafkakit.errors import ConfigError

pytest_plugins = ["pytester"]

# A test file as a user would write it: its body leaves a mark, so a body that ran is visible.
USER_TESTS = """
from pathlib import Path

def test_one(toolkit_stack):
    Path("body-ran").write_text("one")

def test_two(toolkit_stack):
    Path("body-ran").write_text("two")
"""


def test_the_plugin_is_registered_as_a_pytest11_entry_point() -> None:
    (plugin,) = [ep for ep in entry_points(group="pytest11") if ep.name == "kafka_toolkit"]
    assert plugin.value == "devstack.pytest_plugin"
    assert callable(plugin.load().toolkit_stack)


def test_importing_the_plugin_starts_nothing_and_reads_no_environment() -> None:
    """A bogus TOOLKIT_STACK and no Docker engine: importing still works, and pulls in no service client."""
    probe = (
        "import sys, devstack.pytest_plugin;"
        "heavy = {'testcontainers', 'confluent_kafka', 'psycopg', 'redis', 'cdc.connect_client'} & set(sys.modules);"
        "print(sorted(heavy))"
    )
    env = {"TOOLKIT_STACK": "bogus", "DOCKER_HOST": "unix:///nonexistent.sock", "PATH": ""}
    done = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_containers_without_a_docker_engine_fail_every_test_before_its_body(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TOOLKIT_STACK", "containers")
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    pytester.makepyfile(USER_TESTS)
    result = pytester.runpytest_subprocess()
    result.assert_outcomes(errors=2)
    result.stdout.fnmatch_lines(["*toolkit_stack: TOOLKIT_STACK=containers, but no Docker engine answers*"])
    assert "start Docker or point DOCKER_HOST at a running engine" in result.stdout.str()
    assert not (pytester.path / "body-ran").exists()


def test_an_external_stack_that_does_not_answer_names_each_endpoint_without_its_password(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    closed = {
        "KAFKA_BOOTSTRAP_SERVERS": f"127.0.0.1:{free_port()}",
        "KAFKA_CONNECT_URL": f"http://127.0.0.1:{free_port()}",
        "PG_DSN": f"postgresql://app:s3cret-pw@127.0.0.1:{free_port()}/app",
        "REDIS_URL": f"redis://127.0.0.1:{free_port()}/0",
        "SCHEMA_REGISTRY_URL": f"http://127.0.0.1:{free_port()}/apis/ccompat/v7",
    }
    for name, value in {"TOOLKIT_STACK": "external", **closed}.items():
        monkeypatch.setenv(name, value)
    pytester.makepyfile(USER_TESTS)
    result = pytester.runpytest_subprocess()
    result.assert_outcomes(errors=2)
    out = result.stdout.str()
    assert "TOOLKIT_STACK=external, but these endpoints do not answer" in out
    for name in closed:
        assert f"{name}=" in out, name
    assert "s3cret-pw" not in out and "postgresql://app:***@" in out
    assert "docker compose -f docker/compose.yaml up -d" in out
    assert not (pytester.path / "body-ran").exists()


def test_an_unknown_backend_names_the_choices() -> None:
    with pytest.raises(
        ConfigError, match="TOOLKIT_STACK='kubernetes' is not a stack backend; use one of auto, ext"
    ):
        StackChoice.from_env({"TOOLKIT_STACK": "kubernetes"})


def test_the_flag_overrides_the_environment_and_tests_without_the_stack_are_untouched(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TOOLKIT_STACK", "kubernetes")  # would be refused; the flag wins
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    pytester.makepyfile(USER_TESTS + "\n\ndef test_pure():\n    assert 1 + 1 == 2\n")
    result = pytester.runpytest_subprocess("--toolkit-stack", "containers")
    result.assert_outcomes(passed=1, errors=2)
    result.stdout.fnmatch_lines(["*no Docker engine answers*"])
