"""How every Kafka client the toolkit builds authenticates and encrypts: one config, two dialects.

A toolkit process talks to Kafka through two client libraries: confluent-kafka (librdkafka) for its
producers, consumers and admin clients, and the Java client inside Spark's Kafka source and sink. Both
get their security settings from one `KafkaClientConfig`, loaded (in `from_env`, the only reader of the
environment) from:

- `KAFKA_CLIENT_CONFIG=<path>`: a Java client properties file, the one Kafka users already have
  (`security.protocol`, `sasl.mechanism`, `sasl.jaas.config`, `ssl.truststore.*`, `ssl.keystore.*`,
  `ssl.key.password`, `ssl.endpoint.identification.algorithm`);
- `KAFKA_CLIENT_<LIBRDKAFKA NAME>` variables, named after librdkafka's settings
  (`KAFKA_CLIENT_SASL_USERNAME` is `sasl.username`); a variable overrides the file's setting.

Guarantees ("exact or refused"):
- every setting reaches both libraries with the same meaning, or the config is refused when loaded
  with `KafkaClientConfigInvalid` naming the key and the fix: a key with no equivalent on the other side
  (a JKS truststore librdkafka cannot read, GSSAPI, `client.dns.lookup`), a setting the protocol would
  ignore (SASL settings under `SSL`), or a CA/keystore file that does not exist;
- passwords never appear in a repr, a str or an error message (only in the settings handed to the
  clients, and in `as_env()` for a child process's environment).

The translations (`from_java_properties` in kafkakit.java_client, `librdkafka_settings`,
`java_settings`, `spark_options`) are pure; only `from_env` reads files and the environment.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path

from kafkakit.errors import KafkaClientConfigInvalid
from kafkakit.java_client import from_java_properties, jaas_config, parse_properties
from kafkakit.secrets import MASK

CONFIG_ENV = "KAFKA_CLIENT_CONFIG"
ENV_PREFIX = "KAFKA_CLIENT_"

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
_SECRETS = frozenset({"sasl_password", "ssl_key_password", "ssl_keystore_password"})
_FILES = ("ssl_ca_location", "ssl_certificate_location", "ssl_key_location", "ssl_keystore_location")


@dataclass(frozen=True, slots=True, kw_only=True, repr=False)
class KafkaClientConfig:
    """The security settings of every Kafka client, named as librdkafka names them.

    The default is PLAINTEXT with nothing else: a client gets `bootstrap.servers` and its own settings.
    `origin` says where the settings came from, for messages (never compared).
    """

    security_protocol: str = "PLAINTEXT"
    sasl_mechanism: str | None = None
    sasl_username: str | None = None
    sasl_password: str | None = None
    ssl_ca_location: str | None = None  # PEM file of the CA(s) that signed the brokers' certificates
    # A client certificate (brokers with ssl.client.auth=required): a PEM certificate + key, one file
    # for both (Java's PEM keystore reads key and chain from one file), or a PKCS12 keystore.
    ssl_certificate_location: str | None = None
    ssl_key_location: str | None = None
    ssl_key_password: str | None = None
    ssl_keystore_location: str | None = None
    ssl_keystore_password: str | None = None
    ssl_endpoint_identification_algorithm: str = "https"  # or "none": no host name check
    origin: str = field(default="defaults", compare=False)

    def __post_init__(self) -> None:
        problems = _problems(self)
        if problems:
            raise KafkaClientConfigInvalid(f"{'; '.join(problems)} ({self.origin})")

    def __repr__(self) -> str:
        shown = (
            f"{f.name}={MASK!r}" if f.name in _SECRETS else f"{f.name}={getattr(self, f.name)!r}"
            for f in fields(self)
            if getattr(self, f.name) is not None
        )
        return f"KafkaClientConfig({', '.join(shown)})"

    __str__ = __repr__

    @property
    def secured(self) -> bool:
        """True when the clients authenticate or speak TLS (anything but the PLAINTEXT default)."""
        return self.security_protocol != "PLAINTEXT"

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> KafkaClientConfig:
        """The file `KAFKA_CLIENT_CONFIG` names, overridden by `KAFKA_CLIENT_*` variables.

        Relative file paths are made absolute against the working directory (as the Java client reads
        them), so a child process started elsewhere finds the same files.
        """
        env = os.environ if environ is None else environ
        settings: dict[str, str] = {}
        origins = []
        if path := env.get(CONFIG_ENV, "").strip():
            origins.append(f"{CONFIG_ENV}={path}")
            settings |= from_java_properties(parse_properties(_read(path)), f"{CONFIG_ENV}={path}")
        overrides = env_settings(env)
        if overrides:
            origins.append(", ".join(sorted(_env_name(k) for k in overrides)))
        settings |= overrides
        settings = {k: str(Path(v).absolute()) if k in _FILES else v for k, v in settings.items()}
        config = cls(**settings, origin=" + ".join(origins) or "defaults")
        for attr in _FILES:
            location = getattr(config, attr)
            if location is not None and not Path(location).is_file():
                raise KafkaClientConfigInvalid(
                    f"{attr.replace('_', '.')} names {location}, which is not a readable file "
                    f"({config.origin}): fix the path, or create the file"
                )
        return config

    def as_env(self) -> dict[str, str]:
        """This config as `KAFKA_CLIENT_*` variables `from_env` reads back (for a child process).

        Contains the passwords: for a child's environment only, never to be printed.
        """
        return {
            _env_name(f.name): str(getattr(self, f.name))
            for f in fields(self)
            if f.name != "origin" and getattr(self, f.name) != f.default
        }

    def librdkafka_settings(self) -> dict[str, str]:
        """The settings confluent-kafka's producers, consumers and admin clients take."""
        return {
            f.name.replace("_", "."): str(getattr(self, f.name))
            for f in fields(self)
            if f.name != "origin" and getattr(self, f.name) != f.default
        }

    def java_settings(self) -> dict[str, str]:
        """The same settings as the Java client names them (Spark's Kafka source and sink)."""
        found: dict[str, str] = {}
        if self.secured:
            found["security.protocol"] = self.security_protocol
        if self.sasl_mechanism is not None:
            found["sasl.mechanism"] = self.sasl_mechanism
            found["sasl.jaas.config"] = jaas_config(
                self.sasl_mechanism, self.sasl_username or "", self.sasl_password or ""
            )
        if self.ssl_ca_location is not None:
            found |= {"ssl.truststore.type": "PEM", "ssl.truststore.location": self.ssl_ca_location}
        if self.ssl_keystore_location is not None:
            found |= {
                "ssl.keystore.type": "PKCS12",
                "ssl.keystore.location": self.ssl_keystore_location,
                "ssl.keystore.password": self.ssl_keystore_password or "",
            }
        if self.ssl_certificate_location is not None:
            found |= {"ssl.keystore.type": "PEM", "ssl.keystore.location": self.ssl_certificate_location}
            if self.ssl_key_password is not None:
                found["ssl.key.password"] = self.ssl_key_password
        if self.ssl_endpoint_identification_algorithm == "none":
            found["ssl.endpoint.identification.algorithm"] = ""  # Java's spelling of "no check"
        return found

    def spark_options(self) -> dict[str, str]:
        """`java_settings` as options of Spark's Kafka source and sink (`kafka.` + the Java key)."""
        return {f"kafka.{key}": value for key, value in self.java_settings().items()}


