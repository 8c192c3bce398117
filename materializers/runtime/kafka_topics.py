"""The materializers' Kafka topics: an input topic's partitions, and the dead-letter topic created
when missing.

Guarantees: nothing here creates the input topic; asking for a topic that does not exist is a
`SourceUnavailable` naming it and the fix.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

from kafkakit.clients import admin_client, make_consumer
from kafkakit.limits import DEAD_LETTER_MAX_RECORD_BYTES
from materializers.errors import SourceUnavailable

if TYPE_CHECKING:
    from confluent_kafka import Consumer

    from kafkakit.client_config import KafkaClientConfig


def topic_partitions(
    bootstrap: str, topic: str, *, client_config: KafkaClientConfig | None = None
) -> list[int]:
    consumer = metadata_consumer(bootstrap, client_config)
    try:
        return partitions_of(consumer, bootstrap, topic)
    finally:
        consumer.close()


def metadata_consumer(bootstrap: str, client_config: KafkaClientConfig | None) -> Consumer:
    """A consumer for a topic's metadata and offsets. Not an admin client: an admin client lists
    every topic of the cluster (a share of every start, more with a cluster's thousands of topics), and
    its handle is a producer's, whose request for one topic may have the broker create it; a
    consumer's never does."""
    return make_consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"materializers-meta-{uuid.uuid4().hex}",
            "enable.auto.commit": False,  # it reads, it never stands for a group's progress
        },
        client_config=client_config,
    )


def partitions_of(consumer: Consumer, bootstrap: str, topic: str) -> list[int]:
    """The input topic's partitions; SourceUnavailable when it does not exist."""
    found = consumer.list_topics(topic, timeout=10).topics.get(topic)
    if found is None or found.error is not None:
        raise SourceUnavailable(
            f"input topic {topic!r} does not exist on {bootstrap}; create it or pass --topic"
        )
    return sorted(found.partitions)


def ensure_topic(bootstrap: str, topic: str, *, client_config: KafkaClientConfig | None = None) -> None:
    """Create the dead-letter topic if missing (this broker does not auto-create topics)."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import NewTopic  # type: ignore[attr-defined]

    with admin_client({"bootstrap.servers": bootstrap}, client_config=client_config) as admin:
        if topic in admin.list_topics(timeout=10).topics:
            return
        try:
            # A dead letter carries its source record whole: the topic takes records as large as CDC's.
            config = {"max.message.bytes": str(DEAD_LETTER_MAX_RECORD_BYTES)}
            # -1: the cluster's default.replication.factor
            admin.create_topics([NewTopic(topic, 1, -1, config=config)])[topic].result(timeout=30)
        except KafkaException as exc:
            if "TOPIC_ALREADY_EXISTS" not in str(exc):
                raise SourceUnavailable(f"cannot create dead-letter topic {topic!r}: {exc}") from exc
