"""Endpoint settings shared by all three packages.

The environment is read only in `Endpoints.from_env`; CLI flags override it through `with_overrides`.
Kafka's address comes with the security settings every Kafka client is built with (`kafka_client`,
kafkakit.client_config: KAFKA_CLIENT_CONFIG and KAFKA_CLIENT_*); Connect's, the registry's and Redis's
with their login and TLS settings (`*_auth`, kafkakit.http_auth: KAFKA_CONNECT_USERNAME, ...), checked
against their URLs whenever an Endpoints is made (flags included).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, replace

from kafkakit.client_config import PLAINTEXT, KafkaClientConfig
from kafkakit.errors import ConfigError
from kafkakit.http_auth import (
    CONNECT_PREFIX,
    NO_CONNECT_AUTH,
    NO_REDIS_AUTH,
    NO_REGISTRY_AUTH,
    REDIS_PREFIX,
    REGISTRY_PREFIX,
    HttpAuth,
    check_url,
)

ENV_NAMES = {
    "kafka_bootstrap_servers": "KAFKA_BOOTSTRAP_SERVERS",
    "kafka_connect_url": "KAFKA_CONNECT_URL",
    "pg_dsn": "PG_DSN",
    "redis_url": "REDIS_URL",
    "schema_registry_url": "SCHEMA_REGISTRY_URL",
}


@dataclass(frozen=True, slots=True, kw_only=True)
class Endpoints:
    """Where the five services answer. Defaults are the local stack's default ports."""

    kafka_bootstrap_servers: str = "127.0.0.1:19092"
    kafka_connect_url: str = "http://127.0.0.1:18083"
    pg_dsn: str = "postgresql://postgres@127.0.0.1:55432/postgres"
    redis_url: str = "redis://127.0.0.1:16379/0"
    schema_registry_url: str = "http://127.0.0.1:18080/apis/ccompat/v7"
    # How every Kafka client (confluent-kafka's and Spark's) authenticates and encrypts
    kafka_client: KafkaClientConfig = PLAINTEXT
    # How the HTTP and Redis clients log in and verify TLS, besides what their URLs carry
    kafka_connect_auth: HttpAuth = NO_CONNECT_AUTH
    schema_registry_auth: HttpAuth = NO_REGISTRY_AUTH
    redis_auth: HttpAuth = NO_REDIS_AUTH

    def __post_init__(self) -> None:
        check_url(self.kafka_connect_auth, self.kafka_connect_url, "KAFKA_CONNECT_URL (--connect-url)")
        check_url(self.schema_registry_auth, self.schema_registry_url, "SCHEMA_REGISTRY_URL (--registry-url)")
        check_url(self.redis_auth, self.redis_url, "REDIS_URL")

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Endpoints:
        env = os.environ if environ is None else environ
        found = {attr: env[name] for attr, name in ENV_NAMES.items() if env.get(name)}
        return cls(
            **found,
            kafka_client=KafkaClientConfig.from_env(env),
            kafka_connect_auth=HttpAuth.from_env(CONNECT_PREFIX, env),
            schema_registry_auth=HttpAuth.from_env(REGISTRY_PREFIX, env),
            redis_auth=HttpAuth.from_env(REDIS_PREFIX, env, token=False),
        )

    def with_overrides(self, **flags: str | None) -> Endpoints:
        """Apply CLI flags (None = not given) over env and defaults."""
        known = set(ENV_NAMES)  # string settings only; the client configs and auths come from from_env
        unknown = set(flags) - known
        if unknown:
            raise ConfigError(f"unknown endpoint setting(s) {sorted(unknown)}; known: {sorted(known)}")
        given: dict[str, str] = {k: v for k, v in flags.items() if v is not None}
        return replace(self, **given)  # type: ignore[arg-type]  # every key is a str field (ENV_NAMES)

    def as_env(self) -> dict[str, str]:
        """The variables `from_env` reads back (for a child process; the passwords included, so never
        printed)."""
        return (
            {name: getattr(self, attr) for attr, name in ENV_NAMES.items()}
            | self.kafka_client.as_env()
            | self.kafka_connect_auth.as_env()
            | self.schema_registry_auth.as_env()
            | self.redis_auth.as_env()
        )
