"""A replication factor asked for must fit the cluster: checked before any topic is created, since Kafka
refuses each topic on its own and a set of topics would be left half-created."""

from __future__ import annotations

from kafkakit.client_config import KafkaClientConfig
from kafkakit.clients import admin_client


def replication_problem(replication_factor: int | None, live_brokers: int, setting: str) -> str | None:
    """Why `replication_factor` (None: the brokers' default) cannot be placed on `live_brokers`, if so."""
    if replication_factor is None or replication_factor <= live_brokers:
        return None
    return (
        f"{setting}={replication_factor} asks for more replicas than the {live_brokers} broker(s) alive in "
        f"the cluster, so Kafka would refuse every topic; set it to at most {live_brokers}, or leave it unset "
        "to get the brokers' default.replication.factor"
    )


def live_brokers(
    bootstrap: str, timeout: float = 30.0, *, client_config: KafkaClientConfig | None = None
) -> int:
    with admin_client({"bootstrap.servers": bootstrap}, client_config=client_config) as admin:
        return len(admin.list_topics(timeout=timeout).brokers)
