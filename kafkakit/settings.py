"""Endpoint settings shared by all three packages.

The environment is read only in `Endpoints.from_env`; CLI flags override it through `with_overrides`.
Kafka's address comes with the security settings every Kafka client is built with (`kafka_client`,
kafkakit.client_config: KAFKA_CLIENT_CONFIG and KAFKA_CLIENT_*).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, replace

from kafkakit.client_config import PLAINTEXT, KafkaClientConfig
from kafkakit.errors import ConfigError

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

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Endpoints:
        env = os.environ if environ is None else environ
        found = {attr: env[name] for attr, name in ENV_NAMES.items() if env.get(name)}
        return cls(**found, kafka_client=KafkaClientConfig.from_env(env))

    def with_overrides(self, **flags: str | None) -> Endpoints:
        """Apply CLI flags (None = not given) over env and defaults."""
        known = set(ENV_NAMES)  # string settings only; the Kafka client config comes from from_env
        unknown = set(flags) - known
        if unknown:
            raise ConfigError(f"unknown endpoint setting(s) {sorted(unknown)}; known: {sorted(known)}")
        given: dict[str, str] = {k: v for k, v in flags.items() if v is not None}
        return replace(self, **given)  # type: ignore[arg-type]  # every key is a str field (ENV_NAMES)

    def as_env(self) -> dict[str, str]:
        """The variables `from_env` reads back (for a child process; the Kafka client's passwords
        included, so never printed)."""
        return {name: getattr(self, attr) for attr, name in ENV_NAMES.items()} | self.kafka_client.as_env()
