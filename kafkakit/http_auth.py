"""How the toolkit logs in to Kafka Connect's REST API, the schema registry and Redis, apart from URLs.

One `HttpAuth` per service, loaded (in `from_env`, the only reader of the environment) from
`<PREFIX>USERNAME`, `<PREFIX>PASSWORD`, `<PREFIX>TOKEN` (a bearer token), `<PREFIX>CA_FILE` (PEM: the
CA(s) that signed the server's certificate, instead of the system's), `<PREFIX>CLIENT_CERT` and
`<PREFIX>CLIENT_KEY` (PEM: a client certificate for mutual TLS; the key may sit in the certificate's
file), the prefixes being `KAFKA_CONNECT_`, `SCHEMA_REGISTRY_` and `REDIS_` (no token for Redis, and
`REDIS_PASSWORD` alone is Redis's `requirepass` login).
`httpx_options` and `redis_options` turn it into the arguments the clients take: every HTTP client of
the three packages is built through the former, every Redis client through the latter.

Guarantees ("exact or refused"):
- credentials in the URL (`https://user:pw@host`) keep working; given both in the URL and in the
  variables, they must agree, or the settings are refused naming both (`HttpAuthInvalid`); so are a
  user without a password, a token next to a user, a key without a certificate, TLS files for an
  `http://` or `redis://` URL (they would be ignored), and a file that does not exist (at load);
- a refused login or a failed TLS handshake is `ServiceAccessRefused` naming the service, the
  settings and the fix (`access_problem`, which every client asks about its failures);
- passwords and tokens never appear in a repr, a str or a message (only in the client arguments and
  in `as_env()`, a child process's environment).
Pure but for `from_env`, which reads the environment and checks the files exist.
"""

from __future__ import annotations

import os
import ssl
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlsplit

from kafkakit.errors import HttpAuthInvalid, ServiceAccessRefused
from kafkakit.secrets import MASK, masked

if TYPE_CHECKING:
    import httpx

CONNECT_PREFIX = "KAFKA_CONNECT_"
REGISTRY_PREFIX = "SCHEMA_REGISTRY_"
REDIS_PREFIX = "REDIS_"
_SECRETS = frozenset({"password", "token"})
_FILES = ("ca_file", "client_cert", "client_key")
_TLS_SCHEMES = frozenset({"https", "rediss"})


@dataclass(frozen=True, slots=True, kw_only=True, repr=False)
class HttpAuth:
    """One service's login and TLS settings; the default is none (the URL's, and the system's CAs).

    `prefix` names the variables, for messages (never compared).
    """

    username: str | None = None
    password: str | None = None
    token: str | None = None
    ca_file: str | None = None
    client_cert: str | None = None
    client_key: str | None = None
    prefix: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        problems = _problems(self)
        if problems:
            raise HttpAuthInvalid("; ".join(problems))

    def __repr__(self) -> str:
        shown = (
            f"{f.name}={MASK!r}" if f.name in _SECRETS else f"{f.name}={getattr(self, f.name)!r}"
            for f in fields(self)
            if getattr(self, f.name) not in (None, "")
        )
        return f"HttpAuth({', '.join(shown)})"

    __str__ = __repr__

    @classmethod
    def from_env(
        cls, prefix: str, environ: Mapping[str, str] | None = None, *, token: bool = True
    ) -> HttpAuth:
        """`<prefix>USERNAME`, ... (`token=False`: a service without bearer tokens, `<prefix>TOKEN` is not
        read). Relative file paths are made absolute (a child process started elsewhere finds them)."""
        env = os.environ if environ is None else environ
        names = [f.name for f in fields(cls) if f.name != "prefix" and (token or f.name != "token")]
        found: dict[str, str] = {}
        for name in names:
            value = env.get(prefix + name.upper(), "")
            if name not in _SECRETS:
                value = value.strip()
            if value:
                found[name] = str(Path(value).absolute()) if name in _FILES else value
        auth = cls(**found, prefix=prefix)
        missing = [
            f"{auth.setting(n)} names {found[n]}"
            for n in _FILES
            if n in found and not Path(found[n]).is_file()
        ]
        if missing:
            raise HttpAuthInvalid(
                f"{'; '.join(missing)}, which is not a readable file: fix the path, or unset it"
            )
        return auth

    def as_env(self) -> dict[str, str]:
        """The variables `from_env` reads back (for a child process: holds the secrets, never print it)."""
        return {
            self.prefix + f.name.upper(): str(getattr(self, f.name))
            for f in fields(self)
            if f.name != "prefix" and getattr(self, f.name) is not None
        }

    def setting(self, name: str) -> str:
        """The variable that sets field `name` (for messages)."""
        return self.prefix + name.upper()


def check_url(auth: HttpAuth, url: str, url_setting: str) -> None:
    """Refuse `auth` next to a `url` that carries other credentials, or TLS files for a plain URL."""
    parts = urlsplit(url)
    in_url = parts.username is not None or parts.password is not None
    if in_url and auth.token is not None:
        raise HttpAuthInvalid(
            f"{url_setting} carries a user and password and {auth.setting('token')} a bearer token: keep "
            "one way to log in"
        )
    if in_url and (auth.username is not None or auth.password is not None):
        same = unquote(parts.username or "") == (auth.username or "") and unquote(parts.password or "") == (
            auth.password or ""
        )
        if not same:
            raise HttpAuthInvalid(
                f"{url_setting} carries the user {unquote(parts.username or '')!r} and a password, and "
                f"{auth.setting('username')}/{auth.setting('password')} give other credentials: keep one "
                "of them (or make them agree)"
            )
    tls_files = [auth.setting(n) for n in _FILES if getattr(auth, n) is not None]
    if tls_files and parts.scheme not in _TLS_SCHEMES:
        raise HttpAuthInvalid(
            f"{', '.join(tls_files)} set, but {url_setting} is a {parts.scheme}:// URL, which does not use "
            f"TLS: write {'rediss' if parts.scheme.startswith('redis') else 'https'}:// or unset them"
        )


