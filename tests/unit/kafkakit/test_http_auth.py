"""Login and TLS settings of Connect, the registry and Redis, apart from URLs (pure, but for files)."""

from __future__ import annotations

import ssl
from pathlib import Path

import httpx
import pytest

from kafkakit.errors import HttpAuthInvalid
from kafkakit.http_auth import (
    CONNECT_PREFIX,
    REDIS_PREFIX,
    REGISTRY_PREFIX,
    HttpAuth,
    access_problem,
    httpx_options,
    redis_options,
)
from kafkakit.settings import Endpoints

SECRET = "Sekr1t-http-pw"


def test_from_env_reads_the_prefixed_variables_and_masks_secrets(tmp_path: Path) -> None:
    ca = tmp_path / "ca.pem"
    ca.write_text("x")
    env = {
        "KAFKA_CONNECT_USERNAME": " admin ",
        "KAFKA_CONNECT_PASSWORD": f" {SECRET} ",
        "SCHEMA_REGISTRY_TOKEN": SECRET,
        "SCHEMA_REGISTRY_CA_FILE": str(ca),
        "SCHEMA_REGISTRY_URL": "https://registry:8443/apis/ccompat/v7",
    }
    ep = Endpoints.from_env(env)
    assert ep.kafka_connect_auth.username == "admin"
    assert ep.kafka_connect_auth.password == f" {SECRET} "  # a password keeps its blanks
    assert ep.schema_registry_auth.token == SECRET and ep.schema_registry_auth.ca_file == str(ca)
    assert SECRET not in repr(ep) and SECRET not in str(ep.kafka_connect_auth)
    assert Endpoints.from_env(ep.as_env()) == ep  # a child process gets the same settings


def test_redis_takes_no_token() -> None:
    auth = HttpAuth.from_env(
        REDIS_PREFIX, {"REDIS_TOKEN": "t", "REDIS_PASSWORD": "p", "REDIS_USERNAME": "u"}, token=False
    )
    assert auth.token is None and redis_options(auth) == {"username": "u", "password": "p"}


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"KAFKA_CONNECT_USERNAME": "a"}, "KAFKA_CONNECT_USERNAME is set without KAFKA_CONNECT_PASSWORD"),
        ({"KAFKA_CONNECT_PASSWORD": SECRET}, "KAFKA_CONNECT_PASSWORD is set without KAFKA_CONNECT_USERNAME"),
        (
            {"KAFKA_CONNECT_TOKEN": SECRET, "KAFKA_CONNECT_USERNAME": "a", "KAFKA_CONNECT_PASSWORD": SECRET},
            "keep one way to log in",
        ),
        ({"KAFKA_CONNECT_CLIENT_KEY": "/k.pem"}, "not a readable file|without KAFKA_CONNECT_CLIENT_CERT"),
        (
            {"SCHEMA_REGISTRY_CA_FILE": "/nonexistent/ca.pem"},
            "SCHEMA_REGISTRY_CA_FILE names /nonexistent/ca.pem",
        ),
    ],
)
def test_inconsistent_or_missing_settings_are_refused_by_name(env: dict[str, str], message: str) -> None:
    with pytest.raises(HttpAuthInvalid, match=message) as info:
        Endpoints.from_env(env)
    assert SECRET not in str(info.value)


def test_credentials_in_the_url_keep_working_and_must_agree_with_the_variables() -> None:
    env = {"KAFKA_CONNECT_URL": f"https://admin:{SECRET}@connect:8083"}
    assert Endpoints.from_env(env).kafka_connect_auth == HttpAuth()
    same = env | {"KAFKA_CONNECT_USERNAME": "admin", "KAFKA_CONNECT_PASSWORD": SECRET}
    assert Endpoints.from_env(same).kafka_connect_auth.username == "admin"
    other = env | {"KAFKA_CONNECT_USERNAME": "admin", "KAFKA_CONNECT_PASSWORD": "other"}
    with pytest.raises(HttpAuthInvalid, match=r"KAFKA_CONNECT_URL .* carries the user 'admin'") as info:
        Endpoints.from_env(other)
    assert SECRET not in str(info.value) and "other" not in str(info.value).replace("other credentials", "")
    with pytest.raises(HttpAuthInvalid, match="KAFKA_CONNECT_TOKEN a bearer token"):
        Endpoints.from_env(env | {"KAFKA_CONNECT_TOKEN": "t"})
    with pytest.raises(HttpAuthInvalid, match="carries the user"):  # a flag is checked too
        Endpoints.from_env(same).with_overrides(kafka_connect_url="https://bob:x@connect:8083")


