"""Test-owned secured services for the security tests (security_helpers), one of each per module;
the test module names the credentials they require (`USER`, `HTTP_PASSWORD`, `REDIS_PASSWORD`)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from security_helpers import Pki, RedisServer, https_server, make_pki, redis_server


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def https(pki: Pki, request: pytest.FixtureRequest) -> Iterator[str]:
    """An HTTPS server asking for the module's USER and HTTP_PASSWORD (basic auth)."""
    with https_server(pki, request.module.USER, request.module.HTTP_PASSWORD) as url:
        yield url


@pytest.fixture(scope="module")
def redis(
    tmp_path_factory: pytest.TempPathFactory, pki: Pki, request: pytest.FixtureRequest
) -> Iterator[RedisServer]:
    """A redis-server whose `requirepass` is the module's REDIS_PASSWORD (a plain and a TLS port)."""
    with redis_server(tmp_path_factory.mktemp("redis"), request.module.REDIS_PASSWORD, pki) as found:
        yield found
