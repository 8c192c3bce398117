from __future__ import annotations

import base64
import json
import socket
from pathlib import Path

import pytest

from devstack import services
from devstack.artifacts import jar_base_name
from devstack.config import DEFAULT_PORTS, StackConfig, choose_ports
from devstack.errors import PortTaken, PrerequisiteMissing
from devstack.services import kafka_uuid


@pytest.mark.parametrize(
    ("jar", "base"),
    [
        ("jackson-core-2.13.5.jar", "jackson-core"),
        ("zstd-jni-1.5.7-3.jar", "zstd-jni"),
        ("spark-sql-kafka-0-10_2.13-4.2.0.jar", "spark-sql-kafka-0-10_2.13"),
        ("delta-spark_2.13-4.4.0.jar", "delta-spark_2.13"),
        ("log4j-slf4j2-impl-2.25.3.jar", "log4j-slf4j2-impl"),
    ],
)
def test_jar_base_name_strips_only_the_version(jar: str, base: str) -> None:
    assert jar_base_name(jar) == base


def test_kafka_cluster_id_is_16_bytes_url_safe_base64() -> None:
    cluster_id = kafka_uuid()
    assert len(cluster_id) == 22
    assert len(base64.urlsafe_b64decode(cluster_id + "==")) == 16


def test_kafka_cluster_id_never_starts_with_a_dash() -> None:
    """`kafka-storage format -t -xyz` reads the id as an option (a CI run failed on one such id)."""
    draws = iter([b"\xf8" + bytes(15), b"\x00" * 16])  # 0xf8 -> 111110.. -> "-" first
    assert kafka_uuid(lambda: next(draws)) == "A" * 22


def _occupy() -> socket.socket:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    return sock


def test_a_taken_default_port_is_replaced_and_remembered(tmp_path: Path) -> None:
    with _occupy() as busy:
        taken = busy.getsockname()[1]
        (tmp_path / "ports.json").write_text(json.dumps({"redis": taken}))
        ports = choose_ports(StackConfig(state_dir=tmp_path), running=set())
    assert ports["redis"] != taken
    assert set(ports) == set(DEFAULT_PORTS)
    assert json.loads((tmp_path / "ports.json").read_text()) == ports


def test_a_taken_explicit_port_is_refused_with_its_name(tmp_path: Path) -> None:
    with _occupy() as busy:
        taken = busy.getsockname()[1]
        config = StackConfig.from_env({"STACK_DIR": str(tmp_path), "STACK_KAFKA_PORT": str(taken)})
        with pytest.raises(PortTaken, match=f"port {taken} for kafka .*STACK_KAFKA_PORT"):
            choose_ports(config, running=set())


def test_a_running_service_keeps_its_port_even_though_it_is_in_use(tmp_path: Path) -> None:
    with _occupy() as busy:
        taken = busy.getsockname()[1]
        (tmp_path / "ports.json").write_text(json.dumps({"kafka": taken}))
        ports = choose_ports(StackConfig(state_dir=tmp_path), running={"kafka"})
    assert ports["kafka"] == taken


def test_missing_redis_names_the_install_command(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(PrerequisiteMissing, match="apt-get install -y redis-server"):
        services.redis_binary()


def test_missing_java_names_the_install_command(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.delenv("JAVA_HOME", raising=False)
    with pytest.raises(PrerequisiteMissing, match="apt-get install -y openjdk-17"):
        services.java_binary()
