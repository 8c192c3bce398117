"""Replication-slot and connector health: how much WAL each slot pins, and whether anyone reads it.

A slot keeps every WAL segment since its `restart_lsn`; an inactive or stuck slot fills the disk.
`collect` reads pg_replication_slots (retained = pg_current_wal_lsn() - restart_lsn), each Debezium
Postgres connector's status and topics on Connect, and the topics' end offsets; `assess` (pure) turns
that into warnings: retained WAL past the threshold, an inactive slot, a connector not RUNNING, a
connector whose slot is missing, slots no connector uses (drop them with pg_drop_replication_slot),
and change records set aside for being over the size limit (the markers on the connector's
`<topic_prefix>.oversize` topic, written by the toolkit's OversizeRouter transform).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import psycopg

from cdc.connect_client import ConnectClient, ConnectorStatus
from cdc.connector_spec import OVERSIZE_TRANSFORM, POSTGRES_CONNECTOR_CLASS
from cdc.schema_refusal import explained_cause
from kafkakit.client_config import KafkaClientConfig
from kafkakit.clients import make_consumer
from kafkakit.http_auth import NO_REGISTRY_AUTH, HttpAuth

DEFAULT_RETAINED_WAL_WARN_BYTES = 1024**3


@dataclass(frozen=True, slots=True, kw_only=True)
class SlotInfo:
    slot_name: str
    plugin: str | None
    active: bool
    wal_status: str | None
    retained_bytes: int | None
    unconfirmed_bytes: int | None


@dataclass(frozen=True, slots=True, kw_only=True)
class TopicEnd:
    topic: str
    partition: int
    end_offset: int


@dataclass(frozen=True, slots=True, kw_only=True)
class ConnectorHealth:
    name: str
    slot_name: str
    status: ConnectorStatus
    slot: SlotInfo | None
    topic_ends: tuple[TopicEnd, ...]
    oversize_topic: str | None = None
    # Markers ever written there: each one a change record not delivered to its topic.
    oversize_records: int = 0
    # Why the connector or a task FAILED (`cdc.failures`), None while nothing failed.
    failure_cause: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class HealthReport:
    connectors: tuple[ConnectorHealth, ...]
    orphan_slots: tuple[SlotInfo, ...]
    warnings: tuple[str, ...]
    threshold_bytes: int

    @property
    def healthy(self) -> bool:
        return not self.warnings


def assess(
    connectors: Sequence[ConnectorHealth], orphan_slots: Sequence[SlotInfo], threshold_bytes: int
) -> tuple[str, ...]:
    """Warnings for a health report (pure)."""
    warnings: list[str] = []
    for c in connectors:
        if c.status.state != "RUNNING" or not c.status.running:
            states = ", ".join(f"task {t.id} {t.state}" for t in c.status.tasks) or "no tasks"
            cause = f"; cause: {c.failure_cause}" if c.failure_cause else ""
            warnings.append(
                f"connector {c.name} is {c.status.state} ({states}){cause}; see `cdc status {c.name}`"
            )
        if c.slot is None:
            warnings.append(
                f"connector {c.name}: slot {c.slot_name} does not exist (yet); a snapshot will rerun "
                "if the connector was already streaming"
            )
        else:
            warnings.extend(_slot_warnings(c.slot, threshold_bytes, f"connector {c.name}: "))
        if c.oversize_records:
            warnings.append(
                f"connector {c.name}: {c.oversize_records} change record(s) over topics.max_message_bytes were "
                f"set aside (`cdc tail {c.oversize_topic} --from-beginning` names each row and its LSN); "
                "downstream those rows keep their previous version: raise topics.max_message_bytes, apply "
                "the spec, update the rows again, then delete the topic to clear this warning"
            )
    for s in orphan_slots:
        warnings.append(
            f"slot {s.slot_name} belongs to no Debezium connector on Connect and pins "
            f"{_size(s.retained_bytes)} of WAL; drop it with SELECT pg_drop_replication_slot('{s.slot_name}') "
            "if nothing else uses it"
        )
        warnings.extend(w for w in _slot_warnings(s, threshold_bytes, "") if "inactive" not in w)
    return tuple(warnings)


def _slot_warnings(slot: SlotInfo, threshold: int, prefix: str) -> list[str]:
    out = []
    if slot.retained_bytes is not None and slot.retained_bytes > threshold:
        out.append(
            f"{prefix}slot {slot.slot_name} retains {_size(slot.retained_bytes)} of WAL "
            f"(threshold {_size(threshold)}); the consumer is behind or stuck"
        )
    if not slot.active:
        out.append(f"{prefix}slot {slot.slot_name} is inactive: no connector is reading it, WAL accumulates")
    if slot.wal_status == "lost":
        out.append(f"{prefix}slot {slot.slot_name} lost required WAL; the connector needs a new snapshot")
    return out


def _size(n: int | None) -> str:
    if n is None:
        return "unknown"
    if n < 1024:
        return f"{n} B"
    value = float(n)
    for unit in ("KiB", "MiB", "GiB"):
        value /= 1024
        if value < 1024 or unit == "GiB":
            break
    return f"{value:.1f} {unit}"


def read_slots(conn: psycopg.Connection[tuple[object, ...]]) -> tuple[SlotInfo, ...]:
    rows = conn.execute(
        """
        SELECT slot_name, plugin, active, wal_status,
               pg_wal_lsn_diff(pg_current_wal_lsn(), restart_lsn)::bigint,
               pg_wal_lsn_diff(pg_current_wal_lsn(), confirmed_flush_lsn)::bigint
        FROM pg_replication_slots ORDER BY slot_name
        """
    ).fetchall()
    return tuple(
        SlotInfo(
            slot_name=str(r[0]),
            plugin=None if r[1] is None else str(r[1]),
            active=bool(r[2]),
            wal_status=None if r[3] is None else str(r[3]),
            retained_bytes=None if r[4] is None else int(str(r[4])),
            unconfirmed_bytes=None if r[5] is None else int(str(r[5])),
        )
        for r in rows
    )


def topic_ends(
    bootstrap_servers: str,
    topics: Sequence[str],
    timeout: float = 10.0,
    *,
    client_config: KafkaClientConfig | None = None,
) -> tuple[TopicEnd, ...]:
    """High watermarks of every partition of `topics` (missing topics are skipped)."""
    from confluent_kafka import TopicPartition

    if not topics:
        return ()
    consumer = make_consumer(
        {"bootstrap.servers": bootstrap_servers, "group.id": "cdc-health", "enable.auto.commit": False},
        client_config=client_config,
    )
    try:
        meta = consumer.list_topics(timeout=timeout).topics
        ends = []
        for topic in topics:
            if topic not in meta or meta[topic].error is not None:
                continue
            for p in sorted(meta[topic].partitions):
                _lo, hi = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=timeout)
                ends.append(TopicEnd(topic=topic, partition=p, end_offset=hi))
        return tuple(ends)
    finally:
        consumer.close()


def collect(
    *,
    connect: ConnectClient,
    pg_dsn: str,
    bootstrap_servers: str,
    kafka_client: KafkaClientConfig | None = None,
    registry_url: str,
    registry_auth: HttpAuth = NO_REGISTRY_AUTH,
    threshold_bytes: int = DEFAULT_RETAINED_WAL_WARN_BYTES,
    only: str | None = None,
) -> HealthReport:
    with psycopg.connect(pg_dsn, connect_timeout=10, autocommit=True) as conn:
        slots = {s.slot_name: s for s in read_slots(conn)}
    names = [only] if only else list(connect.list_connectors())
    connectors = []
    for name in names:
        config = connect.config(name)
        if config.get("connector.class") != POSTGRES_CONNECTOR_CLASS:
            continue
        slot_name = config.get("slot.name", "debezium")
        oversize_topic = config.get(f"transforms.{OVERSIZE_TRANSFORM}.topic")
        # Connect lists the oversize topic among the connector's topics once it has written to it.
        watched = dict.fromkeys([*connect.topics(name), *([oversize_topic] if oversize_topic else [])])
        ends = topic_ends(bootstrap_servers, list(watched), client_config=kafka_client)
        status = connect.status(name)
        connectors.append(
            ConnectorHealth(
                name=name,
                slot_name=slot_name,
                status=status,
                slot=slots.get(slot_name),
                topic_ends=tuple(e for e in ends if e.topic != oversize_topic),
                oversize_topic=oversize_topic,
                oversize_records=sum(e.end_offset for e in ends if e.topic == oversize_topic),
                failure_cause=explained_cause(
                    status.failure_trace,
                    config,
                    pg_dsn=pg_dsn,
                    registry_url=registry_url,
                    registry_auth=registry_auth,
                ),
            )
        )
    used = {c.slot_name for c in connectors}
    orphans = () if only else tuple(s for n, s in slots.items() if n not in used)
    return HealthReport(
        connectors=tuple(connectors),
        orphan_slots=orphans,
        warnings=assess(connectors, orphans, threshold_bytes),
        threshold_bytes=threshold_bytes,
    )
