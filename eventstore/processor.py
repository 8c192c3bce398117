"""The command processor: turns commands into events with per-stream optimistic concurrency.

Guarantees (with `isolation.level=read_committed` readers):
- One owner per command partition (consumer group). A stream lives in the same partition number of every
  store topic, so the owner of command partition P alone writes stream versions in events partition P.
- Exactly once: for each batch, events, snapshots, outcomes (dedup memory) and replies are produced and
  the consumed command offsets are sent in ONE transaction. Killed mid-batch, the transaction aborts and
  the next owner re-reads the same commands against the same committed state.
- Zombies are fenced twice: `transactional.id` is per instance (a restart with the same `--instance-id`
  aborts the dead instance's open transaction at once), and the offsets carry the consumer group
  generation (KIP-447), so a deposed owner's commit fails.
- Idempotent retries: an outcome is stored under its command id in the compacted outcomes topic, in the
  command's partition; a repeated command id gets the first outcome re-sent and appends nothing.

Per batch, in order:
1. consume up to `batch_size` commands (rebalances happen here, never inside a transaction);
2. begin the transaction; for each command: dedup, decode, check partition, decide (pure, decision.py),
   produce events / snapshot / outcome / reply, staging the new stream state;
3. flush, so every record is written before the offsets join the transaction (a deposed owner then
   cannot commit records that the new owner's rebuild has not seen);
4. send the consumed offsets; commit; only now apply the staged state to the cache.
On an abortable error: abort, drop the staged state, seek back to the batch's first offsets.

On assignment of partition P the cache is rebuilt: outcomes[P] -> dedup memory; snapshots[P] -> latest
snapshot per stream; events[P] -> events newer than each stream's snapshot (older ones are skipped
by their `stream-version` header without decoding).
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition

from eventstore.aggregate import Aggregate
from eventstore.config import StoreConfig
from eventstore.decision import StreamState, apply, handle, snapshot_due
from eventstore.envelope import Outcome, Position, Snapshot
from eventstore.errors import EventStoreError, ProcessorFenced, RegistryUnavailable
from eventstore.kafkaio import READ_COMMITTED, end_offsets, read_range, reader, take
from eventstore.serde import H_COMMAND_ID, H_REPLY_PARTITION, H_STREAM, H_VERSION, Serde, header_map
from eventstore.topics import partition_for

S = TypeVar("S")
log = logging.getLogger(__name__)


@dataclass(slots=True)
class Staged(Generic[S]):
    """What one open transaction will make true once it commits."""

    streams: dict[str, StreamState[S]] = field(default_factory=dict)
    outcomes: dict[str, Outcome] = field(default_factory=dict)
    first_offsets: dict[int, int] = field(default_factory=dict)
    next_offsets: dict[int, int] = field(default_factory=dict)


class CommandProcessor(Generic[S]):
    def __init__(
        self,
        config: StoreConfig,
        aggregate: Aggregate[S],
        serde: Serde,
        *,
        instance_id: str,
        batch_size: int = 200,
        session_timeout_ms: int = 10_000,
    ) -> None:
        self.config = config
        self.aggregate = aggregate
        self.serde = serde
        self.batch_size = batch_size
        self.stop_requested = threading.Event()
        self._streams: dict[str, StreamState[S]] = {}
        self._outcomes: dict[str, Outcome] = {}
        self._owned: set[int] = set()
        self._consumer = Consumer(
            {
                "bootstrap.servers": config.bootstrap_servers,
                "group.id": config.processor_group,
                # Static membership: a restart with the same instance id takes its partitions back at
                # once instead of waiting for the dead member's session to time out.
                "group.instance.id": f"{config.name}.processor.{instance_id}",
                "session.timeout.ms": session_timeout_ms,
                "auto.offset.reset": "earliest",
                # Offsets are committed only inside the transaction (send_offsets_to_transaction).
                **READ_COMMITTED,
            }
        )
        self._producer = Producer(
            {
                "bootstrap.servers": config.bootstrap_servers,
                "transactional.id": f"{config.name}.processor.{instance_id}",
                "transaction.timeout.ms": config.transaction_timeout_ms,
                "enable.idempotence": True,
                "linger.ms": 2,
            }
        )
        self._reader = reader(config.bootstrap_servers)

    # --- lifecycle -------------------------------------------------------------------------------

    def run(self, *, max_idle_s: float | None = None) -> None:
        """Process until `stop_requested` is set (e.g. by SIGTERM) or idle for `max_idle_s`."""
        self._producer.init_transactions(self.config.transaction_timeout_ms / 1000)
        self._consumer.subscribe(
            [self.config.commands_topic], on_assign=self._on_assign, on_revoke=self._on_revoke
        )
        idle_since = time.monotonic()
        try:
            while not self.stop_requested.is_set():
                msgs = take(self._consumer, self.batch_size, timeout=0.5)
                if msgs:
                    self._process(msgs)
                    idle_since = time.monotonic()
                elif max_idle_s is not None and time.monotonic() - idle_since > max_idle_s:
                    return
        finally:
            self.close()

    def close(self) -> None:
        for client in (self._consumer, self._reader):
            with contextlib.suppress(RuntimeError):  # already closed
                client.close()
        self._producer.flush(5)

    # --- rebalance -------------------------------------------------------------------------------

    def _on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        lost = {tp.partition for tp in partitions}
        self._owned -= lost
        self._streams = {
            s: st for s, st in self._streams.items() if partition_for(s, self.config.partitions) not in lost
        }
        self._outcomes = {
            c: o
            for c, o in self._outcomes.items()
            if partition_for(o.stream_id, self.config.partitions) not in lost
        }
        log.info("revoked partitions %s", sorted(lost))

    def _on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        for tp in partitions:
            started = time.monotonic()
            streams, outcomes = self._rebuild(tp.partition)
            self._streams.update(streams)
            self._outcomes.update(outcomes)
            self._owned.add(tp.partition)
            log.info(
                "partition %d rebuilt: %d streams, %d outcomes in %.2fs",
                tp.partition,
                len(streams),
                len(outcomes),
                time.monotonic() - started,
            )

    def _rebuild(self, partition: int) -> tuple[dict[str, StreamState[S]], dict[str, Outcome]]:
        cfg, serde = self.config, self.serde
        outcomes = {
            (m.key() or b"").decode(): serde.read_outcome(m.value() or b"")
            for m in self._read_all(cfg.outcomes_topic, partition)
        }
        latest: dict[str, Message] = {}
        for m in self._read_all(cfg.snapshots_topic, partition):
            latest[(m.key() or b"").decode()] = m
        streams: dict[str, StreamState[S]] = {}
        for stream, m in latest.items():
            snap = serde.read_snapshot(m.value() or b"", m.headers())
            streams[stream] = StreamState(snap.version, snap.state)
        initial = StreamState(0, self.aggregate.initial_state)
        for m in self._read_all(cfg.events_topic, partition):
            h = header_map(m.headers())
            stream = h.get(H_STREAM, (m.key() or b"").decode())
            current = streams.get(stream, initial)
            if int(h.get(H_VERSION, "0")) <= current.version:
                continue  # covered by the snapshot: skip without decoding
            position = Position(topic=cfg.events_topic, partition=partition, offset=m.offset() or 0)
            streams[stream] = apply(
                self.aggregate, current, serde.read_event(position, m.value(), m.headers())
            )
        return streams, outcomes

    def _read_all(self, topic: str, partition: int) -> list[Message]:
        lo, hi = end_offsets(self._reader, topic, partition)
        timeout = max(60.0, 2 * self.config.transaction_timeout_ms / 1000)
        return list(read_range(self._reader, topic, partition, lo, hi, timeout=timeout))

    # --- one batch, one transaction ----------------------------------------------------------------

    def _process(self, msgs: list[Message]) -> None:
        staged: Staged[S] = Staged()
        self._producer.begin_transaction()
        try:
            for msg in msgs:
                if msg.error() is not None:
                    log.warning("consume error: %s", msg.error())
                    continue
                partition, offset = msg.partition() or 0, msg.offset() or 0
                staged.first_offsets.setdefault(partition, offset)
                staged.next_offsets[partition] = offset + 1
                self._handle(msg, partition, staged)
            self._producer.flush(self.config.transaction_timeout_ms / 1000)
            offsets = [
                TopicPartition(self.config.commands_topic, p, n) for p, n in staged.next_offsets.items()
            ]
            self._producer.send_offsets_to_transaction(offsets, self._consumer.consumer_group_metadata())
            self._producer.commit_transaction()
        except KafkaException as exc:
            self._recover(exc, staged)
            return
        self._streams.update(staged.streams)
        self._outcomes.update(staged.outcomes)

    def _recover(self, exc: KafkaException, staged: Staged[S]) -> None:
        err: KafkaError = exc.args[0]
        if err.fatal() or err.code() in (KafkaError._FENCED, KafkaError.PRODUCER_FENCED):
            raise ProcessorFenced(
                f"processor fenced ({err}); another instance owns this transactional id — stop this one"
            ) from exc
        if not err.txn_requires_abort() and not err.retriable():
            raise EventStoreError(f"transaction failed and cannot be retried: {err}") from exc
        log.warning("aborting transaction (%s); re-reading the batch", err)
        self._producer.abort_transaction()
        for partition, offset in staged.first_offsets.items():
            # A partition revoked meanwhile cannot be sought; its new owner starts from committed offsets.
            with contextlib.suppress(KafkaException):
                self._consumer.seek(TopicPartition(self.config.commands_topic, partition, offset))

    def _handle(self, msg: Message, partition: int, staged: Staged[S]) -> None:
        h = header_map(msg.headers())
        command_id = h.get(H_COMMAND_ID) or f"{msg.topic()}:{partition}:{msg.offset()}"
        reply_partition = _int(h.get(H_REPLY_PARTITION)) % self.config.partitions
        now = int(time.time() * 1000)
        prior = staged.outcomes.get(command_id) or self._outcomes.get(command_id)
        if prior is not None:  # a retry: re-send the first outcome, append nothing
            self._reply(prior, reply_partition)
            return
        outcome = self._decide(msg, partition, h, command_id, now, staged)
        value = self.serde.outcome_value(outcome)
        self._produce(self.config.outcomes_topic, partition, command_id.encode(), value, None, now)
        staged.outcomes[command_id] = outcome
        self._reply(outcome, reply_partition, value)

    def _decide(
        self, msg: Message, partition: int, h: dict[str, str], command_id: str, now: int, staged: Staged[S]
    ) -> Outcome:
        try:
            command = self.serde.read_command(msg.value(), msg.headers())
        except RegistryUnavailable:
            raise  # transient: crash and restart rather than store a wrong first outcome
        except Exception as exc:  # untrusted bytes: any decode failure makes the command invalid
            return _invalid(
                command_id, h.get(H_STREAM, ""), now, f"unreadable command: {type(exc).__name__}: {exc}"
            )
        home = partition_for(command.stream_id, self.config.partitions)
        if home != partition:
            return _invalid(
                command_id,
                command.stream_id,
                now,
                f"stream {command.stream_id} lives in partition {home} but the command arrived on {partition}; "
                "send commands through the eventstore client (murmur2 partitioner)",
            )
        initial = StreamState(0, self.aggregate.initial_state)
        current = staged.streams.get(command.stream_id) or self._streams.get(command.stream_id) or initial
        decision = handle(self.aggregate, current, command, now)
        for event in decision.events:
            key, value, headers = self.serde.event_value(event)
            self._produce(self.config.events_topic, partition, key, value, headers, now)
        if snapshot_due(current.version, decision.after.version, self.config.snapshot_every):
            snap = Snapshot(
                stream_id=command.stream_id, version=decision.after.version, state=decision.after.state
            )
            key, value, headers = self.serde.snapshot_value(snap)
            self._produce(self.config.snapshots_topic, partition, key, value, headers, now)
        staged.streams[command.stream_id] = decision.after
        return decision.outcome

    def _reply(self, outcome: Outcome, reply_partition: int, value: bytes | None = None) -> None:
        value = value if value is not None else self.serde.outcome_value(outcome)
        headers = [(H_COMMAND_ID, outcome.command_id.encode())]
        self._produce(
            self.config.replies_topic, reply_partition, outcome.command_id.encode(), value, headers, None
        )

    def _produce(
        self, topic: str, partition: int, key: bytes, value: bytes, headers: Any, timestamp: int | None
    ) -> None:
        while True:
            try:
                self._producer.produce(
                    topic,
                    value=value,
                    key=key,
                    partition=partition,
                    headers=headers,
                    timestamp=timestamp or 0,
                )
                return
            except BufferError:
                self._producer.poll(0.1)  # local queue full: let deliveries drain


def _int(text: str | None) -> int:
    try:
        return max(0, int(text or 0))
    except ValueError:
        return 0


def _invalid(command_id: str, stream_id: str, now: int, message: str) -> Outcome:
    return Outcome(
        command_id=command_id,
        stream_id=stream_id,
        status="invalid",
        first_version=0,
        last_version=0,
        error_code="invalid_command",
        message=message,
        timestamp_ms=now,
    )
