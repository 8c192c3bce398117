"""Kafka plumbing shared by cdc, eventstore and materializers: settings, start positions, errors,
the client builders (librdkafka's lines into Python logging) and the CLIs' logging setup.

Public API (imported on first use, so `import kafkakit.errors` loads no Kafka client):

    >>> from kafkakit import Endpoints, parse_start, make_consumer
    >>> endpoints = Endpoints.from_env()          # KAFKA_BOOTSTRAP_SERVERS, SCHEMA_REGISTRY_URL, ...
    >>> parse_start("0:42,1:7")                    # earliest | latest | P:N,... | JSON | ISO time
    Offsets(by_partition=((None, 0, 42), (None, 1, 7)))
    >>> consumer = make_consumer({"bootstrap.servers": endpoints.kafka_bootstrap_servers,
    ...                           "group.id": "mine"})  # librdkafka's log lines go to `logging`

- `Endpoints`: where the services answer (`from_env`, `with_overrides`, `as_env`), with
  `kafka_client`, the `KafkaClientConfig` (SASL/TLS from KAFKA_CLIENT_CONFIG and KAFKA_CLIENT_*) every
  Kafka client is built with: `make_consumer(settings, client_config=endpoints.kafka_client)`.
- `StartPosition` (`Edge` | `Offsets` | `Timestamp`) and its parsers: where to start reading a topic.
- `make_producer`, `make_consumer`, `make_admin`, `admin_client`: confluent-kafka clients that log
  through Python logging; `configure_cli_logging` for a command line's stderr.
- `ToolkitError`, the root of every error the toolkit raises on purpose; `ConfigError`,
  `BadStartPosition`, `KafkaAccessRefused` (a refused login or broker certificate).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kafkakit.errors import BadStartPosition, ConfigError, KafkaAccessRefused, ToolkitError
from kafkakit.exports import lazy_exports

__all__ = [
    "BadStartPosition",
    "ConfigError",
    "Edge",
    "Endpoints",
    "KafkaAccessRefused",
    "KafkaClientConfig",
    "Offsets",
    "StartPosition",
    "Timestamp",
    "ToolkitError",
    "admin_client",
    "configure_cli_logging",
    "make_admin",
    "make_consumer",
    "make_producer",
    "parse_partition_offsets",
    "parse_start",
    "parse_timestamp",
]

if TYPE_CHECKING:
    from kafkakit.client_config import KafkaClientConfig
    from kafkakit.clients import admin_client, make_admin, make_consumer, make_producer
    from kafkakit.logs import configure_cli_logging
    from kafkakit.positions import (
        Edge,
        Offsets,
        StartPosition,
        Timestamp,
        parse_partition_offsets,
        parse_start,
        parse_timestamp,
    )
    from kafkakit.settings import Endpoints

__getattr__, __dir__ = lazy_exports(
    __name__,
    __all__,
    {
        "kafkakit.client_config": ("KafkaClientConfig",),
        "kafkakit.clients": ("admin_client", "make_admin", "make_consumer", "make_producer"),
        "kafkakit.logs": ("configure_cli_logging",),
        "kafkakit.positions": (
            "Edge",
            "Offsets",
            "StartPosition",
            "Timestamp",
            "parse_partition_offsets",
            "parse_start",
            "parse_timestamp",
        ),
        "kafkakit.settings": ("Endpoints",),
    },
)
