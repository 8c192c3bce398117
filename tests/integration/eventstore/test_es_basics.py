"""Idempotent retries across restarts, bad input, timeouts, DLQ, schema evolution — on the real stack."""

from __future__ import annotations

import json
import signal
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, ClassVar

import pytest

from eventstore import EventStore, EventStoreClient, Pending, StoreConfig
from eventstore.errors import (
    CommandRejected,
    OutcomeUnknown,
    SchemaIncompatible,
    SchemaViolation,
    StoreConfigError,
    TopicSetupError,
    UndecodableRecord,
    WrongExpectedVersion,
)
from eventstore.kafkaio import end_offsets, read_to_end
from eventstore.kafkaio import reader as raw_reader
from eventstore.serde import header_map
from eventstore.topics import ensure_topics, partition_for
from kafkakit.clients import make_admin, make_producer
from shop import order as o

pytestmark = pytest.mark.integration


def create(client: EventStoreClient[Any], order_id: str, **kw: Any) -> Any:
    return client.execute(o.CreateOrder(order_id=order_id, customer_id="c"), **kw)


def test_idempotent_retry_across_processor_restart(
    store: StoreConfig, start_processor: Any, client: EventStoreClient[Any]
) -> None:
    first = start_processor("a")
    create(client, "1", expected_version=0)
    added = client.execute(
        o.AddLine(order_id="1", sku="x", quantity=1, unit_price_cents=5), command_id="retry-me"
    )
    first.send_signal(signal.SIGTERM)
    assert first.wait(30) == 0  # SIGTERM: finish the transaction, exit cleanly
    start_processor("b")  # a different instance must rebuild dedup memory from the outcomes topic
    again = client.execute(
        o.AddLine(order_id="1", sku="x", quantity=1, unit_price_cents=5), command_id="retry-me"
    )
    assert again == added
    events = client.read_stream("order-1")
    assert [e.version for e in events] == [1, 2]
    assert [e.command_id for e in events].count("retry-me") == 1
    # Versions go on from the rebuilt state, and expected versions are enforced after the move.
    with pytest.raises(WrongExpectedVersion) as info:
        client.execute(o.PlaceOrder(order_id="1"), expected_version=1)
    assert info.value.actual == 2
    assert client.execute(o.PlaceOrder(order_id="1"), expected_version=2).last_version == 3


def test_schema_violation_and_domain_error_append_nothing(
    store: StoreConfig, start_processor: Any, client: EventStoreClient[Any]
) -> None:
    start_processor()
    with pytest.raises(SchemaViolation) as info:
        client.execute(o.AddLine(order_id="1", sku="x", quantity="many", unit_price_cents=5))  # type: ignore[arg-type]
    assert info.value.field == "quantity" and "expected int" in info.value.reason
    with pytest.raises(o.OrderNotFound, match="does not exist"):
        client.execute(o.AddLine(order_id="1", sku="x", quantity=1, unit_price_cents=5))
    create(client, "1")
    with pytest.raises(o.EmptyOrder):
        client.execute(o.PlaceOrder(order_id="1"))
    assert [e.event_type for e in client.read_stream("order-1")] == ["order.created"]


def test_unreadable_command_is_refused_not_dropped(
    store: StoreConfig, start_processor: Any, client: EventStoreClient[Any]
) -> None:
    start_processor()
    stream = "order-9"
    headers = [
        ("command-type", b"order.create"),
        ("command-id", b"garbage-1"),
        ("stream-id", stream.encode()),
        ("expected-version", b"-1"),
        ("reply-partition", str(client.reply_partition).encode()),
    ]
    producer = make_producer({"bootstrap.servers": store.bootstrap_servers}, client_config=store.kafka_client)
    producer.produce(
        store.commands_topic,
        value=b"\x00\x00\x00\x00\x01\xff",
        key=stream.encode(),
        partition=partition_for(stream, store.partitions),
        headers=headers,
    )
    producer.flush(10)
    outcome = client.wait([Pending(command_id="garbage-1", stream_id=stream)], timeout=60)["garbage-1"]
    assert outcome.status == "invalid" and "unreadable command" in outcome.message
    with pytest.raises(CommandRejected):
        client.raise_for(outcome)
    assert client.read_stream(stream) == []


def test_timeout_says_maybe_applied_and_retry_is_safe(store: StoreConfig, start_processor: Any) -> None:
    with EventStore(replace(store, reply_timeout_s=3), o.ORDER).client() as client:
        with pytest.raises(OutcomeUnknown) as info:  # no processor yet: the command waits in the log
            create(client, "7", command_id="c-7")
        assert info.value.may_have_been_applied and "same command id" in str(info.value)
        start_processor()
        outcome = create(client, "7", command_id="c-7", timeout=60)
        assert outcome.status == "ok" and outcome.last_version == 1
        assert [e.command_id for e in client.read_stream("order-7")] == ["c-7"]


