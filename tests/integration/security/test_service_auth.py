"""Connect's, the registry's and Redis's login and TLS settings, against test-owned secured servers.

A local HTTPS server (self-signed CA made by openssl) asks for basic auth and answers like Connect and
the registry's ccompat API; every HTTP client of the three packages logs in to it: cdc's ConnectClient
and RegistryClient, eventstore's HttpRegistry, the materializers' schema fetches. A redis-server of the
test's own runs with `requirepass` and a TLS port. Wrong passwords, an untrusted CA and a missing
client certificate give a named error that holds no secret.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from security_helpers import SCHEMA, Pki, RedisServer, https_server

from cdc.connect_client import ConnectClient
from cdc.registry_client import RegistryClient
from eventstore.registry import HttpRegistry
from kafkakit.errors import ServiceAccessRefused
from kafkakit.http_auth import CONNECT_PREFIX, REDIS_PREFIX, REGISTRY_PREFIX, HttpAuth
from kafkakit.settings import Endpoints
from materializers.decode import avro_events
from materializers.decode.avro_events import WriterSchemas
from materializers.errors import SourceUnavailable, ViewUnavailable
from materializers.views.redis_cache import RedisCache

pytestmark = pytest.mark.integration

USER, HTTP_PASSWORD, WRONG = "toolkit", "Http-Pw-93kd", "Wrong-Pw-11zz"
REDIS_PASSWORD = "Redis-Pw-48qp"


def _auth(prefix: str, pki: Pki, password: str = HTTP_PASSWORD, **over: Any) -> HttpAuth:
    return HttpAuth(
        **{"username": USER, "password": password, "ca_file": str(pki.ca), "prefix": prefix, **over}
    )


def _clients(url: str, connect: HttpAuth, registry: HttpAuth) -> dict[str, Callable[[], object]]:
    """One call per HTTP client of the three packages."""
    ccompat = f"{url}/apis/ccompat/v7"
    return {
        "cdc ConnectClient": lambda: ConnectClient(url, auth=connect).list_connectors(),
        "cdc RegistryClient": lambda: RegistryClient(ccompat, auth=registry)(1).schema_id,
        "eventstore HttpRegistry": lambda: HttpRegistry(ccompat, auth=registry).schema_text(1),
        "materializers WriterSchemas": lambda: WriterSchemas(ccompat, auth=registry).get(1),
        "materializers registry subjects": lambda: avro_events._subject_schemas(ccompat, "orders", registry),
    }


def test_every_http_client_logs_in_with_the_settings_from_the_environment(https: str, pki: Pki) -> None:
    env = {
        "KAFKA_CONNECT_URL": https,
        "SCHEMA_REGISTRY_URL": f"{https}/apis/ccompat/v7",
        **{f"{p}{k}": v for p in (CONNECT_PREFIX, REGISTRY_PREFIX) for k, v in
           {"USERNAME": USER, "PASSWORD": HTTP_PASSWORD, "CA_FILE": str(pki.ca)}.items()},
    }  # fmt: skip
    ep = Endpoints.from_env(env)
    answers = {
        name: call() for name, call in _clients(https, ep.kafka_connect_auth, ep.schema_registry_auth).items()
    }
    assert answers == {
        "cdc ConnectClient": (),
        "cdc RegistryClient": 1,
        "eventstore HttpRegistry": SCHEMA,
        "materializers WriterSchemas": SCHEMA,
        "materializers registry subjects": {},
    }


def test_credentials_in_the_url_keep_working(https: str, pki: Pki) -> None:
    at = https.replace("https://", f"https://{USER}:{HTTP_PASSWORD}@")
    ca_only = HttpAuth(ca_file=str(pki.ca), prefix=CONNECT_PREFIX)
    assert ConnectClient(at, auth=ca_only).list_connectors() == ()


def _refusal(call: Callable[[], object]) -> str:
    with pytest.raises((ServiceAccessRefused, SourceUnavailable)) as info:
        call()
    return str(info.value)


def test_a_wrong_password_is_refused_naming_the_settings_without_a_secret(https: str, pki: Pki) -> None:
    clients = _clients(https, _auth(CONNECT_PREFIX, pki, WRONG), _auth(REGISTRY_PREFIX, pki, WRONG))
    for name, call in clients.items():
        text = _refusal(call)
        prefix = CONNECT_PREFIX if "Connect" in name else REGISTRY_PREFIX
        assert "refused the login (HTTP 401" in text, name
        assert f"{prefix}USERNAME / {prefix}PASSWORD" in text, name
        assert WRONG not in text and HTTP_PASSWORD not in text, name


@pytest.mark.parametrize("trust", ["system CAs", "another CA"])
def test_an_untrusted_certificate_is_refused_naming_the_ca_setting(https: str, pki: Pki, trust: str) -> None:
    ca = None if trust == "system CAs" else str(pki.other_ca)
    clients = _clients(https, _auth(CONNECT_PREFIX, pki, ca_file=ca), _auth(REGISTRY_PREFIX, pki, ca_file=ca))
    for name, call in clients.items():
        text = _refusal(call)
        prefix = CONNECT_PREFIX if "Connect" in name else REGISTRY_PREFIX
        assert "the TLS handshake failed" in text and f"set {prefix}CA_FILE" in text, name
        assert HTTP_PASSWORD not in text, name


def test_a_client_certificate_is_presented_when_the_server_requires_one(pki: Pki) -> None:
    with https_server(pki, USER, HTTP_PASSWORD, client_cert=True) as url:
        without = _refusal(lambda: ConnectClient(url, auth=_auth(CONNECT_PREFIX, pki)).list_connectors())
        assert "KAFKA_CONNECT_CLIENT_CERT" in without
        auth = _auth(CONNECT_PREFIX, pki, client_cert=str(pki.client_cert), client_key=str(pki.client_key))
        assert ConnectClient(url, auth=auth).list_connectors() == ()


def test_redis_logs_in_with_redis_password_over_plain_and_tls(redis: RedisServer, pki: Pki) -> None:
    plain = Endpoints.from_env({"REDIS_URL": redis.url, "REDIS_PASSWORD": REDIS_PASSWORD})
    RedisCache(plain.redis_url, "sec", plain.redis_auth).check()
    tls = Endpoints.from_env(
        {"REDIS_URL": redis.tls_url, "REDIS_PASSWORD": REDIS_PASSWORD, "REDIS_CA_FILE": str(pki.ca)}
    )
    cache = RedisCache(tls.redis_url, "sec", tls.redis_auth)
    cache.check()
    cache.client().set("sec:probe", "1")
    assert cache.client().get("sec:probe") == b"1"
    at = redis.url.replace("redis://", f"redis://:{REDIS_PASSWORD}@")  # in the URL, as before
    RedisCache(at, "sec", Endpoints.from_env({"REDIS_URL": at}).redis_auth).check()


@pytest.mark.parametrize("password", [WRONG, None])
def test_a_wrong_or_missing_redis_password_is_refused_by_name(
    redis: RedisServer, password: str | None
) -> None:
    auth = HttpAuth(password=password, prefix=REDIS_PREFIX)
    with pytest.raises(ViewUnavailable) as info:
        RedisCache(redis.url, "sec", auth).check()
    text = str(info.value)
    assert f"Redis at {redis.url} refused the login" in text and "REDIS_PASSWORD" in text
    assert REDIS_PASSWORD not in text and WRONG not in text


def test_redis_tls_without_the_ca_is_refused_naming_redis_ca_file(redis: RedisServer) -> None:
    auth = HttpAuth(password=REDIS_PASSWORD, prefix=REDIS_PREFIX)
    with pytest.raises(ViewUnavailable, match=r"TLS handshake failed.*set REDIS_CA_FILE") as info:
        RedisCache(redis.tls_url, "sec", auth).check()
    assert REDIS_PASSWORD not in str(info.value)


def test_settings_naming_a_missing_ca_file_are_refused_at_load(tmp_path: Path) -> None:
    from kafkakit.errors import HttpAuthInvalid

    missing = tmp_path / "nope.pem"
    for name in ("KAFKA_CONNECT_CA_FILE", "SCHEMA_REGISTRY_CLIENT_CERT", "REDIS_CA_FILE"):
        with pytest.raises(HttpAuthInvalid, match=f"{name} names {missing}, which is not a readable file"):
            Endpoints.from_env({name: str(missing)})
