"""Frozen settings for one event store; `from_env` is the only place the environment is read.

Precedence: CLI flags (`with_overrides`) > environment > defaults.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

from eventstore.dedup import DEFAULT_MAX_OUTCOMES, DEFAULT_WINDOW_MS
from eventstore.errors import EventStoreError
from kafkakit.client_config import PLAINTEXT, KafkaClientConfig
from kafkakit.http_auth import NO_REGISTRY_AUTH, HttpAuth, check_url
from kafkakit.settings import Endpoints

NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,200}$")


# A processor's open transaction must outlive a broker failover (a dead broker is noticed after
# broker.session.timeout.ms, 9 s by default, then leaders move): shorter, the coordinator aborts it and
# fences the processor.
DEFAULT_TRANSACTION_TIMEOUT_MS = 60_000


@dataclass(frozen=True, slots=True, kw_only=True)
class StoreConfig:
    """`name` prefixes the store's topics (`<name>.events`, ...), hence its registry subjects
    (`<topic>-<record full name>`, subjects.py)."""

    name: str = "orders"
    bootstrap_servers: str = Endpoints().kafka_bootstrap_servers
    schema_registry_url: str = Endpoints().schema_registry_url
    # The security settings of every Kafka client the store builds (KAFKA_CLIENT_CONFIG, KAFKA_CLIENT_*)
    kafka_client: KafkaClientConfig = PLAINTEXT
    # How the registry client logs in and verifies TLS (SCHEMA_REGISTRY_USERNAME, ..., kafkakit.http_auth)
    schema_registry_auth: HttpAuth = NO_REGISTRY_AUTH
    partitions: int = 6
    # None: the cluster's default.replication.factor (the brokers' min.insync.replicas applies too)
    replication_factor: int | None = None
    snapshot_every: int = 50
    # A takeover reads about this many event records per partition beyond the snapshots: streams that
    # pin older offsets get a fresh snapshot (takeover.py). 0 disables those extra snapshots.
    rebuild_window: int = 10_000
    transaction_timeout_ms: int = DEFAULT_TRANSACTION_TIMEOUT_MS
    reply_timeout_s: float = 30.0
    # How long, and for how many command ids, a retry gets its first outcome back (dedup.py); the
    # outcomes topic keeps the same window.
    dedup_window_ms: int = DEFAULT_WINDOW_MS
    dedup_max_outcomes: int = DEFAULT_MAX_OUTCOMES
    dlq_topic: str | None = None

    def __post_init__(self) -> None:
        check_url(self.schema_registry_auth, self.schema_registry_url, "SCHEMA_REGISTRY_URL")
        if not NAME.match(self.name):
            raise EventStoreError(
                f"store name {self.name!r} is not a valid topic prefix; use letters, digits, '.', '_', '-'"
            )
        if (
            self.partitions < 1
            or (self.replication_factor is not None and self.replication_factor < 1)
            or self.snapshot_every < 0
            or self.rebuild_window < 0
            or self.dedup_window_ms < 1
            or self.dedup_max_outcomes < 1
        ):
            raise EventStoreError(
                "partitions and replication_factor must be >= 1, snapshot_every >= 0 (0 disables snapshots), "
                "rebuild_window >= 0 (0: no extra snapshots for idle streams), dedup_window_ms and "
                "dedup_max_outcomes >= 1"
            )

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> StoreConfig:
        env = os.environ if environ is None else environ
        endpoints = Endpoints.from_env(env)
        found: dict[str, Any] = {
            "bootstrap_servers": endpoints.kafka_bootstrap_servers,
            "schema_registry_url": endpoints.schema_registry_url,
            "kafka_client": endpoints.kafka_client,
            "schema_registry_auth": endpoints.schema_registry_auth,
        }
        for attr, name, kind in (
            ("name", "EVENTSTORE_NAME", str),
            ("partitions", "EVENTSTORE_PARTITIONS", int),
            ("replication_factor", "EVENTSTORE_REPLICATION_FACTOR", int),
            ("snapshot_every", "EVENTSTORE_SNAPSHOT_EVERY", int),
            ("rebuild_window", "EVENTSTORE_REBUILD_WINDOW", int),
            ("transaction_timeout_ms", "EVENTSTORE_TRANSACTION_TIMEOUT_MS", int),
            ("reply_timeout_s", "EVENTSTORE_REPLY_TIMEOUT_S", float),
            ("dedup_window_ms", "EVENTSTORE_DEDUP_WINDOW_MS", int),
            ("dedup_max_outcomes", "EVENTSTORE_DEDUP_MAX_OUTCOMES", int),
            ("dlq_topic", "EVENTSTORE_DLQ_TOPIC", str),
        ):
            if env.get(name):
                try:
                    found[attr] = kind(env[name])
                except ValueError:
                    raise EventStoreError(f"{name}={env[name]!r} is not a valid {kind.__name__}") from None
        return cls(**found)

    def as_env(self) -> dict[str, str]:
        """This config as the environment `from_env` reads (for an `eventstore` CLI subprocess; it holds
        the Kafka client's and the registry's passwords, if any: never print it)."""
        env = {
            "KAFKA_BOOTSTRAP_SERVERS": self.bootstrap_servers,
            "SCHEMA_REGISTRY_URL": self.schema_registry_url,
            "EVENTSTORE_NAME": self.name,
            "EVENTSTORE_PARTITIONS": str(self.partitions),
            "EVENTSTORE_SNAPSHOT_EVERY": str(self.snapshot_every),
            "EVENTSTORE_REBUILD_WINDOW": str(self.rebuild_window),
            "EVENTSTORE_TRANSACTION_TIMEOUT_MS": str(self.transaction_timeout_ms),
            "EVENTSTORE_REPLY_TIMEOUT_S": str(self.reply_timeout_s),
            "EVENTSTORE_DEDUP_WINDOW_MS": str(self.dedup_window_ms),
            "EVENTSTORE_DEDUP_MAX_OUTCOMES": str(self.dedup_max_outcomes),
        }
        optional = {
            "EVENTSTORE_DLQ_TOPIC": self.dlq_topic,
            "EVENTSTORE_REPLICATION_FACTOR": self.replication_factor,
        }
        return (
            env
            | {k: str(v) for k, v in optional.items() if v}
            | self.kafka_client.as_env()
            | self.schema_registry_auth.as_env()
        )

    def with_overrides(self, **flags: Any) -> StoreConfig:
        """Apply CLI flags (None = not given) over env and defaults."""
        known = {f.name for f in fields(self)}
        unknown = set(flags) - known
        if unknown:
            raise EventStoreError(f"unknown store setting(s) {sorted(unknown)}; known: {sorted(known)}")
        return replace(self, **{k: v for k, v in flags.items() if v is not None})

    @property
    def events_topic(self) -> str:
        return f"{self.name}.events"

    @property
    def commands_topic(self) -> str:
        return f"{self.name}.commands"

    @property
    def replies_topic(self) -> str:
        return f"{self.name}.replies"

    @property
    def outcomes_topic(self) -> str:
        return f"{self.name}.outcomes"

    @property
    def snapshots_topic(self) -> str:
        return f"{self.name}.snapshots"

    @property
    def processor_group(self) -> str:
        return f"{self.name}.processor"
