"""The Kafka client configuration: Java properties and KAFKA_CLIENT_* in, librdkafka and Spark settings
out, everything else refused by name; passwords never shown. No broker needed."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from kafkakit.client_config import PLAINTEXT, KafkaClientConfig
from kafkakit.clients import LIBRDKAFKA_LOGGER, access_refusal, client_settings
from kafkakit.errors import ConfigError, KafkaAccessRefused, KafkaClientConfigInvalid
from kafkakit.java_client import from_java_properties, parse_jaas, parse_properties
from kafkakit.settings import Endpoints

SECRET = 'pa ss"w\\ord'  # a blank, a quote and a backslash: each must survive both dialects
SCRAM_JAAS = (
    "org.apache.kafka.common.security.scram.ScramLoginModule required "
    'username="alice" password="pa ss\\"w\\\\ord";'
)


@pytest.fixture
def ca(tmp_path: Path) -> Path:
    path = tmp_path / "ca.pem"
    path.write_text("-----BEGIN CERTIFICATE-----\n")
    return path


def properties(tmp_path: Path, text: str) -> dict[str, str]:
    path = tmp_path / "client.properties"
    path.write_text(text)
    return {"KAFKA_CLIENT_CONFIG": str(path)}


def scram_file(tmp_path: Path, ca: Path, extra: str = "") -> dict[str, str]:
    return properties(
        tmp_path,
        "# the file a Kafka user already has\n"
        "security.protocol=SASL_SSL\n"
        "sasl.mechanism=SCRAM-SHA-512\n"
        f"sasl.jaas.config={SCRAM_JAAS.replace(chr(92), chr(92) * 2)}\n"
        f"ssl.truststore.location={ca}\n"
        "ssl.truststore.type=PEM\n" + extra,
    )


def test_the_default_is_plaintext_with_no_settings() -> None:
    config = KafkaClientConfig.from_env({})
    assert config == PLAINTEXT and not config.secured
    assert config.librdkafka_settings() == {} and config.spark_options() == {} and config.as_env() == {}


def test_a_java_scram_file_becomes_librdkafka_and_spark_settings(tmp_path: Path, ca: Path) -> None:
    config = KafkaClientConfig.from_env(scram_file(tmp_path, ca))
    assert config.librdkafka_settings() == {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "alice",
        "sasl.password": SECRET,
        "ssl.ca.location": str(ca),
    }
    assert config.spark_options() == {
        "kafka.security.protocol": "SASL_SSL",
        "kafka.sasl.mechanism": "SCRAM-SHA-512",
        "kafka.sasl.jaas.config": SCRAM_JAAS,
        "kafka.ssl.truststore.type": "PEM",
        "kafka.ssl.truststore.location": str(ca),
    }
    # the JAAS text Spark gets reads back to the same login
    assert parse_jaas(config.java_settings()["sasl.jaas.config"], "test")[1] == {
        "username": "alice",
        "password": SECRET,
    }


def test_env_variables_override_the_file_and_survive_a_round_trip(tmp_path: Path, ca: Path) -> None:
    env = scram_file(tmp_path, ca) | {
        "KAFKA_CLIENT_SASL_USERNAME": "bob",
        "KAFKA_CLIENT_SASL_PASSWORD": " x ",
    }
    config = KafkaClientConfig.from_env(env)
    assert (config.sasl_username, config.sasl_password) == ("bob", " x ")  # a password keeps its blanks
    assert "KAFKA_CLIENT_SASL_USERNAME" in config.origin and "KAFKA_CLIENT_CONFIG=" in config.origin
    assert KafkaClientConfig.from_env(config.as_env()) == config


def test_sasl_plain_from_env_alone(ca: Path) -> None:
    config = KafkaClientConfig.from_env(
        {
            "KAFKA_CLIENT_SECURITY_PROTOCOL": "SASL_SSL",
            "KAFKA_CLIENT_SASL_MECHANISM": "PLAIN",
            "KAFKA_CLIENT_SASL_USERNAME": "alice",
            "KAFKA_CLIENT_SASL_PASSWORD": "secret",
            "KAFKA_CLIENT_SSL_CA_LOCATION": str(ca),
        }
    )
    assert config.java_settings()["sasl.jaas.config"] == (
        'org.apache.kafka.common.security.plain.PlainLoginModule required username="alice" password="secret";'
    )


def test_ssl_with_a_pem_client_certificate_and_no_host_check(tmp_path: Path, ca: Path) -> None:
    cert = tmp_path / "client.pem"
    cert.write_text("key and chain")
    env = properties(
        tmp_path,
        f"security.protocol=SSL\nssl.truststore.type=PEM\nssl.truststore.location={ca}\n"
        f"ssl.keystore.type=PEM\nssl.keystore.location={cert}\nssl.key.password=kp\n"
        "ssl.endpoint.identification.algorithm=\n",
    )
    config = KafkaClientConfig.from_env(env)
    assert config.librdkafka_settings() == {
        "security.protocol": "SSL",
        "ssl.ca.location": str(ca),
        "ssl.certificate.location": str(cert),
        "ssl.key.location": str(cert),
        "ssl.key.password": "kp",
        "ssl.endpoint.identification.algorithm": "none",
    }
    assert config.java_settings() == {
        "security.protocol": "SSL",
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(ca),
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(cert),
        "ssl.key.password": "kp",
        "ssl.endpoint.identification.algorithm": "",
    }


def test_a_pkcs12_keystore_goes_to_both_sides(tmp_path: Path, ca: Path) -> None:
    store = tmp_path / "client.p12"
    store.write_bytes(b"\x30")
    env = properties(
        tmp_path,
        f"security.protocol=SSL\nssl.truststore.type=PEM\nssl.truststore.location={ca}\n"
        f"ssl.keystore.type=PKCS12\nssl.keystore.location={store}\nssl.keystore.password=sp\n",
    )
    config = KafkaClientConfig.from_env(env)
    assert config.librdkafka_settings()["ssl.keystore.location"] == str(store)
    assert config.java_settings()["ssl.keystore.type"] == "PKCS12"


def test_properties_syntax_as_java_reads_it() -> None:
    text = "! comment\n  a : 1\nb 2\nc=x\\\n   y\nd=\\u0041\\=\\\\\ne\n"
    assert parse_properties(text) == {"a": "1", "b": "2", "c": "xy", "d": "A=\\", "e": ""}


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("bootstrap.servers=b:9092\n", "KAFKA_BOOTSTRAP_SERVERS"),
        ("client.dns.lookup=use_all_dns_ips\n", "client.dns.lookup"),
        ("security.protocol=SASL_SSL\nsasl.mechanism=GSSAPI\n", "GSSAPI"),
        ("security.protocol=SSL\nssl.truststore.location=/x.jks\n", "keytool -exportcert"),
        ("security.protocol=SSL\nssl.truststore.location=/x\nssl.truststore.type=PKCS12\n", "PEM"),
        ("security.protocol=SSL\nssl.keystore.location=/x.jks\nssl.keystore.password=p\n", "PKCS12"),
        ("security.protocol=SSL\nssl.truststore.type=PEM\n", "ssl.truststore.location"),
        ("security.protocol=SSL\nssl.endpoint.identification.algorithm=http\n", "https"),
        ("security.protocol=KERBEROS\n", "security.protocol='KERBEROS'"),
        ("sasl.mechanism=PLAIN\n", "does not use SASL"),
        ("security.protocol=SASL_SSL\nsasl.mechanism=PLAIN\n", "needs a username and a password"),
        (
            "security.protocol=SASL_SSL\nsasl.mechanism=PLAIN\nsasl.jaas.config="
            'org.apache.kafka.common.security.scram.ScramLoginModule required username="u" password="p";\n',
            "does not log in with sasl.mechanism=PLAIN",
        ),
        (
            "security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-256\nsasl.jaas.config="
            'org.apache.kafka.common.security.scram.ScramLoginModule required username="u" password="p" '
            "tokenauth=true;\n",
            "tokenauth",
        ),
        (
            "security.protocol=SASL_SSL\nsasl.mechanism=PLAIN\nsasl.jaas.config="
            'org.apache.kafka.common.security.plain.PlainLoginModule required username="u" password="p"\n',
            "not one login module",
        ),
    ],
)
def test_an_untranslatable_file_is_refused_naming_the_key_and_the_fix(
    tmp_path: Path, text: str, named: str
) -> None:
    with pytest.raises(KafkaClientConfigInvalid, match=named) as info:
        KafkaClientConfig.from_env(properties(tmp_path, text))
    assert "KAFKA_CLIENT_CONFIG=" in str(info.value)
    assert isinstance(info.value, ConfigError)


@pytest.mark.parametrize(
    ("env", "named"),
    [
        ({"KAFKA_CLIENT_SASL_USER": "x"}, "KAFKA_CLIENT_SASL_USERNAME"),  # a misspelt variable
        (
            {"KAFKA_CLIENT_SECURITY_PROTOCOL": "SSL", "KAFKA_CLIENT_SSL_CA_LOCATION": "/nope/ca.pem"},
            "/nope/ca.pem",
        ),
        (
            {
                "KAFKA_CLIENT_SECURITY_PROTOCOL": "SSL",
                "KAFKA_CLIENT_SSL_CERTIFICATE_LOCATION": "/a.pem",
                "KAFKA_CLIENT_SSL_KEY_LOCATION": "/b.pem",
            },
            "concatenate the key and the certificate",
        ),
        ({"KAFKA_CLIENT_SSL_CA_LOCATION": "/x"}, "does not use TLS"),
        (
            {"KAFKA_CLIENT_SECURITY_PROTOCOL": "SSL", "KAFKA_CLIENT_SSL_KEYSTORE_LOCATION": "/x"},
            "go together",
        ),
        ({"KAFKA_CLIENT_CONFIG": "/nope/client.properties"}, "cannot be read"),
    ],
)
def test_bad_env_is_refused_by_name(env: dict[str, str], named: str) -> None:
    with pytest.raises(KafkaClientConfigInvalid, match=named):
        KafkaClientConfig.from_env(env)


def test_passwords_never_show_in_repr_str_or_errors(tmp_path: Path, ca: Path) -> None:
    config = KafkaClientConfig.from_env(scram_file(tmp_path, ca))
    for text in (
        repr(config),
        str(config),
        repr(Endpoints(kafka_client=config)),
    ):
        assert "pa ss" not in text and "***" in text
    bad = scram_file(tmp_path, ca, "client.id=x\n")
    with pytest.raises(KafkaClientConfigInvalid) as info:
        KafkaClientConfig.from_env(bad)
    assert "pa ss" not in str(info.value)
    with pytest.raises(KafkaClientConfigInvalid) as info:
        from_java_properties(
            {"sasl.mechanism": "PLAIN", "sasl.jaas.config": 'X required password="pa ss'}, "t"
        )
    assert "pa ss" not in str(info.value)


def test_endpoints_carry_the_client_config_and_hand_it_to_a_child(tmp_path: Path, ca: Path) -> None:
    endpoints = Endpoints.from_env(scram_file(tmp_path, ca) | {"KAFKA_BOOTSTRAP_SERVERS": "h:9093"})
    assert endpoints.kafka_client.sasl_username == "alice"
    child = endpoints.as_env()
    assert child["KAFKA_CLIENT_SASL_PASSWORD"] == SECRET and child["KAFKA_BOOTSTRAP_SERVERS"] == "h:9093"
    assert Endpoints.from_env(child) == endpoints
    assert Endpoints().as_env().keys() == Endpoints.from_env({}).as_env().keys()  # plaintext adds nothing


def test_every_client_gets_the_security_settings_and_an_error_callback(tmp_path: Path, ca: Path) -> None:
    config = KafkaClientConfig.from_env(scram_file(tmp_path, ca))
    built = client_settings({"bootstrap.servers": "h:1", "group.id": "g"}, config)
    assert built["sasl.username"] == "alice" and built["group.id"] == "g"
    assert built["logger"] is logging.getLogger(LIBRDKAFKA_LOGGER)
    assert callable(built["error_cb"])
    plain = client_settings({"bootstrap.servers": "h:1"}, PLAINTEXT)
    assert "error_cb" not in plain and set(plain) == {"bootstrap.servers", "logger"}


def test_a_client_setting_that_contradicts_the_config_is_refused(tmp_path: Path, ca: Path) -> None:
    config = KafkaClientConfig.from_env(scram_file(tmp_path, ca))
    with pytest.raises(KafkaClientConfigInvalid, match=r"sasl\.password contradicts") as info:
        client_settings({"bootstrap.servers": "h:1", "sasl.password": "other"}, config)
    assert SECRET not in str(info.value) and "other" not in str(info.value)


def test_a_refused_login_names_the_service_the_setting_and_the_fix(tmp_path: Path, ca: Path) -> None:
    config = KafkaClientConfig.from_env(scram_file(tmp_path, ca))
    message = access_refusal(-169, "SASL authentication error: invalid credentials", "h:9093", config)
    assert message is not None
    assert "Kafka at h:9093" in message and "user 'alice'" in message
    assert "KAFKA_CLIENT_SASL_PASSWORD" in message and "wrote nothing" in message
    assert SECRET not in message
    tls = access_refusal(-181, "SSL handshake failed: certificate verify failed", "h:9093", config)
    assert tls is not None and "KAFKA_CLIENT_SSL_CA_LOCATION" in tls
    assert access_refusal(-195, "transport failure", "h:9093", config) is None  # left to librdkafka
    dropped = (
        "GroupCoordinator: SASL SCRAM-SHA-512 mechanism handshake failed: Local: Broker transport failure: "
        "broker's supported mechanisms: (n/a) (after 0ms in state DOWN)"
    )  # the connection dropped mid-handshake: librdkafka reconnects, no login was refused
    assert access_refusal(-169, dropped, "h:9093", config) is None
    raiser = client_settings({"bootstrap.servers": "h:9093"}, config)["error_cb"]

    class Err:
        def code(self) -> int:
            return 58

        def str(self) -> str:
            return "Authentication failed"

    with pytest.raises(KafkaAccessRefused, match="refused the SCRAM-SHA-512 login"):
        raiser(Err())
