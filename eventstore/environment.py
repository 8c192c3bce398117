"""The event store's environment variables (the reference's and the CLI's check's one source; the
shared ones are in `kafkakit.environment`). `StoreConfig.from_env` and the CLI read them."""

from __future__ import annotations

from eventstore.config import NAME
from kafkakit.environment import (
    NON_NEGATIVE_INT,
    POSITIVE_INT,
    POSITIVE_NUMBER,
    TEXT,
    Form,
    Variable,
    pattern,
)

SECTION = "Event store"
STORE_NAME = pattern("a topic prefix: letters, digits, '.', '_', '-'", NAME.pattern.strip("^$"), "bad name!")
AGGREGATE = pattern("module:attribute", r"[A-Za-z_][\w.]*:[A-Za-z_]\w*", "shop.order")


def _var(name: str, form: Form, example: str, meaning: str, *flags: str, default: str = "") -> Variable:
    return Variable(
        name=name, form=form, example=example, meaning=meaning, used_by=("eventstore", "demo"),
        flags=flags, default=default, section=SECTION,
    )  # fmt: skip


VARIABLES: tuple[Variable, ...] = (
    _var("EVENTSTORE_AGGREGATE", AGGREGATE, "shop.order:ORDER", "your aggregate, whose commands, events and schemas the store holds; `replay` needs none", "--aggregate"),
    _var("EVENTSTORE_NAME", STORE_NAME, "orders", "the store's name: the prefix of its topics, hence of its registry subjects", "--name", default="orders"),
    _var("EVENTSTORE_PARTITIONS", POSITIVE_INT, "6", "partitions per store topic", "--partitions", default="6"),
    _var("EVENTSTORE_REPLICATION_FACTOR", POSITIVE_INT, "3", "replicas per store topic (unset: the cluster's default.replication.factor)", "--replication-factor"),
    _var("EVENTSTORE_SNAPSHOT_EVERY", NON_NEGATIVE_INT, "50", "a stream's state is snapshotted every N events (0: never)", "--snapshot-every", default="50"),
    _var("EVENTSTORE_REBUILD_WINDOW", NON_NEGATIVE_INT, "10000", "event records per partition a takeover reads beyond the snapshots (0: no extra snapshots)", default="10000"),
    _var("EVENTSTORE_TRANSACTION_TIMEOUT_MS", POSITIVE_INT, "60000", "the processor's Kafka transaction timeout", "--transaction-timeout-ms", default="60000"),
    _var("EVENTSTORE_REPLY_TIMEOUT_S", POSITIVE_NUMBER, "30", "seconds a client waits for a command's reply", default="30"),
    _var("EVENTSTORE_DEDUP_WINDOW_MS", POSITIVE_INT, "604800000", "how long a retried command id gets its first outcome back (the outcomes topic keeps the same window)", default="604800000"),
    _var("EVENTSTORE_DEDUP_MAX_OUTCOMES", POSITIVE_INT, "1000000", "at most this many command ids per processor are remembered", default="1000000"),
    _var("EVENTSTORE_DLQ_TOPIC", TEXT, "orders.dlq", "where undecodable events go instead of stopping a reader"),
)  # fmt: skip
