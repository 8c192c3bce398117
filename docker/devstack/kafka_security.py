"""The single-node Kafka's secured listener: SASL_SSL with SCRAM-SHA-512 beside the PLAINTEXT one.

What it is for: the toolkit's clients are tested for real against an authenticating, TLS-only listener
(tests/integration/security). The PLAINTEXT listener stays the default for everything else (Connect,
the ordinary tests); the cluster topology has no secured listener (its three nodes would each need one).

Material, under `<state>/tls/` (made once by `prepare`, kept across restarts):
- `ca.pem` / `ca.key`: a self-signed CA; `broker.pem` / `broker.key`: the broker's certificate for
  IP 127.0.0.1 and DNS localhost, signed by that CA; `broker.p12`: the same as a PKCS12 keystore (what
  every Java version reads), its password in `keystore.password`;
- `scram.password`: the password of the SCRAM user `toolkit` (random, mode 0600).
`<state>/kafka-client.properties` is the Java-style client file for that listener (SASL_SSL, SCRAM,
the CA as a PEM truststore): `KAFKA_CLIENT_CONFIG=<that file>` points any toolkit command at it.

The SCRAM user lives in the cluster's metadata, not in a file: `ensure_user` creates it through the
PLAINTEXT listener with the AdminClient whenever a login on the secured listener fails (a fresh stack,
or one formatted before the secured listener existed), so it is idempotent and needs no re-format.
Kafka's ACL authorizer stays off: the user may do what a PLAINTEXT client may.
"""

from __future__ import annotations

import logging
import secrets
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from devstack.errors import PrerequisiteMissing, StackError
from kafkakit.client_config import KafkaClientConfig
from kafkakit.clients import admin_client, make_admin, make_consumer, make_producer
from kafkakit.java_client import jaas_config
from kafkakit.settings import Endpoints

if TYPE_CHECKING:
    from confluent_kafka import Consumer, Producer
    from confluent_kafka.admin import AdminClient

log = logging.getLogger(__name__)

LISTENER = "SASL_SSL"
MECHANISM = "SCRAM-SHA-512"
USER = "toolkit"
SECURE_BOOTSTRAP_ENV = "KAFKA_SECURE_BOOTSTRAP_SERVERS"
SECURE_CLIENT_CONFIG_ENV = "KAFKA_SECURE_CLIENT_CONFIG"
# A probe's lines (refused logins while the user is being created) are not the reader's business.
_QUIET = logging.getLogger("devstack.probe")
_DAYS = "3650"


def tls_dir(state: Path) -> Path:
    return state / "tls"


def client_properties_file(state: Path) -> Path:
    return state / "kafka-client.properties"


def _secret(path: Path) -> str:
    """The secret kept in `path`, drawn (and written, owner-only) the first time it is asked for."""
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch(mode=0o600)
        path.write_text(secrets.token_urlsafe(18))
    return path.read_text().strip()


def keystore_password(state: Path) -> str:
    return _secret(tls_dir(state) / "keystore.password")


def scram_password(state: Path) -> str:
    return _secret(tls_dir(state) / "scram.password")


def broker_properties(state: Path) -> dict[str, object]:
    """The secured listener's broker settings (listener names and the protocol map are the caller's)."""
    prefix = f"listener.name.{LISTENER.lower()}"
    password = keystore_password(state)
    return {
        f"{prefix}.sasl.enabled.mechanisms": MECHANISM,
        # Brokers keep SCRAM credentials in the metadata log; the login module needs no options.
        f"{prefix}.{MECHANISM.lower()}.sasl.jaas.config": (
            "org.apache.kafka.common.security.scram.ScramLoginModule required;"
        ),
        f"{prefix}.ssl.keystore.type": "PKCS12",
        f"{prefix}.ssl.keystore.location": tls_dir(state) / "broker.p12",
        f"{prefix}.ssl.keystore.password": password,
        f"{prefix}.ssl.key.password": password,
    }


