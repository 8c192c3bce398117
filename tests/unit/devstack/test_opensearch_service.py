"""The optional OpenSearch service of the local stack, without starting it: settings, command, opt-in."""

from __future__ import annotations

from pathlib import Path

from devstack import opensearch, stack
from devstack.artifacts import OPENSEARCH_LAUNCHER, Artifacts
from devstack.config import StackConfig
from devstack.pins import Pins
from devstack.services import OPENSEARCH_ENV, Context


def test_the_node_binds_loopback_as_a_single_node_under_the_state_dir(tmp_path: Path) -> None:
    settings = opensearch.node_settings(tmp_path, 19200, 19300)
    assert settings["network.host"] == "127.0.0.1"
    assert settings["discovery.type"] == "single-node"
    assert (settings["http.port"], settings["transport.port"]) == ("19200", "19300")
    paths = ("path.home", "path.data", "path.logs", "path.repo")
    assert all(settings[k].startswith(str(tmp_path)) for k in paths)
    opensearch.prepare(tmp_path)
    assert Path(settings["path.repo"]).is_dir()  # snapshots have their place before the node starts


def test_the_command_bounds_the_heap_and_passes_every_setting(tmp_path: Path) -> None:
    cmd = opensearch.command("java", "512m", tmp_path / "lib", tmp_path / "classes", {"a.b": "c"})
    assert cmd[:3] == ["java", "-Xms512m", "-Xmx512m"]
    assert cmd[cmd.index("-cp") + 1] == f"{tmp_path / 'lib'}/*:{tmp_path / 'classes'}"
    assert cmd[-2:] == [opensearch.LAUNCHER_CLASS, "a.b=c"]


def test_opensearch_is_opt_in() -> None:
    assert StackConfig.from_env({}).optional == frozenset()
    assert StackConfig.from_env({"STACK_OPENSEARCH": "1"}).optional == {"opensearch"}
    names = [s.name for s in stack.wanted(StackConfig.from_env({}), running=set())]
    assert "opensearch" not in names and "kafka" in names
    assert "opensearch" in [s.name for s in stack.wanted(StackConfig.from_env({}), running={"opensearch"})]


def test_its_url_is_in_the_env_file_only_while_it_runs(tmp_path: Path) -> None:
    ports = {"kafka": 1, "connect": 2, "postgres": 3, "redis": 4, "registry": 5, "opensearch": 6}
    ctx = Context(StackConfig(state_dir=tmp_path), ports, Artifacts(tmp_path, Pins.load()))
    assert OPENSEARCH_ENV not in stack.stack_endpoints(ctx, {"kafka"})
    assert stack.stack_endpoints(ctx, {"opensearch"})[OPENSEARCH_ENV] == "http://127.0.0.1:6"


def test_the_launcher_is_rebuilt_when_its_source_or_version_changes(tmp_path: Path) -> None:
    from dataclasses import replace

    pins = Pins.load()
    one = Artifacts(tmp_path, pins).opensearch_launcher
    other = Artifacts(tmp_path, replace(pins, opensearch="0.0.1")).opensearch_launcher
    assert one != other and one.name == "classes"
    assert OPENSEARCH_LAUNCHER.is_file()


def test_a_silent_address_is_not_healthy() -> None:
    assert opensearch.healthy("http://127.0.0.1:9", timeout_s=0.5) is False
