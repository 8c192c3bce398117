"""The store's topics, their configs, and which partition a stream lives in.

Every per-stream topic (commands, events, snapshots, outcomes) has the same partition count and a stream
always maps to the same partition number in each, so the processor owning command partition P owns
stream state, snapshots and dedup memory in partition P of the other topics too. The partitioner is
Java-compatible murmur2, so JVM consumers (Spark) agree on where a key lives.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic  # type: ignore[attr-defined]

from eventstore.config import StoreConfig
from eventstore.errors import TopicSetupError
from kafkakit.clients import admin_client
from kafkakit.replication import replication_problem

# Replication and min.insync.replicas are the cluster's (`default.replication.factor`,
# `min.insync.replicas` on the brokers) unless the store's config names a replication factor: a store
# initialised on one broker and one on three then need no different code, and a per-topic
# min.insync.replicas=1 can never weaken a cluster's durability.
BROKER_DEFAULT = -1


@dataclass(frozen=True, slots=True)
class TopicSpec:
    name: str
    partitions: int
    config: dict[str, str]
    per_stream: bool = True  # partition count is part of the stream -> partition mapping


def murmur2(data: bytes) -> int:
    """Kafka's Java `Utils.murmur2` (unsigned 32-bit result)."""
    m, r, mask = 0x5BD1E995, 24, 0xFFFFFFFF
    length = len(data)
    h = (0x9747B28C ^ length) & mask
    for i in range(0, length - length % 4, 4):
        k = int.from_bytes(data[i : i + 4], "little")
        k = (k * m) & mask
        k ^= k >> r
        k = (k * m) & mask
        h = ((h * m) & mask) ^ k
    tail = length - length % 4
    extra = length % 4
    if extra >= 3:
        h ^= data[tail + 2] << 16
    if extra >= 2:
        h ^= data[tail + 1] << 8
    if extra >= 1:
        h ^= data[tail]
        h = (h * m) & mask
    h ^= h >> 13
    h = (h * m) & mask
    h ^= h >> 15
    return h


@lru_cache(maxsize=1 << 16)
def partition_for(stream_id: str, partitions: int) -> int:
    # Cached: murmur2 in Python was a visible share of the processor's time, and a stream's commands
    # repeat its id.
    return (murmur2(stream_id.encode()) & 0x7FFFFFFF) % partitions


def specs(config: StoreConfig) -> tuple[TopicSpec, ...]:
    n = config.partitions
    append_only = {"cleanup.policy": "delete", "retention.ms": "-1"}
    compacted = {"cleanup.policy": "compact"}
    # The dedup memory's window (dedup.py): older outcomes are deleted, not only compacted.
    windowed = {"cleanup.policy": "compact,delete", "retention.ms": str(config.dedup_window_ms)}
    transient = {"cleanup.policy": "delete", "retention.ms": str(7 * 24 * 3600 * 1000)}
    dlq = (TopicSpec(config.dlq_topic, 1, append_only, per_stream=False),) if config.dlq_topic else ()
    return (
        *dlq,
        TopicSpec(config.events_topic, n, append_only),
        TopicSpec(config.commands_topic, n, transient),
        TopicSpec(config.replies_topic, n, transient),
        TopicSpec(config.outcomes_topic, n, windowed),
        TopicSpec(config.snapshots_topic, n, compacted),
    )


def ensure_topics(config: StoreConfig, timeout: float = 30.0) -> list[tuple[str, str]]:
    """Create missing topics; verify existing ones. Returns (topic, 'created'|'exists') pairs."""
    with admin_client(
        {"bootstrap.servers": config.bootstrap_servers}, client_config=config.kafka_client
    ) as admin:
        try:
            existing = admin.list_topics(timeout=timeout).topics
        except KafkaException as exc:
            raise TopicSetupError(
                f"cannot list topics at {config.bootstrap_servers} ({exc}); check KAFKA_BOOTSTRAP_SERVERS"
            ) from exc
        wanted = specs(config)
        missing = [s for s in wanted if s.name not in existing]
        too_many = replication_problem(
            config.replication_factor,
            len(admin.list_topics(timeout=timeout).brokers),
            "EVENTSTORE_REPLICATION_FACTOR (--replication-factor)",
        )
        if missing and too_many:
            raise TopicSetupError(f"no topic of store {config.name!r} was created: {too_many}")
        replication = config.replication_factor or BROKER_DEFAULT
        futures = (
            admin.create_topics(
                [NewTopic(s.name, s.partitions, replication, config=s.config) for s in missing],
                operation_timeout=timeout,
            )
            if missing
            else {}
        )
        for name, future in futures.items():
            try:
                future.result()
            except KafkaException as exc:
                if "TOPIC_ALREADY_EXISTS" not in str(exc):
                    raise TopicSetupError(f"creating topic {name} failed: {exc}") from exc
        report = []
        for spec in wanted:
            found = (
                _verify(admin, spec, len(existing[spec.name].partitions), timeout)
                if spec.name in existing
                else "created"
            )
            report.append((spec.name, found))
        return report


def _verify(admin: AdminClient, spec: TopicSpec, partitions: int, timeout: float) -> str:
    """ "exists", or "updated" when only the dedup window's settings differed (set to the config's)."""
    if spec.per_stream and partitions != spec.partitions:
        raise TopicSetupError(
            f"topic {spec.name} has {partitions} partitions but the store expects {spec.partitions}; "
            f"streams would move partitions — use --partitions {partitions} or a new store name"
        )
    resource = ConfigResource(ConfigResource.Type.TOPIC, spec.name)
    found = admin.describe_configs([resource])[resource].result(timeout=timeout)
    policy = found["cleanup.policy"].value
    if _windowed(spec) and policy in ("compact", spec.config["cleanup.policy"]):
        return _align_window(admin, spec, found, timeout)
    if policy != spec.config["cleanup.policy"]:
        raise TopicSetupError(
            f"topic {spec.name} has cleanup.policy={policy}, expected {spec.config['cleanup.policy']}; "
            "fix it with kafka-configs or choose a new store name"
        )
    return "exists"


def _windowed(spec: TopicSpec) -> bool:
    return "delete" in spec.config["cleanup.policy"] and "compact" in spec.config["cleanup.policy"]


def _align_window(admin: AdminClient, spec: TopicSpec, found: dict[str, Any], timeout: float) -> str:
    """The outcomes topic follows the dedup window: a store made before the window existed
    (`compact` only) or with another window gets the config's, as `init` runs again."""
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry  # type: ignore[attr-defined]

    changed = [k for k in ("cleanup.policy", "retention.ms") if found[k].value != spec.config[k]]
    if not changed:
        return "exists"
    entries = [ConfigEntry(k, spec.config[k], incremental_operation=AlterConfigOpType.SET) for k in changed]
    resource = ConfigResource(ConfigResource.Type.TOPIC, spec.name, incremental_configs=entries)
    try:
        admin.incremental_alter_configs([resource])[resource].result(timeout=timeout)
    except KafkaException as exc:
        raise TopicSetupError(f"updating {', '.join(changed)} of topic {spec.name} failed: {exc}") from exc
    return "updated"