def _env_name(attr: str) -> str:
    return ENV_PREFIX + attr.upper()


_ENV_FIELDS = {_env_name(f.name): f.name for f in fields(KafkaClientConfig) if f.name != "origin"}


def env_settings(env: Mapping[str, str]) -> dict[str, str]:
    """The `KAFKA_CLIENT_*` variables as field names; an unknown one is refused (not ignored)."""
    found = {}
    for name, value in env.items():
        if not name.startswith(ENV_PREFIX) or name == CONFIG_ENV or not value:
            continue
        if name not in _ENV_FIELDS:
            raise KafkaClientConfigInvalid(
                f"{name} is not a Kafka client setting the toolkit knows; use one of "
                f"{', '.join(sorted(_ENV_FIELDS))} (or {CONFIG_ENV}=<properties file>)"
            )
        attr = _ENV_FIELDS[name]
        found[attr] = value if attr in _SECRETS else value.strip()  # a password keeps its blanks
    return found


def _read(path: str) -> str:
    try:
        return Path(path).read_text(encoding="latin-1")  # Java's Properties.load(InputStream) encoding
    except OSError as exc:
        raise KafkaClientConfigInvalid(
            f"{CONFIG_ENV}={path} cannot be read ({exc.strerror}): fix the path or unset {CONFIG_ENV}"
        ) from None


