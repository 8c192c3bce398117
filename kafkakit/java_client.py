"""The Java client's side of the Kafka client configuration: its properties files, its JAAS text, and
which of its settings translate to librdkafka (kafkakit.client_config).

`parse_properties` reads a `.properties` text as `java.util.Properties.load` does; `from_java_properties`
maps the security keys onto `KafkaClientConfig` fields and refuses every other key, naming it and the
fix; `parse_jaas` / `jaas_config` read and write a one-module `sasl.jaas.config`. All pure. A JAAS text
holds a password: it is never quoted in a message.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from kafkakit.errors import KafkaClientConfigInvalid

LOGIN_MODULES = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
}
_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}
_KEY_END = re.compile(r"(?<!\\)(?:\\\\)*[=:\s]")


def parse_properties(text: str) -> dict[str, str]:
    """A Java `.properties` text as a dict, as `java.util.Properties.load` reads it (comments, `=`, `:`
    or blank separators, backslash continuations and escapes; the last of repeated keys wins)."""
    logical: list[str] = []
    pending: str | None = None
    for raw in text.splitlines():
        line = raw.lstrip(" \t\f")
        if pending is None and (not line or line[0] in "#!"):
            continue
        joined = line if pending is None else pending + line
        if (len(line) - len(line.rstrip("\\"))) % 2 == 1:  # an odd number of trailing backslashes
            pending = joined[:-1]
            continue
        logical.append(joined)
        pending = None
    if pending is not None:
        logical.append(pending)
    found = {}
    for line in logical:
        match = _KEY_END.search(line)
        key, rest = (line[: match.end() - 1], line[match.end() - 1 :]) if match else (line, "")
        rest = rest.lstrip(" \t\f")
        if rest[:1] in ("=", ":"):
            rest = rest[1:].lstrip(" \t\f")
        found[_unescape(key)] = _unescape(rest)
    return found


def _unescape(text: str) -> str:
    out, i = [], 0
    while i < len(text):
        c = text[i]
        if c == "\\" and i + 1 < len(text):
            nxt = text[i + 1]
            if nxt == "u" and re.fullmatch(r"[0-9a-fA-F]{4}", text[i + 2 : i + 6]):
                out.append(chr(int(text[i + 2 : i + 6], 16)))
                i += 6
                continue
            out.append(_ESCAPES.get(nxt, nxt))
            i += 2
            continue
        out.append(c)
        i += 1
    return "".join(out)


# Java client keys -> what they become; every other key is refused.
_JAVA_KEYS = (
    "security.protocol",
    "sasl.mechanism",
    "sasl.jaas.config",
    "ssl.truststore.location",
    "ssl.truststore.type",
    "ssl.truststore.password",
    "ssl.keystore.location",
    "ssl.keystore.type",
    "ssl.keystore.password",
    "ssl.key.password",
    "ssl.endpoint.identification.algorithm",
)


def from_java_properties(props: Mapping[str, str], origin: str) -> dict[str, str]:
    """Java client settings as `KafkaClientConfig` field values; what has no librdkafka equivalent is
    refused, naming the key and the fix."""
    for key in props:
        if key not in _JAVA_KEYS:
            raise KafkaClientConfigInvalid(_unknown_java_key(key, origin))
    found: dict[str, str] = {}
    if "security.protocol" in props:
        found["security_protocol"] = props["security.protocol"].strip().upper()
    if "sasl.mechanism" in props:
        found["sasl_mechanism"] = props["sasl.mechanism"].strip().upper()
    if "sasl.jaas.config" in props:
        module, options = parse_jaas(props["sasl.jaas.config"], origin)
        mechanism = found.get("sasl_mechanism", "GSSAPI")  # Java's default mechanism
        if LOGIN_MODULES.get(mechanism) != module:
            raise KafkaClientConfigInvalid(
                f"sasl.jaas.config uses {module}, which does not log in with sasl.mechanism={mechanism} "
                f"({origin}): use {LOGIN_MODULES.get(mechanism, 'PLAIN or SCRAM')} "
                "(the toolkit supports PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512)"
            )
        extra = set(options) - {"username", "password"}
        if extra or not {"username", "password"} <= set(options):
            raise KafkaClientConfigInvalid(
                f'sasl.jaas.config must give exactly username="..." password="..." ({origin}); '
                f"{'it also sets ' + ', '.join(sorted(extra)) if extra else 'one is missing'}, which "
                "librdkafka cannot take: remove it"
            )
        found["sasl_username"], found["sasl_password"] = options["username"], options["password"]
    _truststore(props, origin, found)
    _keystore(props, origin, found)
    if "ssl.endpoint.identification.algorithm" in props:
        algorithm = props["ssl.endpoint.identification.algorithm"].strip().lower()
        if algorithm not in ("", "https"):
            raise KafkaClientConfigInvalid(
                f"ssl.endpoint.identification.algorithm={algorithm!r} ({origin}): use https "
                "(check the broker's host name, the default) or an empty value (no check)"
            )
        found["ssl_endpoint_identification_algorithm"] = algorithm or "none"
    return found


def _unknown_java_key(key: str, origin: str) -> str:
    if key == "bootstrap.servers":
        return (
            f"bootstrap.servers is set in {origin}: the toolkit takes the brokers' address from "
            "KAFKA_BOOTSTRAP_SERVERS (or --bootstrap-servers); move it there and remove it from the file"
        )
    return (
        f"{key} in {origin} is not a security setting the toolkit can give both librdkafka and "
        f"Spark's Java client: remove it (the file may set {', '.join(_JAVA_KEYS)})"
    )


def _truststore(props: Mapping[str, str], origin: str, found: dict[str, str]) -> None:
    if "ssl.truststore.location" not in props:
        if "ssl.truststore.password" in props or "ssl.truststore.type" in props:
            raise KafkaClientConfigInvalid(
                f"ssl.truststore.type/password are set without ssl.truststore.location ({origin}): "
                "add the location of a PEM CA file or remove them"
            )
        return
    kind = props.get("ssl.truststore.type", "JKS").strip().upper()  # Java's default type is JKS
    if kind != "PEM":
        raise KafkaClientConfigInvalid(
            f"ssl.truststore.type={kind} ({origin}): librdkafka reads CA certificates only from PEM "
            "files; export them (keytool -exportcert -rfc -keystore <store> -alias <ca> -file ca.pem) "
            "and set ssl.truststore.location=ca.pem, ssl.truststore.type=PEM"
        )
    if "ssl.truststore.password" in props:
        raise KafkaClientConfigInvalid(
            f"ssl.truststore.password is set for a PEM truststore ({origin}): a PEM truststore has no "
            "password (the Java client refuses one too); remove it"
        )
    found["ssl_ca_location"] = props["ssl.truststore.location"].strip()


def _keystore(props: Mapping[str, str], origin: str, found: dict[str, str]) -> None:
    location = props.get("ssl.keystore.location", "").strip()
    if not location:
        if any(k in props for k in ("ssl.keystore.type", "ssl.keystore.password", "ssl.key.password")):
            raise KafkaClientConfigInvalid(
                f"ssl.keystore.type/password or ssl.key.password are set without "
                f"ssl.keystore.location ({origin}): add the keystore's location or remove them"
            )
        return
    kind = props.get("ssl.keystore.type", "JKS").strip().upper()
    if kind == "PKCS12":
        if "ssl.key.password" in props:
            raise KafkaClientConfigInvalid(
                f"ssl.key.password is set for a PKCS12 keystore ({origin}): librdkafka opens it with "
                "ssl.keystore.password alone; give the key the keystore's password and remove it"
            )
        found["ssl_keystore_location"] = location
        if "ssl.keystore.password" in props:
            found["ssl_keystore_password"] = props["ssl.keystore.password"]
    elif kind == "PEM":
        if "ssl.keystore.password" in props:
            raise KafkaClientConfigInvalid(
                f"ssl.keystore.password is set for a PEM keystore ({origin}): a PEM keystore takes "
                "ssl.key.password (the key's) only; remove it"
            )
        found["ssl_certificate_location"] = found["ssl_key_location"] = location
        if "ssl.key.password" in props:
            found["ssl_key_password"] = props["ssl.key.password"]
    else:
        raise KafkaClientConfigInvalid(
            f"ssl.keystore.type={kind} ({origin}): librdkafka reads a client certificate from PKCS12 or "
            "PEM only; convert it (keytool -importkeystore -deststoretype PKCS12 ...) and set "
            "ssl.keystore.type=PKCS12"
        )


_JAAS_TOKEN = re.compile(r'\s*(?:(?P<quoted>"(?:[^"\\]|\\.)*")|(?P<sym>[=;])|(?P<word>[^\s=;"]+))', re.S)
_FLAGS = ("required", "requisite", "sufficient", "optional")


def parse_jaas(text: str, origin: str) -> tuple[str, dict[str, str]]:
    """`Module flag key="value" ...;` -> (module, options). One login module only. The text is never
    quoted in an error (it holds the password)."""
    tokens: list[tuple[str, str]] = []
    pos = 0
    while pos < len(text) and text[pos:].strip():
        match = _JAAS_TOKEN.match(text, pos)
        if match is None:
            raise KafkaClientConfigInvalid(_jaas_malformed(origin))
        kind = match.lastgroup or ""
        value = match[kind]
        tokens.append((kind, _unquote(value) if kind == "quoted" else value))
        pos = match.end()
    if len(tokens) < 3 or tokens[0][0] != "word" or tokens[1][1] not in _FLAGS or tokens[-1] != ("sym", ";"):
        raise KafkaClientConfigInvalid(_jaas_malformed(origin))
    body, options = tokens[2:-1], {}
    if len(body) % 3:
        raise KafkaClientConfigInvalid(_jaas_malformed(origin))
    for i in range(0, len(body), 3):
        (key_kind, key), (_, eq), (value_kind, value) = body[i : i + 3]
        if key_kind != "word" or eq != "=" or value_kind not in ("quoted", "word"):
            raise KafkaClientConfigInvalid(_jaas_malformed(origin))
        options[key] = value
    return tokens[0][1], options


def _jaas_malformed(origin: str) -> str:
    return (
        f"sasl.jaas.config in {origin} is not one login module the toolkit can read: write it as "
        '<LoginModule> required username="..." password="...";'
    )


def _unquote(token: str) -> str:
    return re.sub(r"\\(.)", r"\1", token[1:-1], flags=re.S)


def jaas_config(mechanism: str, username: str, password: str) -> str:
    """The Java client's `sasl.jaas.config` for a PLAIN or SCRAM login."""

    def quoted(value: str) -> str:
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'

    return f"{LOGIN_MODULES[mechanism]} required username={quoted(username)} password={quoted(password)};"
