"""The toolkit's environment variables, declared once: the configuration reference is rendered from
these tables (docs/hooks) and every CLI checks its environment and flags against them before it starts.

Each `Variable` names its form (what a valid value looks like, as a `Form`), an example, what it means
and which programs read it. A `Form` is a check that raises `ValueError` for a value it refuses plus a
value it refuses (`bad`, which the tests feed to every program that reads the variable). The check
only accepts or refuses: the packages' `from_env()` still read and convert the values, so a valid value
behaves exactly as before.

A refused value stops the program with one line naming the variable (or flag), the form it takes and a
valid example, and exit status 2, before anything is connected or started. A secret's value is never
repeated in that line.

This module holds the machinery and the variables every package shares (the five endpoints, the
Kafka clients' security settings, the HTTP and Redis logins); each package declares its own beside
its config (`eventstore.environment`, `materializers.environment`, `demo.environment`,
`devstack.environment`).
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from kafkakit.errors import ConfigError


class BadSetting(ConfigError):
    """A variable or flag holds a value outside its form."""


@dataclass(frozen=True, slots=True)
class Form:
    """What a valid value looks like: `text` for people, `check` (raises ValueError to refuse) for the
    program, and `bad`, a value the check refuses (None: every value is accepted, e.g. a password)."""

    text: str
    check: Callable[[str], object] | None = None
    bad: str | None = None

    def refuses(self, value: str) -> bool:
        if self.check is None:
            return False
        try:
            self.check(value)
        except (ValueError, ConfigError):
            return True
        return False


@dataclass(frozen=True, slots=True, kw_only=True)
class Variable:
    name: str
    form: Form
    example: str
    meaning: str
    used_by: tuple[str, ...]
    default: str = ""
    flags: tuple[str, ...] = ()  # the command-line flags that override it ("--trigger"), if any
    secret: bool = False
    section: str = ""  # the reference's heading this variable is listed under

    def problem(self, value: str, *, given_as: str = "") -> str | None:
        """None if `value` fits the form, else the one line that says what is wrong."""
        if not self.form.refuses(value):
            return None
        where = given_as or self.name
        shown = "(hidden)" if self.secret else repr(value)
        example = f"{given_as} {self.example}" if given_as.startswith("--") else f"{self.name}={self.example}"
        return f"{where}={shown} is not valid: expected {self.form.text}, e.g. {example}"


# ---- forms -------------------------------------------------------------------------------------------


def _require(ok: bool) -> None:
    if not ok:
        raise ValueError


def _positive_int(text: str) -> None:
    _require(text.strip().isdigit() and int(text) >= 1)


def _non_negative_int(text: str) -> None:
    _require(text.strip().isdigit())


def _positive_number(text: str) -> None:
    try:
        _require(float(text) > 0)
    except ValueError:
        raise ValueError from None


def _url(*schemes: str) -> Callable[[str], None]:
    def check(text: str) -> None:
        parts = urlsplit(text.strip())
        _require(parts.scheme in schemes and bool(parts.netloc))

    return check


_HOST_PORT = re.compile(r"^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.-]+)(:\d{1,5})?$")


def _host_ports(text: str) -> None:
    items = [item.strip() for item in text.split(",")]
    _require(all(_HOST_PORT.match(item) for item in items))


def _dsn(text: str) -> None:
    value = text.strip()
    _require(bool(urlsplit(value).scheme in ("postgresql", "postgres") or re.match(r"^\w+=", value)))


def _existing_file(text: str) -> None:
    _require(Path(text.strip()).is_file())


def _port(text: str) -> None:
    _require(text.strip().isdigit() and 1 <= int(text) <= 65535)


def pattern(text: str, regex: str, bad: str) -> Form:
    """A form whose values match `regex` in full."""
    compiled = re.compile(regex)

    def check(value: str) -> None:
        _require(compiled.fullmatch(value.strip()) is not None)

    return Form(text, check, bad)


def choice(*options: str, bad: str = "sometimes") -> Form:
    def check(text: str) -> None:
        _require(text.strip() in options)

    named = (
        " or ".join(options) if len(options) == 2 else f"one of {', '.join(options[:-1])} or {options[-1]}"
    )
    return Form(named, check, bad)


POSITIVE_INT = Form("a positive integer", _positive_int, "-1")
NON_NEGATIVE_INT = Form("a non-negative integer", _non_negative_int, "many")
POSITIVE_NUMBER = Form("a positive number", _positive_number, "tiny")
HTTP_URL = Form("an http:// or https:// URL", _url("http", "https"), "connect:8083")
REDIS_URL = Form("a redis://, rediss:// or unix:// URL", _url("redis", "rediss", "unix"), "cache:6379")
BOOTSTRAP = Form("host:port, or several separated by commas", _host_ports, "kafka:port")
DSN = Form("a libpq URI (postgresql://user@host:port/db) or key=value string", _dsn, "db:5432")
FILE = Form("the path of a readable file", _existing_file, "/nonexistent/file.pem")
PORT = Form("a TCP port (1-65535)", _port, "70000")
TEXT = Form("any text")
PATH = Form("a path")
YES_NO = choice("0", "1", "true", "false", "yes", "no", "on", "off", bad="maybe")


# ---- the shared variables --------------------------------------------------------------------------

ALL = ("cdc", "eventstore", "materializers", "demo")
ENDPOINTS = "Endpoints"
KAFKA_SECURITY = "Kafka client security"
SERVICE_LOGINS = "Kafka Connect, schema registry and Redis logins"


def _endpoint(
    name: str, form: Form, example: str, meaning: str, flags: tuple[str, ...], used_by: tuple[str, ...]
) -> Variable:
    return Variable(
        name=name, form=form, example=example, default=example, meaning=meaning, used_by=used_by,
        flags=flags, section=ENDPOINTS,
    )  # fmt: skip


def _kafka_client(suffix: str, form: Form, example: str, meaning: str, *, secret: bool = False) -> Variable:
    return Variable(
        name=f"KAFKA_CLIENT_{suffix}", form=form, example=example, meaning=meaning, used_by=ALL,
        secret=secret, section=KAFKA_SECURITY,
    )  # fmt: skip


def _logins(prefix: str, service: str, used_by: tuple[str, ...], *, token: bool = True) -> list[Variable]:
    found = [
        (f"{prefix}USERNAME", TEXT, "cdc-admin", f"the user {service} is logged in as", False),
        (f"{prefix}PASSWORD", TEXT, "s3cret", f"its password ({service})", True),
        (f"{prefix}CA_FILE", FILE, "/etc/pki/ca.pem", f"PEM file of the CA(s) {service}'s certificate is checked with", False),
        (f"{prefix}CLIENT_CERT", FILE, "/etc/pki/client.pem", f"PEM client certificate for {service} (mutual TLS)", False),
        (f"{prefix}CLIENT_KEY", FILE, "/etc/pki/client.key", "its key (PEM, unencrypted), unless the certificate's file holds it", False),
    ]  # fmt: skip
    if token:
        found.insert(2, (f"{prefix}TOKEN", TEXT, "eyJhbGciOi...", f"a bearer token for {service}", True))
    return [
        Variable(name=n, form=f, example=e, meaning=m, used_by=used_by, secret=s, section=SERVICE_LOGINS)
        for n, f, e, m, s in found
    ]


SHARED: tuple[Variable, ...] = (
    _endpoint("KAFKA_BOOTSTRAP_SERVERS", BOOTSTRAP, "127.0.0.1:19092", "Kafka's brokers", ("--bootstrap-servers",), ALL),
    _endpoint("KAFKA_CONNECT_URL", HTTP_URL, "http://127.0.0.1:18083", "Kafka Connect's REST API", ("--connect-url",), ("cdc", "demo")),
    _endpoint("PG_DSN", DSN, "postgresql://postgres@127.0.0.1:55432/postgres", "the captured Postgres database", ("--pg-dsn",), ("cdc", "materializers", "demo")),
    _endpoint("REDIS_URL", REDIS_URL, "redis://127.0.0.1:16379/0", "the cache views' Redis", (), ("materializers", "demo")),
    _endpoint("SCHEMA_REGISTRY_URL", HTTP_URL, "http://127.0.0.1:18080/apis/ccompat/v7", "the schema registry's Confluent-compatible API", ("--registry-url", "--schema-registry-url"), ALL),
    Variable(
        name="KAFKA_CLIENT_CONFIG", form=FILE, example="client.properties", used_by=ALL, section=KAFKA_SECURITY,
        meaning="a Java client properties file with the security settings of every Kafka client",
    ),
    _kafka_client("SECURITY_PROTOCOL", choice("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"), "SASL_SSL", "how the clients talk to the brokers"),
    _kafka_client("SASL_MECHANISM", choice("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"), "SCRAM-SHA-512", "the SASL login's mechanism"),
    _kafka_client("SASL_USERNAME", TEXT, "alice", "the SASL user"),
    _kafka_client("SASL_PASSWORD", TEXT, "s3cret", "the SASL user's password", secret=True),
    _kafka_client("SSL_CA_LOCATION", FILE, "/etc/kafka/ca.pem", "PEM file of the CA(s) that signed the brokers' certificates"),
    _kafka_client("SSL_CERTIFICATE_LOCATION", FILE, "/etc/kafka/client.pem", "PEM client certificate (mutual TLS)"),
    _kafka_client("SSL_KEY_LOCATION", FILE, "/etc/kafka/client.pem", "its PEM key (may be the certificate's file)"),
    _kafka_client("SSL_KEY_PASSWORD", TEXT, "s3cret", "the key's password", secret=True),
    _kafka_client("SSL_KEYSTORE_LOCATION", FILE, "/etc/kafka/client.p12", "a PKCS12 keystore with the client certificate"),
    _kafka_client("SSL_KEYSTORE_PASSWORD", TEXT, "s3cret", "the keystore's password", secret=True),
    _kafka_client("SSL_ENDPOINT_IDENTIFICATION_ALGORITHM", choice("https", "none"), "https", "whether the broker's host name is checked against its certificate"),
    *_logins("KAFKA_CONNECT_", "Kafka Connect", ("cdc", "demo")),
    *_logins("SCHEMA_REGISTRY_", "the schema registry", ALL),
    *_logins("REDIS_", "Redis", ("materializers", "demo"), token=False),
)  # fmt: skip


# ---- checking ----------------------------------------------------------------------------------------


def for_program(program: str, *tables: Iterable[Variable]) -> tuple[Variable, ...]:
    """The variables of `tables` that `program` reads."""
    return tuple(v for table in tables for v in table if program in v.used_by)


def problems(
    variables: Iterable[Variable], environ: Mapping[str, str] | None = None, flags: Mapping[str, object] = {}
) -> list[str]:
    """One line per variable set (non-empty) to a value outside its form, then per flag given (by its
    option string: `--trigger`) whose value is outside the form of the variable it overrides."""
    env = os.environ if environ is None else environ
    found = []
    for variable in variables:
        if (value := env.get(variable.name, "")).strip() and (line := variable.problem(value)):
            found.append(line)
    for variable in variables:
        for flag in variable.flags:
            given = flags.get(flag)
            if isinstance(given, bool) or not isinstance(given, str | int | float):
                continue  # a switch, a list (NAME=VALUE per job), or not given
            if not str(given).strip():
                continue  # blank: the program's own check says what an empty value means there
            if line := variable.problem(str(given), given_as=flag):
                found.append(line)
    return found


def given_flags(parser: argparse.ArgumentParser, args: argparse.Namespace) -> dict[str, object]:
    """Option string -> value of every option in `args` (the subcommands' parsers included)."""
    found: dict[str, object] = {}
    for action in _actions(parser):
        value = getattr(args, action.dest, None)
        if value is not None:
            for option in action.option_strings:
                found[option] = value
    return found


def _actions(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    actions = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                actions.extend(_actions(sub))
        elif action.option_strings:
            actions.append(action)
    return actions


def refuse_bad_settings(
    prog: str,
    variables: Sequence[Variable],
    parser: argparse.ArgumentParser | None = None,
    args: argparse.Namespace | None = None,
    environ: Mapping[str, str] | None = None,
) -> int | None:
    """For a CLI's `main`: None when the environment and flags fit their forms; else the first
    problem printed as one line on stderr, and 2 (the exit status) returned."""
    flags = given_flags(parser, args) if parser is not None and args is not None else {}
    found = problems(variables, environ, flags)
    if not found:
        return None
    print(f"{prog}: {found[0]}", file=sys.stderr)
    return 2