def test_tls_files_with_a_plain_url_are_refused(tmp_path: Path) -> None:
    ca = tmp_path / "ca.pem"
    ca.write_text("x")
    with pytest.raises(
        HttpAuthInvalid, match=r"REDIS_CA_FILE set, but REDIS_URL is a redis:// URL.*rediss://"
    ):
        Endpoints.from_env({"REDIS_CA_FILE": str(ca)})
    with pytest.raises(HttpAuthInvalid, match=r"SCHEMA_REGISTRY_CA_FILE set, .* http:// URL.*https://"):
        Endpoints.from_env({"SCHEMA_REGISTRY_CA_FILE": str(ca)})
    ok = Endpoints.from_env({"REDIS_CA_FILE": str(ca), "REDIS_URL": "rediss://cache:6380/0"})
    assert redis_options(ok.redis_auth) == {"ssl_ca_certs": str(ca)}


def test_httpx_options_carry_basic_or_bearer_auth() -> None:
    basic = httpx_options(HttpAuth(username="u", password=SECRET))["auth"]
    request = next(basic.auth_flow(httpx.Request("GET", "https://x/")))
    assert request.headers["Authorization"].startswith("Basic ")
    bearer = httpx_options(HttpAuth(token=SECRET))["auth"]
    assert bearer(httpx.Request("GET", "https://x/")).headers["Authorization"] == f"Bearer {SECRET}"
    assert SECRET not in repr(bearer)
    assert httpx_options(HttpAuth()) == {}


def test_a_ca_file_is_loaded_into_the_ssl_context(tmp_path: Path) -> None:
    ca = tmp_path / "ca.pem"
    ca.write_text("not a certificate\n")
    with pytest.raises(ssl.SSLError):  # the context loads the file (a real one: the integration test)
        httpx_options(HttpAuth(ca_file=str(ca)))


def test_refusal_messages_name_service_settings_and_fix_without_secrets() -> None:
    auth = HttpAuth(username="admin", password=SECRET, prefix=CONNECT_PREFIX)
    url = f"https://admin:{SECRET}@c:8083"
    text = str(access_problem("Kafka Connect", url, auth, status=401))
    assert "Kafka Connect at https://admin:***@c:8083 refused the login (HTTP 401)" in text
    assert "KAFKA_CONNECT_USERNAME / KAFKA_CONNECT_PASSWORD" in text and SECRET not in text
    token = HttpAuth(token=SECRET, prefix=REGISTRY_PREFIX)
    assert "SCHEMA_REGISTRY_TOKEN" in str(access_problem("the registry", "https://r", token, status=403))
    assert access_problem("the registry", "https://r", token, status=500) is None
    assert access_problem("the registry", "https://r", token, error=httpx.ConnectError("refused")) is None


def test_a_tls_error_behind_a_wrapper_is_a_tls_refusal() -> None:
    auth = HttpAuth(prefix=REGISTRY_PREFIX)
    try:
        try:
            raise ssl.SSLCertVerificationError(
                1, "[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed"
            )
        except ssl.SSLError as inner:
            raise httpx.ConnectError("wrapped") from inner
    except httpx.ConnectError as exc:
        refused = access_problem("the registry", "https://r", auth, error=exc)
    assert "TLS handshake failed" in str(refused) and "set SCHEMA_REGISTRY_CA_FILE to the PEM file" in str(
        refused
    )
