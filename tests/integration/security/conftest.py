"""Test-owned secured services for the security tests (security_helpers), one of each per module;
the test module names the credentials they require (`USER`, `HTTP_PASSWORD`, `REDIS_PASSWORD`).
`secure_pg_dsn`: the local stack's password-only Postgres role."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from security_helpers import Pki, RedisServer, https_server, make_pki, redis_server

from devstack.session import StackHandle


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


@pytest.fixture(scope="module")
def secure_pg_dsn(stack: StackHandle) -> str:
    """PG_SECURE_DSN of the local stack: the role that must log in with its password
    (devstack.postgres_auth); skipped on the other backends, which have no such role."""
    from devstack.config import StackConfig
    from devstack.postgres_auth import SECURE_DSN_ENV
    from devstack.stack import read_env

    config = StackConfig.from_env()
    if not stack.backend.startswith("local"):
        pytest.skip(f"no password-only Postgres role on this stack ({stack.backend}): the local stack has it")
    found = read_env(config.env_file).get(SECURE_DSN_ENV) if config.env_file.exists() else None
    if not found:  # a local stack whose env predates the role: not a pass
        pytest.fail(f"{config.env_file} has no {SECURE_DSN_ENV}: run `devstack up` (it adds the role)")
    return found