def client_properties(state: Path) -> dict[str, str]:
    """The Java client settings for the secured listener (what `kafka-client.properties` holds)."""
    return {
        "security.protocol": LISTENER,
        "sasl.mechanism": MECHANISM,
        "sasl.jaas.config": jaas_config(MECHANISM, USER, scram_password(state)),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(tls_dir(state) / "ca.pem"),
    }


def client_config(state: Path) -> KafkaClientConfig:
    return KafkaClientConfig.from_env({"KAFKA_CLIENT_CONFIG": str(client_properties_file(state))})


def prepare(state: Path) -> None:
    """CA, broker certificate and keystore (once), and the client properties file (each start)."""
    tls = tls_dir(state)
    if not (tls / "broker.p12").exists():
        _make_certificates(tls, keystore_password(state))
    path = client_properties_file(state)
    if not path.exists():
        path.touch(mode=0o600)
    # Properties escaping: the JAAS text holds '"' and '=' only inside values, which need none here;
    # backslashes (none in our generated password) would.
    path.write_text("".join(f"{k}={v}\n" for k, v in client_properties(state).items()))


def _make_certificates(tls: Path, password: str) -> None:
    tls.mkdir(parents=True, exist_ok=True)
    steps = [
        ["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.pem",
         "-days", _DAYS, "-subj", "/CN=kafka-toolkit local stack CA",
         "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign"],
        ["req", "-newkey", "rsa:2048", "-nodes", "-keyout", "broker.key", "-out", "broker.csr",
         "-subj", "/CN=127.0.0.1"],
        ["x509", "-req", "-in", "broker.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-out", "broker.pem",
         "-days", _DAYS, "-set_serial", str(secrets.randbits(63)), "-extfile", "san.ext"],
        ["pkcs12", "-export", "-in", "broker.pem", "-inkey", "broker.key", "-certfile", "ca.pem",
         "-name", "broker", "-out", "broker.p12.tmp", "-passout", "env:TOOLKIT_KEYSTORE_PASSWORD"],
    ]  # fmt: skip
    (tls / "san.ext").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    for step in steps:
        try:
            result = subprocess.run(
                ["openssl", *step],
                cwd=tls,
                capture_output=True,
                text=True,
                env={"TOOLKIT_KEYSTORE_PASSWORD": password, "PATH": "/usr/bin:/bin:/usr/local/bin"},
            )
        except FileNotFoundError:
            raise PrerequisiteMissing(
                "openssl is not installed (the secured Kafka listener needs a CA and a certificate); "
                "install it with `apt-get install -y openssl`"
            ) from None
        if result.returncode != 0:
            raise StackError(f"openssl {step[0]} failed in {tls}:\n{result.stderr}")
    for private in ("ca.key", "broker.key"):
        (tls / private).chmod(0o600)
    (tls / "broker.p12.tmp").rename(tls / "broker.p12")  # last: its presence means "all made"


def secure_listener_answers(bootstrap: str, state: Path, timeout_s: float = 2.0) -> bool:
    """A real SASL_SSL login and metadata request on the secured listener."""
    try:
        with admin_client(
            {"bootstrap.servers": bootstrap}, client_config=client_config(state), logger=_QUIET
        ) as admin:
            return bool(admin.list_topics(timeout=timeout_s).brokers)
    except Exception:  # refused login (KafkaAccessRefused), timeout, or the broker still booting
        return False


def ensure_user(plaintext_bootstrap: str, state: Path, timeout_s: float = 5.0) -> None:
    """Create (or reset to the state's password) the SCRAM user, through the PLAINTEXT listener."""
    from confluent_kafka.admin import (  # type: ignore[attr-defined]
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialUpsertion,
    )

    upsert = UserScramCredentialUpsertion(
        USER, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192), scram_password(state).encode()
    )
    with admin_client({"bootstrap.servers": plaintext_bootstrap}, logger=_QUIET) as admin:
        for future in admin.alter_user_scram_credentials([upsert], request_timeout=timeout_s).values():
            future.result()
    log.info("SCRAM user %r set on the secured Kafka listener", USER)