def httpx_options(auth: HttpAuth) -> dict[str, Any]:
    """`auth=` and `verify=` for an httpx client or request: basic or bearer auth, and an SSL context
    trusting `ca_file` (else the system's CAs) and presenting the client certificate, if any."""
    import httpx

    options: dict[str, Any] = {}
    if auth.username is not None:
        options["auth"] = httpx.BasicAuth(auth.username, auth.password or "")
    elif auth.token is not None:
        options["auth"] = _bearer(auth.token)
    if auth.ca_file is not None or auth.client_cert is not None:
        context = ssl.create_default_context(cafile=auth.ca_file)  # a CA file replaces the system's
        if auth.client_cert is not None:
            context.load_cert_chain(auth.client_cert, auth.client_key)
        options["verify"] = context
    return options


def redis_options(auth: HttpAuth) -> dict[str, Any]:
    """Keyword arguments for `redis.Redis.from_url` (a `rediss://` URL for the TLS ones)."""
    names = {
        "username": "username",
        "password": "password",
        "ca_file": "ssl_ca_certs",
        "client_cert": "ssl_certfile",
        "client_key": "ssl_keyfile",
    }
    return {arg: getattr(auth, name) for name, arg in names.items() if getattr(auth, name) is not None}


def access_problem(
    service: str, url: str, auth: HttpAuth, *, status: int | None = None, error: BaseException | None = None
) -> ServiceAccessRefused | None:
    """Why `service` at `url` refused this client — a login refused (HTTP `status` 401/403, or a Redis
    authentication `error`) or a failed TLS handshake behind `error` — naming the settings to check
    (`auth.prefix` + USERNAME, ..., URL) and the fix; None for any other answer or failure (the
    caller's own error then)."""
    where = f"{service} at {masked(url)}"
    reason = None if error is None else _tls_failure(error)
    if reason is not None:
        return ServiceAccessRefused(
            f"{where}: the TLS handshake failed ({masked(reason)}): set {auth.setting('ca_file')} to the PEM "
            f"file of the CA that signed its certificate (and {auth.setting('client_cert')} / "
            f"{auth.setting('client_key')} if it requires a client certificate); nothing was changed"
        )
    if status in (401, 403):
        detail = f"HTTP {status}"
    elif error is not None and type(error).__name__ in ("AuthenticationError", "NoPermissionError"):
        detail = f"{type(error).__name__}: {masked(str(error))}"  # redis-py's: no secret in them
    else:
        return None
    if auth.token is not None:
        how = f"the bearer token ({auth.setting('token')})"
    else:
        how = (
            f"the user name and password ({auth.setting('username')} / {auth.setting('password')}, or "
            f"the user:password in {auth.setting('url')})"
        )
    return ServiceAccessRefused(f"{where} refused the login ({detail}): check {how}; nothing was changed")


def _tls_failure(exc: BaseException) -> str | None:
    """The TLS error behind a client exception (httpx or redis wraps it), or None for another failure."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, ssl.SSLError):
            return str(getattr(seen, "verify_message", None) or getattr(seen, "reason", None) or seen)
        text = str(seen)
        if "CERTIFICATE_VERIFY_FAILED" in text or "SSL:" in text:
            return text
        seen = seen.__cause__ or seen.__context__
    return None


def _problems(a: HttpAuth) -> list[str]:
    """What makes `a` unusable or ambiguous, as messages naming the variables and the fix."""
    problems = []
    # Redis's `requirepass` is a password alone (AUTH logs in as its `default` user); HTTP basic auth
    # needs both
    lone_password = a.prefix == REDIS_PREFIX and a.username is None
    if (a.username is None) != (a.password is None) and not lone_password:
        given, missing = ("username", "password") if a.password is None else ("password", "username")
        problems.append(f"{a.setting(given)} is set without {a.setting(missing)}: set both, or neither")
    if a.token is not None and (a.username is not None or a.password is not None):
        problems.append(
            f"{a.setting('token')} and {a.setting('username')}/{a.setting('password')} are both set: keep "
            "one way to log in (a bearer token, or basic auth)"
        )
    if a.client_key is not None and a.client_cert is None:
        problems.append(
            f"{a.setting('client_key')} is set without {a.setting('client_cert')}: set the certificate too"
        )
    return problems


def _bearer(token: str) -> Callable[[httpx.Request], httpx.Request]:
    """httpx auth sending `Authorization: Bearer <token>` (httpx has basic and digest only)."""
    header = f"Bearer {token}"

    def sign(request: httpx.Request) -> httpx.Request:
        request.headers["Authorization"] = header
        return request

    return sign


NO_CONNECT_AUTH = HttpAuth(prefix=CONNECT_PREFIX)
NO_REGISTRY_AUTH = HttpAuth(prefix=REGISTRY_PREFIX)
NO_REDIS_AUTH = HttpAuth(prefix=REDIS_PREFIX)
