"""The caller's side: send commands and await their outcomes; read streams; subscribe to events.

- `execute` sends a command to the command topic (keyed and partitioned by stream id) and waits for the
  reply with the same command id on this client's reply partition (one reply consumer per client,
  read_committed, positioned before the first command is sent so no reply can be missed).
- Errors say whether the command may have been applied (`OutcomeUnknown.may_have_been_applied`); a
  retry with the same command id is always safe: the processor returns the first outcome.
- `WrongExpectedVersion`, the aggregate's typed `DomainError`s and `CommandRejected` are raised from
  the outcome; `SchemaViolation` is raised before anything is sent, and so is `SubjectsNeedMigration`
  while the store's schemas are still under the old `<store>-<record type>` subjects.
Not thread-safe: use one client per thread or process.
"""

from __future__ import annotations

import random
import time
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from confluent_kafka import KafkaError, KafkaException, Message, TopicPartition

from eventstore.aggregate import Aggregate, type_name
from eventstore.config import StoreConfig
from eventstore.decision import StreamState
from eventstore.envelope import CommandEnvelope, EventEnvelope, Outcome
from eventstore.errors import CommandRejected, OutcomeUnknown, StoreConfigError, WrongExpectedVersion
from eventstore.kafkaio import end_offsets, reader, require_partitions, take
from eventstore.reading import EventReader
from eventstore.serde import Serde
from eventstore.topics import partition_for
from kafkakit.clients import make_producer
from kafkakit.positions import StartPosition

S = TypeVar("S")

# Delivery errors after which the command certainly never reached the log.
NEVER_WRITTEN = {
    KafkaError._UNKNOWN_TOPIC,
    KafkaError._UNKNOWN_PARTITION,
    KafkaError.MSG_SIZE_TOO_LARGE,
    KafkaError._MSG_TIMED_OUT_NOT_SENT if hasattr(KafkaError, "_MSG_TIMED_OUT_NOT_SENT") else -1,
    KafkaError.TOPIC_AUTHORIZATION_FAILED,
    KafkaError.INVALID_RECORD,
}


@dataclass(frozen=True, slots=True, kw_only=True)
class Pending:
    """What `send` returns: the command's id, to `wait` for, and the stream it addresses."""

    command_id: str
    stream_id: str