def ready(plaintext_bootstrap: str, secure_bootstrap: str, state: Path) -> bool:
    """The secured listener lets the state's user in. A refused login has the user (re)created
    through the PLAINTEXT listener and is tried once more, so one probe of a broker whose storage
    predates the user answers True (a False would have `up` restart a healthy broker)."""
    if secure_listener_answers(secure_bootstrap, state):
        return True
    try:
        ensure_user(plaintext_bootstrap, state)
    except Exception as exc:  # the broker still booting: the next probe tries again
        log.debug("creating the SCRAM user failed (%s); trying again", exc)
        return False
    return secure_listener_answers(secure_bootstrap, state, timeout_s=5.0)


@dataclass(frozen=True, slots=True)
class SecureKafka:
    """The secured listener as a client reaches it: its address, the client file and its config."""

    bootstrap_servers: str
    client_config_file: Path
    client_config: KafkaClientConfig

    @classmethod
    def from_stack_env(cls, env: Mapping[str, str]) -> SecureKafka | None:
        """From a local stack's env file; None when that stack has no secured listener."""
        if not env.get(SECURE_BOOTSTRAP_ENV) or not env.get(SECURE_CLIENT_CONFIG_ENV):
            return None
        path = Path(env[SECURE_CLIENT_CONFIG_ENV])
        return cls(
            env[SECURE_BOOTSTRAP_ENV], path, KafkaClientConfig.from_env({"KAFKA_CLIENT_CONFIG": str(path)})
        )

    def endpoints(self, base: Endpoints) -> Endpoints:
        """`base` with Kafka at the secured listener (the other services unchanged)."""
        return replace(base, kafka_bootstrap_servers=self.bootstrap_servers, kafka_client=self.client_config)

    def env(self) -> dict[str, str]:
        """The variables that point a toolkit command at the secured listener."""
        return {
            "KAFKA_BOOTSTRAP_SERVERS": self.bootstrap_servers,
            "KAFKA_CLIENT_CONFIG": str(self.client_config_file),
        }


@dataclass(frozen=True, slots=True)
class KafkaAccess:
    """How a test reaches a stack's Kafka: its SASL_SSL listener (`secured`) where it has one, as a
    user of a production cluster would, else `plaintext_bootstrap_servers` over PLAINTEXT. Every
    suite's clients, jobs and CLI runs take their address and security settings from here."""

    plaintext_bootstrap_servers: str
    secured: SecureKafka | None = None

    @classmethod
    def from_stack_env(cls, env: Mapping[str, str]) -> KafkaAccess:
        """From a local stack's env file or a shell that sourced it (`source .stack/env`)."""
        return cls(env["KAFKA_BOOTSTRAP_SERVERS"], SecureKafka.from_stack_env(env))

    @property
    def bootstrap_servers(self) -> str:
        return self.secured.bootstrap_servers if self.secured else self.plaintext_bootstrap_servers

    @property
    def client_config(self) -> KafkaClientConfig:
        return self.secured.client_config if self.secured else KafkaClientConfig()

    def endpoints(self, base: Endpoints) -> Endpoints:
        """`base` with Kafka reached this way (the other services unchanged)."""
        return self.secured.endpoints(base) if self.secured else base

    def env(self) -> dict[str, str]:
        """The variables that point a toolkit command at the same listener (KAFKA_CLIENT_CONFIG: the
        CLIs take the client config from the environment only); none over PLAINTEXT."""
        return self.secured.env() if self.secured else {}

    def consumer(self, **settings: Any) -> Consumer:
        return make_consumer(
            {"bootstrap.servers": self.bootstrap_servers, **settings}, client_config=self.client_config
        )

    def producer(self, **settings: Any) -> Producer:
        return make_producer(
            {"bootstrap.servers": self.bootstrap_servers, **settings}, client_config=self.client_config
        )

    def admin(self) -> AdminClient:
        return make_admin({"bootstrap.servers": self.bootstrap_servers}, client_config=self.client_config)