def test_broker_down_says_not_applied(store: StoreConfig) -> None:
    down = replace(store, bootstrap_servers="127.0.0.1:1", reply_timeout_s=2)
    with pytest.raises(OutcomeUnknown) as info:
        EventStore(down, o.ORDER).client()
    assert info.value.may_have_been_applied is False and "nothing was sent" in str(info.value)


def test_unknown_event_type_is_named_or_dead_lettered(
    store: StoreConfig, start_processor: Any, client: EventStoreClient[Any]
) -> None:
    start_processor()
    create(client, "3")
    stream = "order-3"
    partition = partition_for(stream, store.partitions)
    probe = raw_reader(store.bootstrap_servers, client_config=store.kafka_client)
    bad_offset = end_offsets(probe, store.events_topic, partition)[1]
    probe.close()
    producer = make_producer({"bootstrap.servers": store.bootstrap_servers}, client_config=store.kafka_client)
    headers = [("event-type", b"order.exploded"), ("stream-id", stream.encode()), ("stream-version", b"2")]
    producer.produce(
        store.events_topic,
        value=b"\x00\x00\x00\x00\x01\x02",
        key=stream.encode(),
        partition=partition,
        headers=headers,
    )
    producer.flush(10)
    with pytest.raises(UndecodableRecord) as info:
        client.read_stream(stream)
    assert (info.value.topic, info.value.partition, info.value.offset) == (
        store.events_topic,
        partition,
        bad_offset,
    )
    assert f"{store.events_topic}[{partition}]@{bad_offset}" in str(info.value)
    dlq = f"{store.name}.dlq"
    ensure_topics(replace(store, dlq_topic=dlq))
    seen = list(EventStore(replace(store, dlq_topic=dlq), o.ORDER).subscribe(until_end=True))
    assert [e.event_type for e in seen] == ["order.created"]
    consumer = raw_reader(store.bootstrap_servers, client_config=store.kafka_client)
    dead = [m for p in range(1) for m in read_to_end(consumer, dlq, p)]
    consumer.close()
    assert len(dead) == 1 and header_map(dead[0].headers())["dlq-offset"] == str(bad_offset)
    assert dead[0].value() == b"\x00\x00\x00\x00\x01\x02"


@dataclass(frozen=True, slots=True, kw_only=True)
class OrderCreatedV2:
    event_type: ClassVar[str] = "order.created"
    schema_version: ClassVar[int] = 2
    order_id: str
    customer_id: str
    channel: str | None = None


def _evolved(tmp_path: Path, field: dict[str, Any]) -> Any:
    folder = tmp_path / f"schemas-{len(list(tmp_path.iterdir()))}"
    folder.mkdir()
    for name in o.ORDER.record_types():
        (folder / f"{name}.avsc").write_text(o.ORDER.schema_text(name))
    doc = json.loads(o.ORDER.schema_text("order.created"))
    doc["fields"].append(field)
    (folder / "order.created.avsc").write_text(json.dumps(doc))
    events = tuple(OrderCreatedV2 if c is o.OrderCreated else c for c in o.ORDER.event_types)
    return replace(o.ORDER, schema_dir=folder, event_types=events)


def test_schema_evolution(
    store: StoreConfig, start_processor: Any, client: EventStoreClient[Any], tmp_path: Path
) -> None:
    start_processor()
    create(client, "5")
    subject = f"{store.events_topic}-kafkatoolkit.order.OrderCreated"
    registry = EventStore(store, o.ORDER).registry
    before = registry.latest(subject)
    assert before is not None

    incompatible = _evolved(tmp_path, {"name": "channel", "type": "string"})
    with pytest.raises(SchemaIncompatible, match="channel") as info:
        EventStore(store, incompatible).register_schemas()
    assert info.value.field == "channel"
    assert registry.latest(subject) == before  # nothing registered

    compatible = _evolved(tmp_path, {"name": "channel", "type": ["null", "string"], "default": None})
    evolved = EventStore(store, compatible)
    reports = {r.record_type: r for r in evolved.register_schemas()}
    assert (
        reports["order.created"].status == "evolved"
        and reports["order.created"].version == before.version + 1
    )
    old_event = evolved.read("order-5")[0]
    assert old_event.event == OrderCreatedV2(order_id="5", customer_id="c", channel=None)
    assert old_event.schema_id == before.schema_id  # written with v1, read with v2


