"""The command processor: turns commands into events with per-stream optimistic concurrency.

Guarantees (with `isolation.level=read_committed` readers):
- One owner per command partition (consumer group). A stream lives in the same partition number of every
  store topic, so the owner of command partition P alone writes stream versions in events partition P.
- Exactly once: for each batch, events, snapshots, outcomes (dedup memory) and replies are produced and
  the consumed command offsets are sent in ONE transaction. Killed mid-batch, the transaction aborts and
  the next owner re-reads the same commands against the same committed state.
- Zombies are fenced twice: the `transactional.id`s are per instance (a restart with the same
  `--instance-id` aborts the dead instance's open transactions at once), and the offsets carry the
  consumer group generation (KIP-447), so a deposed owner's commit fails.
- Two transactional producers take turns, one batch each. The broker writes a transaction's commit
  markers after it has answered the commit; a transaction begun at once on the SAME id is refused
  (CONCURRENT_TRANSACTIONS) and retried after a backoff: a wait on every batch. On the
  other id, batch n+1 starts while n's markers are written. Order still holds: n+1 begins only after
  n's commit returned, so n's records precede n+1's in every partition.
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

Snapshots are written at the end of the batch (step 2), one per stream that crossed a `snapshot_every`
multiple plus the idle streams that pin the partition's low-water mark (takeover.py); each carries the
events-topic positions a takeover needs.

On assignment of partition P the cache is rebuilt from snapshots + tail, never from offset 0:
outcomes[P] -> dedup memory; snapshots[P] -> latest snapshot per stream and the newest low-water
mark; events[P] from that mark -> events newer than each stream's snapshot (older ones are skipped by
their `stream-version` header without decoding). `rebuilds` records what each rebuild read.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections import ChainMap
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any, Generic, TypeVar

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, TopicPartition

from eventstore.aggregate import Aggregate
from eventstore.config import StoreConfig
from eventstore.decision import StreamState, handle, snapshot_due
from eventstore.dedup import DedupMemory
from eventstore.envelope import Outcome, Position, Snapshot
from eventstore.errors import EventStoreError, ProcessorFenced, RegistryUnavailable, StoreConfigError
from eventstore.heap import HeapSettler
from eventstore.kafkaio import (
    READ_COMMITTED,
    consumer_fatal,
    end_offsets,
    read_range,
    reader,
    require_partitions,
    take,
    until_failover_ends,
)
from eventstore.serde import (
    H_COMMAND_ID,
    H_LOW_WATER,
    H_REPLY_PARTITION,
    H_STREAM,
    H_VERSION,
    Serde,
    header_map,
)
from eventstore.takeover import TailRecord, fold_tail, low_water, plan_snapshots, start_offset
from eventstore.topics import partition_for
from kafkakit.clients import make_consumer, make_producer

S = TypeVar("S")
# How long a partition's rebuild on assignment waits out a broker failover (elections take seconds;
# a controller that must first notice the loss, up to its session timeout).
REBUILD_FAILOVER_S = 120.0
# A second fencing of the consumer within this long is not a failover: another instance has the id.
REJOIN_GUARD_S = 120.0
log = logging.getLogger(__name__)


@dataclass(slots=True)
class Staged(Generic[S]):
    """What one open transaction will make true once it commits."""

    streams: dict[str, StreamState[S]] = field(default_factory=dict)
    outcomes: dict[str, Outcome] = field(default_factory=dict)
    first_offsets: dict[int, int] = field(default_factory=dict)
    next_offsets: dict[int, int] = field(default_factory=dict)
    # partition -> stream -> lower bound of its first un-snapshotted event's offset (takeover.py)
    needed: dict[int, dict[str, int]] = field(default_factory=dict)
    snapshotted: dict[int, tuple[str, ...]] = field(default_factory=dict)  # leave `needed` on commit
    due: dict[str, int] = field(default_factory=dict)  # stream -> partition: snapshot_every crossed
    low_water: dict[int, int] = field(default_factory=dict)


@dataclass(slots=True)
class BatchTimings:
    """Where a processor's time goes, summed over its batches (seconds); cheap enough to keep on."""

    batches: int = 0
    commands: int = 0
    handle_s: float = 0.0  # decode + decide + produce (into the local queue) of every command
    flush_s: float = 0.0  # until every record of the batch is acknowledged by the broker
    offsets_s: float = 0.0  # send_offsets_to_transaction
    commit_s: float = 0.0  # commit_transaction (markers written: the batch becomes visible)