class EventStoreClient(Generic[S]):
    """Sends commands to the store and awaits their outcomes; reads streams and subscribes to events.

    Build it with `EventStore.client()`; use it as a context manager (or call `close()`), one per
    thread: it holds a producer and a reply consumer of its own.

    Parameters:
        config: the store's settings (`reply_timeout_s` is `wait`'s default timeout, in seconds).
        aggregate: the decider whose commands it sends (it derives stream ids and typed errors).
        serde: the store's encoder/decoder (the `EventStore` owns it).
        reply_partition: the partition of `<store>.replies` this client listens on; default None (a
            random one). Clients may share one: each keeps only the replies to its own commands.

    Raises:
        OutcomeUnknown: Kafka is unreachable when the client starts (nothing was sent).

    `execute` = `send` + `wait` + `raise_for`: it returns the `Outcome` of an accepted command and
    raises `WrongExpectedVersion`, the aggregate's `DomainError`s or `CommandRejected` for refused ones,
    `SchemaViolation` before sending an invalid one, and `OutcomeUnknown` when no answer came (then
    retrying with the same `command_id` is safe: the processor returns the first outcome).

    Example: docs/examples/event_store_client.py (each refusal, pipelining, a retry):

        >>> with store.client() as client:
        ...     created = client.execute(CreateOrder(order_id="9", customer_id="c-9"), expected_version=0)
        ...     try:
        ...         client.execute(PlaceOrder(order_id="9"), expected_version=0)
        ...     except WrongExpectedVersion as exc:  # the stream moved: load, decide again
        ...         print(f"stream at {exc.actual}")
        ...     pending = [client.send(AddLine(...), command_id=f"add-{sku}") for sku in "ABC"]
        ...     outcomes = client.wait(pending)  # one flush, replies awaited together
        stream at 1
    """

    def __init__(
        self,
        config: StoreConfig,
        aggregate: Aggregate[S],
        serde: Serde,
        *,
        reply_partition: int | None = None,
    ) -> None:
        self.config = config
        self.aggregate = aggregate
        self.serde = serde
        self.reply_partition = (
            random.randrange(config.partitions) if reply_partition is None else reply_partition
        )
        self._producer = make_producer(
            {
                "bootstrap.servers": config.bootstrap_servers,
                "enable.idempotence": True,
                # `wait` flushes (sending at once), so `execute` never waits for linger; pipelined
                # `send`s leave grouped, in fewer requests for the broker.
                "linger.ms": 5,
                "message.timeout.ms": max(1000, int(config.reply_timeout_s * 1000)),
            },
            client_config=config.kafka_client,
        )
        self._delivery_errors: dict[str, KafkaError] = {}
        self._replies = reader(config.bootstrap_servers, client_config=config.kafka_client)
        try:
            require_partitions(self._replies, config.commands_topic, config.partitions)
            _, hi = end_offsets(self._replies, config.replies_topic, self.reply_partition, timeout=10)
        except StoreConfigError:
            self._replies.close()
            raise
        except KafkaException as exc:
            # Closing serves the consumer's callbacks: a refused login or broker certificate, which
            # librdkafka reports only there, is raised as KafkaAccessRefused (kafkakit.clients), naming
            # the setting to fix, instead of this timeout.
            self._replies.close()
            raise OutcomeUnknown(
                f"Kafka at {config.bootstrap_servers} is unreachable ({exc}); nothing was sent",
                command_id="",
                may_have_been_applied=False,
            ) from exc
        self._replies.assign([TopicPartition(config.replies_topic, self.reply_partition, hi)])
        self._arrived: dict[str, Outcome] = {}
        # Sent and not yet returned by `wait`. Clients share reply partitions: a reply for another
        # client's command is skipped undecoded (with 8 clients on 3 partitions each reply was decoded
        # ~3 times, and kept forever by the clients that never waited for it).
        self._awaited: set[str] = set()
        self._events = EventReader(config, aggregate, serde)

    def close(self) -> None:
        """Deliver what is still queued (up to 5 s), then close the producer and the consumers."""
        self._producer.flush(5)
        self._replies.close()
        self._events.close()

    def __enter__(self) -> EventStoreClient[S]:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- commands --------------------------------------------------------------------------------

    def send(
        self,
        command: Any,
        *,
        expected_version: int | None = None,
        command_id: str | None = None,
        stream_id: str | None = None,
        correlation_id: str = "",
        causation_id: str = "",
    ) -> Pending:
        """Validate and send a command without waiting for its outcome (pipelining: `wait` for many).

        Parameters:
            command: an instance of one of the aggregate's command classes.
            expected_version: the stream version the caller decided on; the processor refuses the
                command (`WrongExpectedVersion` from `wait` + `raise_for`) if the stream is
                elsewhere. Default None: no check (last writer wins). 0 means "a new stream".
            command_id: the idempotency key; default None (a new UUID). Reuse it to retry: the
                processor answers a known id with its first outcome and appends nothing.
            stream_id: default None (the aggregate's `stream_id(command)`).
            correlation_id, causation_id: carried onto the events (tracing); default "" (the
                command id).

        Returns:
            The `Pending` handle (command id, stream id) to `wait` for.

        Raises:
            SchemaViolation: the command does not match its Avro schema; nothing leaves the process.
            SubjectsNeedMigration: the store's schemas are still under the old subjects.
        """
        envelope = CommandEnvelope(
            command_id=command_id or str(uuid.uuid4()),
            stream_id=stream_id or self.aggregate.stream_id(command),
            command_type=type_name(type(command)),
            command=command,
            expected_version=expected_version,
            correlation_id=correlation_id,
            causation_id=causation_id,
            reply_partition=self.reply_partition,
            timestamp_ms=int(time.time() * 1000),
        )
        key, value, headers = self.serde.command_value(envelope)
        partition = partition_for(envelope.stream_id, self.config.partitions)
        cid = envelope.command_id

        def delivered(err: KafkaError | None, _msg: Message) -> None:
            if err is not None:
                self._delivery_errors[cid] = err

        self._producer.produce(
            self.config.commands_topic,
            value=value,
            key=key,
            partition=partition,
            headers=headers,
            on_delivery=delivered,
        )
        self._producer.poll(0)
        self._awaited.add(cid)
        return Pending(command_id=cid, stream_id=envelope.stream_id)

    def wait(self, pending: Iterable[Pending], timeout: float | None = None) -> dict[str, Outcome]:
        """The outcomes of sent commands, refused ones included (`raise_for` turns those into errors).

        Parameters:
            pending: what `send` returned.
            timeout: seconds to wait for every reply; default None (`config.reply_timeout_s`).

        Returns:
            command id -> `Outcome`.

        Raises:
            OutcomeUnknown: for the first command without an outcome: Kafka did not confirm it
                (`may_have_been_applied` says whether it can have reached the log) or no reply came
                in time (no processor running?). Retrying with the same command id is safe.
        """
        wanted = {p.command_id for p in pending}
        timeout = self.config.reply_timeout_s if timeout is None else timeout
        deadline = time.monotonic() + timeout
        left = self._producer.flush(timeout)
        for cid in sorted(wanted):
            err = self._delivery_errors.pop(cid, None)
            if err is not None:
                never = err.code() in NEVER_WRITTEN
                raise OutcomeUnknown(
                    f"command {cid} was not confirmed by Kafka ({err}); "
                    + ("it was NOT applied" if never else "it MAY have been applied")
                    + " — retry with the same command id, which is safe",
                    command_id=cid,
                    may_have_been_applied=not never,
                )
        while not wanted <= self._arrived.keys():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                missing = sorted(wanted - self._arrived.keys())
                raise OutcomeUnknown(
                    f"no reply for command(s) {missing[:3]} within {timeout}s ({left} still queued "
                    "locally); the command is in the log and MAY have been applied or will be once a "
                    "processor runs — retry with the same command id, which is safe",
                    command_id=missing[0],
                    may_have_been_applied=True,
                )
            for msg in take(self._replies, 500, timeout=min(0.5, remaining)):
                key = msg.key() if msg.error() is None else None
                cid = key.decode() if isinstance(key, bytes) else ""
                if cid in self._awaited or cid in wanted:
                    self._arrived[cid] = self.serde.read_outcome(msg.value() or b"")
        self._awaited -= wanted
        return {cid: self._arrived.pop(cid) for cid in wanted}

    def execute(
        self,
        command: Any,
        *,
        expected_version: int | None = None,
        command_id: str | None = None,
        stream_id: str | None = None,
        timeout: float | None = None,
    ) -> Outcome:
        """Send one command, await its outcome, and raise the typed error of a refusal.

        Parameters:
            command, expected_version, command_id, stream_id: as `send`.
            timeout: as `wait`.

        Returns:
            The accepted command's `Outcome` (`first_version`..`last_version` appended).

        Raises:
            WrongExpectedVersion: the stream was not at `expected_version` (`actual` says where).
            DomainError: the aggregate's subclass `decide` raised (a business rule).
            CommandRejected: the processor could not read the command (unknown type, schema).
            SchemaViolation, SubjectsNeedMigration: as `send`, before anything is sent.
            OutcomeUnknown: as `wait`.
        """
        pending = self.send(
            command, expected_version=expected_version, command_id=command_id, stream_id=stream_id
        )
        return self.raise_for(self.wait([pending], timeout)[pending.command_id])

    def raise_for(self, outcome: Outcome) -> Outcome:
        """`outcome` if accepted; else its typed error, as `execute` documents (for `send`/`wait`)."""
        if outcome.status == "ok":
            return outcome
        if outcome.status == "conflict":
            raise WrongExpectedVersion(
                outcome.message,
                stream_id=outcome.stream_id,
                expected=outcome.expected_version,
                actual=outcome.last_version,
            )
        if outcome.status == "rejected":
            raise self.aggregate.domain_error(outcome.error_code)(outcome.message)
        raise CommandRejected(f"command {outcome.command_id} was refused: {outcome.message}")

    # --- reads -----------------------------------------------------------------------------------

    def read_stream(self, stream_id: str) -> list[EventEnvelope]:
        """One stream's committed events in version order, as `EventStore.read`."""
        return self._events.read_stream(stream_id)

    def load(self, stream_id: str) -> StreamState[S]:
        """One stream's version and state (snapshot + later events), as `EventStore.load`."""
        return self._events.load(stream_id)

    def subscribe(
        self, start: StartPosition, *, until_end: bool = False, idle_timeout: float | None = None
    ) -> Iterator[EventEnvelope]:
        """Committed events from `start`, as `EventStore.subscribe` (whose args these are)."""
        return self._events.subscribe(start, until_end=until_end, idle_timeout=idle_timeout)