def _problems(c: KafkaClientConfig) -> list[str]:
    """What makes `c` unusable or untranslatable, as messages naming the setting and the fix."""
    if c.security_protocol not in PROTOCOLS:
        return [f"security.protocol={c.security_protocol!r} is not one of {', '.join(PROTOCOLS)}"]
    sasl = c.security_protocol.startswith("SASL_")
    tls = c.security_protocol.endswith("SSL")
    problems = []
    sasl_set = [n for n in ("sasl_mechanism", "sasl_username", "sasl_password") if getattr(c, n) is not None]
    if sasl:
        if c.sasl_mechanism not in MECHANISMS:
            problems.append(
                f"sasl.mechanism={c.sasl_mechanism!r} with security.protocol={c.security_protocol}: use one "
                f"of {', '.join(MECHANISMS)} (GSSAPI and OAUTHBEARER are not supported by the toolkit)"
            )
        if c.sasl_username is None or c.sasl_password is None:
            problems.append(
                f"security.protocol={c.security_protocol} needs a username and a password: set "
                "KAFKA_CLIENT_SASL_USERNAME and KAFKA_CLIENT_SASL_PASSWORD (or sasl.jaas.config in the "
                f"{CONFIG_ENV} file)"
            )
    elif sasl_set:
        problems.append(
            f"{', '.join(n.replace('_', '.') for n in sasl_set)} set with security.protocol="
            f"{c.security_protocol}, which does not use SASL: set security.protocol=SASL_SSL (or "
            "SASL_PLAINTEXT), or remove them"
        )
    tls_set = [n for n in (*_FILES, "ssl_key_password", "ssl_keystore_password") if getattr(c, n) is not None]
    if c.ssl_endpoint_identification_algorithm not in ("https", "none"):
        problems.append(
            f"ssl.endpoint.identification.algorithm={c.ssl_endpoint_identification_algorithm!r}: use "
            "https (the default) or none"
        )
    elif c.ssl_endpoint_identification_algorithm == "none":
        tls_set.append("ssl_endpoint_identification_algorithm")
    if tls_set and not tls:
        problems.append(
            f"{', '.join(n.replace('_', '.') for n in tls_set)} set with security.protocol="
            f"{c.security_protocol}, which does not use TLS: set security.protocol=SSL or SASL_SSL, or "
            "remove them"
        )
    if (c.ssl_certificate_location is None) != (c.ssl_key_location is None):
        problems.append(
            "ssl.certificate.location and ssl.key.location go together: set both (one PEM file holding "
            "the key and the certificate may be named twice)"
        )
    elif c.ssl_certificate_location != c.ssl_key_location:
        problems.append(
            "ssl.certificate.location and ssl.key.location name different files, which Spark's Java "
            "client cannot read (its PEM keystore is one file): concatenate the key and the "
            "certificate into one PEM file and name it in both"
        )
    if c.ssl_key_password is not None and c.ssl_certificate_location is None:
        problems.append("ssl.key.password is set without ssl.key.location: add it or remove the password")
    if c.ssl_keystore_location is not None and c.ssl_certificate_location is not None:
        problems.append(
            "both a PKCS12 keystore (ssl.keystore.location) and a PEM certificate "
            "(ssl.certificate.location) are set: keep one"
        )
    if (c.ssl_keystore_password is not None) != (c.ssl_keystore_location is not None):
        problems.append(
            "ssl.keystore.location and ssl.keystore.password go together (librdkafka opens a PKCS12 "
            "keystore with its password): set both or neither"
        )
    return problems


# The default: no security settings (a local stack's PLAINTEXT listener).
PLAINTEXT = KafkaClientConfig()