@dataclass(frozen=True, slots=True, kw_only=True)
class RebuildReport:
    """What one rebuild of one partition read (the takeover cost)."""

    partition: int
    events_from: int
    events_to: int
    events_read: int
    events_decoded: int
    snapshots_read: int
    outcomes_read: int
    streams: int
    seconds: float


class CommandProcessor(Generic[S]):
    """One member of the store's processor group: owns command partitions, decides, appends.

    Build it with `EventStore.processor(instance_id, ...)`, which passes the store's wiring; the module
    docstring says what each batch guarantees. Run up to one per partition of the commands topic
    (more stay idle): the group spreads the partitions over them and moves a dead one's to the others.

    Parameters:
        config: the store's settings (topics, group and transactional ids derive from `config.name`;
            `snapshot_every` and `transaction_timeout_ms` apply here).
        aggregate: the decider whose commands it handles.
        serde: the store's encoder/decoder (the `EventStore` owns it).
        instance_id: stable per instance across restarts: it names the static group membership and the
            transactional ids, so a restarted instance fences its dead predecessor at once. Two live
            processors must never share one.
        batch_size: commands consumed and committed per transaction at most; default 200. Larger
            batches spread a commit's cost over more commands, smaller ones answer sooner.
        session_timeout_ms: how long the group waits for a silent member before moving its partitions
            (milliseconds); default 10,000. Lower moves a dead instance's partitions sooner, at the
            risk of moving them away from a merely slow one.
        linger_ms: the transactional producers' `linger.ms` (milliseconds); default 50 (a batch ends
            with a flush either way, so this only groups the records of one batch).
        settle_heap: collect and freeze the heap after each batch (heap.py); default True. Turn it
            off when the processor is embedded in a process that manages its own garbage collection.

    `run()` blocks until `stop_requested` is set (from a signal handler or another thread) or the
    processor was idle for `max_idle_s`; `rebuilds` (what each partition's takeover read) and
    `timings` (where the batches' time went) report what it did.

    Example: docs/examples/command_processor.py (a processor in a thread of the application's
    process, then a restart under the same instance id that rebuilds from snapshots):

        >>> processor = store.processor(instance_id="shop-1", batch_size=100)
        >>> worker = threading.Thread(target=processor.run)
        >>> worker.start()
        >>> ...                                # clients send commands meanwhile
        >>> processor.stop_requested.set()     # finish or abort the open transaction, then return
        >>> worker.join()
        >>> takeovers, spent = processor.rebuilds, processor.timings  # what it read, where time went
    """

    def __init__(
        self,
        config: StoreConfig,
        aggregate: Aggregate[S],
        serde: Serde,
        *,
        instance_id: str,
        batch_size: int = 200,
        session_timeout_ms: int = 10_000,
        linger_ms: float = 50,
        settle_heap: bool = True,
    ) -> None:
        self.config = config
        self.aggregate = aggregate
        self.serde = serde
        self.batch_size = batch_size
        self.stop_requested = threading.Event()
        self._streams: dict[str, StreamState[S]] = {}
        self._dedup = DedupMemory(config.dedup_window_ms, config.dedup_max_outcomes)
        self._owned: set[int] = set()
        self._needed: dict[int, dict[str, int]] = {}
        self._floor: dict[int, int] = {}  # lower bound of the next events offset per partition
        self._delivered_end: dict[int, int] = {}
        self._low_water: dict[int, int] = {}
        self.rebuilds: list[RebuildReport] = []
        self.timings = BatchTimings()
        self._heap = HeapSettler(enabled=settle_heap)  # heap.py: why and when
        self.aborted = 0  # batches aborted and re-read (they took a producer's turn too)
        # Idle streams re-snapshotted per batch and partition at most (bounds a batch's extra work).
        self.refresh_limit = 500
        self._consumer_settings: dict[str, Any] = {
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
        self._consumer = make_consumer(self._consumer_settings, client_config=self.config.kafka_client)
        self._rejoined_at = -REJOIN_GUARD_S
        self._txn_since: float | None = None  # monotonic start of the open transaction, if one is open
        self._producers = tuple(
            make_producer(
                {
                    "bootstrap.servers": config.bootstrap_servers,
                    "transactional.id": f"{config.name}.processor.{instance_id}.{turn}",
                    "transaction.timeout.ms": config.transaction_timeout_ms,
                    "enable.idempotence": True,
                    # flush() ends every batch and sends at once whatever linger says (librdkafka
                    # #3489), so a long linger costs no latency: a batch's records leave in a few large
                    # requests instead of many small ones, which costs the broker much less CPU per
                    # event and lets more events through (bench/results/history.md).
                    "linger.ms": linger_ms,
                    # A refused AddPartitionsToTxn (previous markers still being written) is retried
                    # after this backoff, growing exponentially; librdkafka's 100 ms default would
                    # stall a whole batch.
                    "retry.backoff.ms": 2,
                    "retry.backoff.max.ms": 200,
                },
                client_config=config.kafka_client,
            )
            for turn in range(2)
        )
        self._producer = self._producers[0]
        self._reader = reader(config.bootstrap_servers, client_config=config.kafka_client)

    # --- lifecycle -------------------------------------------------------------------------------

    def run(self, *, max_idle_s: float | None = None) -> None:
        """Process until `stop_requested` is set (e.g. by SIGTERM) or idle for `max_idle_s`; closes
        the processor on return (a stopped processor is not run again: build a new one).

        Parameters:
            max_idle_s: return after this many seconds without a command; default None (never): a
                batch tool or a test drains the topic and returns.

        Raises:
            SubjectsNeedMigration: the store's schemas are still under the old subjects; raised
                before consuming anything, since found mid-transaction it would only crash the batch.
            ProcessorFenced: a newer instance with the same `instance_id` took over the transactional
                ids; this one must stop (the newer one aborted its open transaction).
            RegistryUnavailable: the registry did not answer while a batch needed a schema; the
                open transaction commits nothing, so a restart re-reads the same commands (rather
                than storing a wrong first outcome for them).
            EventStoreError: a transaction failed in a way that is neither abortable nor retriable.
            StoreConfigError: the commands topic has another partition count than the config says.
        """
        try:
            require_partitions(self._reader, self.config.commands_topic, self.config.partitions)
        except StoreConfigError:
            self.close()
            raise
        self.serde.require_migrated()
        for producer in self._producers:
            producer.init_transactions(self.config.transaction_timeout_ms / 1000)
        self._subscribe()
        idle_since = time.monotonic()
        try:
            while not self.stop_requested.is_set():
                msgs = take(self._consumer, self.batch_size, timeout=0.5)
                fatal = next((e for m in msgs if consumer_fatal(e := m.error())), None)
                if fatal is not None:
                    self._rejoin(fatal)
                elif msgs:
                    self._process(msgs)
                    idle_since = time.monotonic()
                elif max_idle_s is not None and time.monotonic() - idle_since > max_idle_s:
                    return
        finally:
            self.close()

    def close(self) -> None:
        """Leave the group and release the clients and the frozen heap (`run` does it on return)."""
        for client in (self._consumer, self._reader):
            with contextlib.suppress(RuntimeError):  # already closed
                client.close()
        for producer in self._producers:
            # A producer in a fatal state (fenced) cannot flush; its error is the one already raised.
            with contextlib.suppress(KafkaException):
                producer.flush(5)
        self._heap.release()

    # --- rebalance -------------------------------------------------------------------------------

    def _on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        lost = {tp.partition for tp in partitions}
        self._owned -= lost
        for partition in lost:
            self._forget_partition(partition)
        self._heap.full()
        log.info("revoked partitions %s", sorted(lost))

    def transaction_open_for(self) -> float:
        """Seconds the current transaction has been open (0: none). librdkafka can block a transactional
        call for good when the group's coordinator vanished (librdkafka #5511, #5456: the call ignores
        its timeout); past the transaction timeout nothing in this process can finish it, so the shell
        (`eventstore processor`) exits for its supervisor to restart it."""
        since = self._txn_since
        return 0.0 if since is None else time.monotonic() - since

    def _subscribe(self) -> None:
        self._consumer.subscribe(
            [self.config.commands_topic], on_assign=self._on_assign, on_revoke=self._on_revoke
        )

    def _rejoin(self, err: KafkaError) -> None:
        """A consumer error librdkafka calls fatal. A static member fenced while its group's coordinator
        failed over (its session expired under the failover and the rejoin raced an older request) is
        not a second instance: a new consumer with the same instance id takes the partitions back.
        Fenced again soon after, or any other fatal error: stop, naming it."""
        fenced = "fenced" in str(err).lower()
        if not fenced or time.monotonic() - self._rejoined_at < REJOIN_GUARD_S:
            raise ProcessorFenced(
                f"the processor's consumer failed for good ({err}); if another live processor has the same "
                "instance id, give each its own --instance-id, else restart this one"
            )
        log.warning("consumer fenced (%s), most likely by a coordinator failover: rejoining the group", err)
        self._rejoined_at = time.monotonic()
        self._on_revoke(self._consumer, [TopicPartition(self.config.commands_topic, p) for p in self._owned])
        with contextlib.suppress(KafkaException, RuntimeError):
            self._consumer.close()
        self._consumer = make_consumer(self._consumer_settings, client_config=self.config.kafka_client)
        self._subscribe()

    def _forget_partition(self, partition: int) -> None:
        """Drop what this processor holds for `partition` (revoked, or a rebuild to start over)."""
        for per_partition in (self._needed, self._floor, self._delivered_end, self._low_water):
            per_partition.pop(partition, None)
        self._streams = {
            s: st for s, st in self._streams.items() if partition_for(s, self.config.partitions) != partition
        }
        self._dedup.forget(lambda o: partition_for(o.stream_id, self.config.partitions) == partition)

    def _on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        for tp in partitions:
            started = time.monotonic()
            # An error raised here would escape from consume() and end the processor: a broker lost
            # while the group rebalances (its partitions' leaders move) is waited out instead.
            report = until_failover_ends(
                partial(self._rebuild, tp.partition),
                what=f"rebuilding partition {tp.partition}",
                deadline_s=REBUILD_FAILOVER_S,
                on_retry=partial(self._forget_partition, tp.partition),
            )
            report = replace(report, seconds=time.monotonic() - started)
            self.rebuilds.append(report)
            self._owned.add(tp.partition)
            log.info("partition %d rebuilt: %s", tp.partition, report)
        self._heap.full()

    def _rebuild(self, partition: int) -> RebuildReport:
        cfg, serde = self.config, self.serde
        outcome_msgs = self._read_all(cfg.outcomes_topic, partition)
        self._dedup.remember(
            (((m.key() or b"").decode(), serde.read_outcome(m.value() or b"")) for m in outcome_msgs),
            int(time.time() * 1000),
        )
        latest: dict[str, Message] = {}
        low_waters = []
        snapshot_msgs = self._read_all(cfg.snapshots_topic, partition)
        for m in snapshot_msgs:
            latest[(m.key() or b"").decode()] = m
            low_waters.append(int(header_map(m.headers()).get(H_LOW_WATER, "0")))
        snapshots = {s: serde.read_snapshot(m.value() or b"", m.headers()) for s, m in latest.items()}
        lo, hi = end_offsets(self._reader, cfg.events_topic, partition)
        first = start_offset(low_waters, lo)
        read = 0

        def tail() -> Iterator[TailRecord]:
            nonlocal read
            for m in read_range(self._reader, cfg.events_topic, partition, first, hi, timeout=self._timeout):
                read += 1
                h = header_map(m.headers())
                offset = m.offset() or 0
                position = Position(topic=cfg.events_topic, partition=partition, offset=offset)
                yield TailRecord(
                    offset=offset,
                    stream_id=h.get(H_STREAM, (m.key() or b"").decode()),
                    version=int(h.get(H_VERSION, "0")),
                    decode=partial(serde.read_event, position, m.value(), m.headers()),
                )

        rebuilt = fold_tail(self.aggregate, snapshots, tail())
        self._streams.update(rebuilt.streams)
        self._needed[partition] = rebuilt.needed
        self._floor[partition] = hi
        self._low_water[partition] = low_water(rebuilt.needed, hi)
        return RebuildReport(
            partition=partition,
            events_from=first,
            events_to=hi,
            events_read=read,
            events_decoded=rebuilt.decoded,
            snapshots_read=len(snapshot_msgs),
            outcomes_read=len(outcome_msgs),
            streams=len(rebuilt.streams),
            seconds=0.0,
        )

    @property
    def _timeout(self) -> float:
        return max(60.0, 2 * self.config.transaction_timeout_ms / 1000)

    def _read_all(self, topic: str, partition: int) -> list[Message]:
        lo, hi = end_offsets(self._reader, topic, partition)
        return list(read_range(self._reader, topic, partition, lo, hi, timeout=self._timeout))

    def cached_states(self) -> dict[str, StreamState[S]]:
        """A copy of the committed per-stream state this instance holds (for checks and tests)."""
        return dict(self._streams)

    # --- one batch, one transaction ----------------------------------------------------------------

    def _process(self, msgs: list[Message]) -> None:
        staged: Staged[S] = Staged()
        t = self.timings
        t0 = time.perf_counter()
        self._producer = self._producers[(self.timings.batches + self.aborted) % len(self._producers)]
        self._txn_since = time.monotonic()
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
            self._write_snapshots(staged, int(time.time() * 1000))
            t1 = time.perf_counter()
            self._producer.flush(self.config.transaction_timeout_ms / 1000)
            t2 = time.perf_counter()
            offsets = [
                TopicPartition(self.config.commands_topic, p, n) for p, n in staged.next_offsets.items()
            ]
            self._producer.send_offsets_to_transaction(offsets, self._consumer.consumer_group_metadata())
            t3 = time.perf_counter()
            self._producer.commit_transaction()
        except KafkaException as exc:
            self._recover(exc, staged)
            return
        finally:
            self._txn_since = None
        t.batches, t.commands = t.batches + 1, t.commands + len(msgs)
        t.handle_s += t1 - t0
        t.flush_s += t2 - t1
        t.offsets_s += t3 - t2
        t.commit_s += time.perf_counter() - t3
        self._streams.update(staged.streams)
        self._dedup.remember(staged.outcomes.items(), int(time.time() * 1000))
        for partition, needed in staged.needed.items():
            self._needed.setdefault(partition, {}).update(needed)
        for partition, streams in staged.snapshotted.items():
            for stream in streams:
                self._needed.setdefault(partition, {}).pop(stream, None)
        self._low_water.update(staged.low_water)
        for partition, end in self._delivered_end.items():
            self._floor[partition] = max(self._floor.get(partition, 0), end)
        self._heap.settle()

    def _write_snapshots(self, staged: Staged[S], now: int) -> None:
        """Step 2's tail: the batch's snapshots, each carrying the positions a takeover needs."""
        if self.config.snapshot_every <= 0:
            return
        for partition in staged.next_offsets:
            floor = self._floor.get(partition, 0)
            # A view, not a copy: plan_snapshots only walks it when the low-water mark may move.
            needed = ChainMap(staged.needed.get(partition, {}), self._needed.get(partition, {}))
            plan = plan_snapshots(
                needed,
                (s for s, p in staged.due.items() if p == partition),
                floor=floor,
                known_low_water=self._low_water.get(partition, 0),
                window=self.config.rebuild_window,
                limit=self.refresh_limit,
            )
            if plan is None:
                continue
            staged.snapshotted[partition] = plan.streams
            for stream in plan.streams:
                current = staged.streams.get(stream) or self._streams[stream]
                snap = Snapshot(
                    stream_id=stream,
                    version=current.version,
                    state=current.state,
                    events_offset=plan.events_offset,
                    low_water=plan.low_water,
                )
                key, value, headers = self.serde.snapshot_value(snap)
                self._produce(self.config.snapshots_topic, partition, key, value, headers, now)
            staged.low_water[partition] = plan.low_water

    def _recover(self, exc: KafkaException, staged: Staged[S]) -> None:
        err: KafkaError = exc.args[0]
        if err.fatal() or err.code() in (KafkaError._FENCED, KafkaError.PRODUCER_FENCED):
            raise ProcessorFenced(
                f"processor fenced ({err}); another instance owns this transactional id — stop this one"
            ) from exc
        if not err.txn_requires_abort() and not err.retriable():
            raise EventStoreError(f"transaction failed and cannot be retried: {err}") from exc
        log.warning("aborting transaction (%s); re-reading the batch", err)
        self.aborted += 1
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
        prior = staged.outcomes.get(command_id) or self._dedup.get(command_id, now)
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
            command = self.serde.read_command(msg.value(), msg.headers(), h)
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
            self._produce(self.config.events_topic, partition, key, value, headers, now, self._delivered)
        staged_needed = staged.needed.setdefault(partition, {})
        stream = command.stream_id
        if decision.events and stream not in staged_needed and stream not in self._needed.get(partition, {}):
            # Its first event not in a snapshot lands at or after the floor this batch started from.
            staged_needed[stream] = self._floor.get(partition, 0)
        if snapshot_due(current.version, decision.after.version, self.config.snapshot_every):
            staged.due[command.stream_id] = partition
        staged.streams[command.stream_id] = decision.after
        return decision.outcome

    def _reply(self, outcome: Outcome, reply_partition: int, value: bytes | None = None) -> None:
        value = value if value is not None else self.serde.outcome_value(outcome)
        headers = [(H_COMMAND_ID, outcome.command_id.encode())]
        self._produce(
            self.config.replies_topic, reply_partition, outcome.command_id.encode(), value, headers, None
        )

    def _delivered(self, err: KafkaError | None, msg: Message) -> None:
        # Offsets of delivered events raise the floor: the next batch's events land after them.
        if err is None and msg.offset() is not None:
            partition = msg.partition() or 0
            end = self._delivered_end.get(partition, 0)
            self._delivered_end[partition] = max(end, (msg.offset() or 0) + 1)

    def _produce(
        self,
        topic: str,
        partition: int,
        key: bytes,
        value: bytes,
        headers: Any,
        timestamp: int | None,
        on_delivery: Any = None,
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
                    on_delivery=on_delivery,
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
