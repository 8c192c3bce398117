"""The single node's SASL_SSL listener as the broker, the env file and the clients get it (no process
started; `prepare` runs openssl)."""

from __future__ import annotations

import stat
from pathlib import Path

from devstack import kafka_security
from devstack.artifacts import Artifacts
from devstack.config import StackConfig, choose_ports
from devstack.kafka_security import SecureKafka
from devstack.pins import Pins
from devstack.services import Context, _write_properties, kafka_properties
from kafkakit.client_config import KafkaClientConfig


def _context(tmp_path: Path, topology_name: str) -> Context:
    config = StackConfig.from_env({"STACK_DIR": str(tmp_path), "STACK_TOPOLOGY": topology_name})
    return Context(config, choose_ports(config, running=set()), Artifacts(tmp_path / "cache", Pins.load()))


def test_the_single_node_adds_a_sasl_ssl_listener_and_keeps_plaintext_between_brokers(tmp_path: Path) -> None:
    ctx = _context(tmp_path, "single")
    props = kafka_properties(ctx)
    secure = ctx.ports["kafka_secure"]
    assert f"SASL_SSL://127.0.0.1:{secure}" in str(props["listeners"])
    assert str(props["advertised.listeners"]).endswith(f",SASL_SSL://127.0.0.1:{secure}")
    assert str(props["listener.security.protocol.map"]).endswith(",SASL_SSL:SASL_SSL")
    assert props["inter.broker.listener.name"] == "PLAINTEXT"
    assert props["listener.name.sasl_ssl.sasl.enabled.mechanisms"] == "SCRAM-SHA-512"
    assert props["listener.name.sasl_ssl.ssl.keystore.location"] == tmp_path / "tls" / "broker.p12"
    assert "authorizer.class.name" not in props  # no ACLs: the SCRAM user may do what PLAINTEXT may


def test_the_cluster_has_no_secured_listener_nor_its_port(tmp_path: Path) -> None:
    ctx = _context(tmp_path, "cluster")
    assert "kafka_secure" not in ctx.ports
    for node in (1, 2, 3):
        assert "SASL_SSL" not in str(kafka_properties(ctx, node)["listeners"])
    assert kafka_security.SECURE_BOOTSTRAP_ENV not in ctx.endpoints()


def test_the_env_names_the_secured_listener_only_once_kafka_was_configured_with_it(tmp_path: Path) -> None:
    ctx = _context(tmp_path, "single")
    assert kafka_security.SECURE_BOOTSTRAP_ENV not in ctx.endpoints()  # a broker from before: plaintext
    _write_properties(tmp_path / "kafka" / "server.properties", kafka_properties(ctx))
    env = ctx.endpoints()
    assert env[kafka_security.SECURE_BOOTSTRAP_ENV] == f"127.0.0.1:{ctx.ports['kafka_secure']}"
    assert env[kafka_security.SECURE_CLIENT_CONFIG_ENV] == str(tmp_path / "kafka-client.properties")
    assert not any(k.startswith("KAFKA_CLIENT_") for k in env)  # the default clients stay plaintext
    assert SecureKafka.from_stack_env({}) is None


def test_prepare_makes_the_ca_the_keystore_and_a_client_file_the_toolkit_reads(tmp_path: Path) -> None:
    kafka_security.prepare(tmp_path)
    tls = tmp_path / "tls"
    ca = (tls / "ca.pem").read_bytes()
    for secret in ("ca.key", "broker.key", "broker.p12", "scram.password", "keystore.password"):
        assert stat.S_IMODE((tls / secret).stat().st_mode) == 0o600, secret
    client_file = tmp_path / "kafka-client.properties"
    assert stat.S_IMODE(client_file.stat().st_mode) == 0o600
    config = KafkaClientConfig.from_env({"KAFKA_CLIENT_CONFIG": str(client_file)})
    assert (config.security_protocol, config.sasl_mechanism, config.sasl_username) == (
        "SASL_SSL",
        "SCRAM-SHA-512",
        "toolkit",
    )
    assert config.sasl_password == kafka_security.scram_password(tmp_path)
    assert config.ssl_ca_location == str(tls / "ca.pem")
    kafka_security.prepare(tmp_path)  # again: the CA (and every certificate) is kept
    assert (tls / "ca.pem").read_bytes() == ca
    found = SecureKafka.from_stack_env(
        {
            kafka_security.SECURE_BOOTSTRAP_ENV: "127.0.0.1:1",
            kafka_security.SECURE_CLIENT_CONFIG_ENV: str(client_file),
        }
    )
    assert found is not None and found.client_config == config
    assert found.env() == {"KAFKA_BOOTSTRAP_SERVERS": "127.0.0.1:1", "KAFKA_CLIENT_CONFIG": str(client_file)}