def test_clients_sharing_a_reply_partition_keep_only_their_own_outcomes(
    store: StoreConfig, start_processor: Any
) -> None:
    start_processor("a")
    shared = EventStore(store, o.ORDER)  # one serde for both clients, as before
    with shared.client(reply_partition=1) as a, shared.client(reply_partition=1) as b:
        pending = [a.send(o.CreateOrder(order_id=f"share-{i}", customer_id="c")) for i in range(5)]
        assert {x.status for x in a.wait(pending).values()} == {"ok"}
        # b reads a's five replies on the way to its own: skipped, not decoded, not kept.
        mine = create(b, "share-b")
        assert mine.status == "ok" and mine.stream_id == "order-share-b"
        assert b._arrived == {} and b._awaited == set()
        assert a._arrived == {} and a._awaited == set()


def test_topics_take_the_clusters_replication_and_an_impossible_one_is_refused(store: StoreConfig) -> None:
    """No per-topic override weakens or strengthens what the brokers' operators set; a replication
    factor named in the config that the live brokers cannot hold is refused before any topic exists."""
    from confluent_kafka.admin import ConfigResource, ConfigSource  # type: ignore[attr-defined]

    admin = make_admin({"bootstrap.servers": store.bootstrap_servers}, client_config=store.kafka_client)
    cluster = admin.list_topics(timeout=10)
    brokers = len(cluster.brokers)
    broker = ConfigResource(ConfigResource.Type.BROKER, str(next(iter(cluster.brokers))))
    default_rf = int(
        admin.describe_configs([broker])[broker].result(timeout=10)["default.replication.factor"].value
    )
    meta = admin.list_topics(store.events_topic, timeout=10).topics[store.events_topic]
    assert {len(p.replicas) for p in meta.partitions.values()} == {default_rf}
    resource = ConfigResource(ConfigResource.Type.TOPIC, store.events_topic)
    found = admin.describe_configs([resource])[resource].result(timeout=10)
    assert found["min.insync.replicas"].source != ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    too_many = replace(store, name=f"{store.name}-rf", replication_factor=brokers + 1)
    with pytest.raises(
        TopicSetupError, match=rf"no topic of store .*-rf' was created: .*the {brokers} broker\(s\) alive"
    ):
        ensure_topics(too_many)
    left = admin.list_topics(timeout=10).topics
    assert not [t for t in left if t.startswith(f"{too_many.name}.")]  # nothing half-created


def test_a_retry_after_the_dedup_window_is_decided_again_and_init_aligns_the_outcomes_topic(
    store: StoreConfig, start_processor: Any, client: EventStoreClient[Any]
) -> None:
    """The dedup memory is a window (here 3 s): inside it a retry gets its first outcome, after it
    the command id is new again and the command is decided on the stream as it is now."""
    import time

    from confluent_kafka.admin import ConfigResource  # type: ignore[attr-defined]

    start_processor("w", EVENTSTORE_DEDUP_WINDOW_MS="3000")
    create(client, "w1", expected_version=0)
    line = o.AddLine(order_id="w1", sku="x", quantity=1, unit_price_cents=5)
    first = client.execute(line, command_id="late-retry")
    assert client.execute(line, command_id="late-retry") == first
    time.sleep(3.5)
    with pytest.raises(o.DuplicateLine, match="already has SKU x"):  # decided on the stream as it is now
        client.execute(line, command_id="late-retry")
    assert [e.version for e in client.read_stream("order-w1")] == [1, 2]
    # The outcomes topic keeps the same window: `init` with another window updates it in place.
    report = ensure_topics(replace(store, dedup_window_ms=60_000))
    assert dict(report)[store.outcomes_topic] == "updated"
    admin = make_admin({"bootstrap.servers": store.bootstrap_servers}, client_config=store.kafka_client)
    resource = ConfigResource(ConfigResource.Type.TOPIC, store.outcomes_topic)
    found = admin.describe_configs([resource])[resource].result(timeout=10)
    assert (found["cleanup.policy"].value, found["retention.ms"].value) == ("compact,delete", "60000")
    assert dict(ensure_topics(replace(store, dedup_window_ms=60_000)))[store.outcomes_topic] == "exists"


@pytest.mark.parametrize("partitions", [1, 6])
def test_a_partition_count_other_than_the_topics_is_refused_by_name(
    store: StoreConfig, partitions: int
) -> None:
    """Streams are placed by their partition count: another count would send a stream's commands to a
    processor that does not own it, so clients and processors refuse it before sending or deciding."""
    wrong = replace(store, partitions=partitions)
    with pytest.raises(StoreConfigError) as refused:
        EventStore(wrong, o.ORDER).client()
    message = str(refused.value)
    assert f"{store.commands_topic} has 3 partitions" in message and f"partitions={partitions}" in message
    assert "EVENTSTORE_PARTITIONS=3" in message
    with pytest.raises(StoreConfigError, match="has 3 partitions"):
        EventStore(wrong, o.ORDER).processor(instance_id=f"wrong-{partitions}").run(max_idle_s=1)
    with EventStore(store, o.ORDER).client() as right:  # the store's own count still works
        assert right.reply_partition in range(3)
