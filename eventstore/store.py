"""The event store as one object: a store's topics, its schema registry and its serde, wired once.

`EventStore(config, aggregate)` is the entry point for applications, the CLI, the demo and the tests:
it checks that the config and the aggregate can work together, builds the registry client and the one
`Serde` of the store, and hands out the parts that talk to Kafka (`client`, `processor`, `reader`) with
that wiring, so no caller assembles `Serde(aggregate, HttpRegistry(url), store=config)` by hand.

Guarantees and assumptions:
- The constructor writes nothing and calls no service: a config or aggregate that cannot work raises
  `StoreConfigError` there, naming the problem and the fix (an aggregate without event types or
  without a schema file per record type, an unparsable schema, an empty or non-HTTP registry URL, no
  bootstrap servers). Topics and subjects are only ever created by `init()`.
- Everything built by one `EventStore` shares its `Serde`, hence one registry client and one cache of
  schema ids and parsed schemas. `HttpRegistry` (httpx) may be shared by threads and the caches only
  gain entries that are the same whichever thread adds them; `EventStoreClient` itself is not
  thread-safe, so take one client per thread (`client()` builds a new one each call).
- Topic names, registry subjects and transactions are exactly those of the parts it wires
  (topics.py, subjects.py, processor.py, replay.py): the facade adds no behaviour of its own.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import closing
from dataclasses import dataclass
from typing import Any, Generic, TypedDict, TypeVar, Unpack
from urllib.parse import urlparse

from fastavro import parse_schema
from fastavro.schema import SchemaParseException

from eventstore.aggregate import Aggregate, type_name
from eventstore.client import EventStoreClient
from eventstore.config import StoreConfig
from eventstore.decision import StreamState
from eventstore.envelope import EventEnvelope
from eventstore.errors import StoreConfigError
from eventstore.processor import CommandProcessor
from eventstore.reading import EventReader
from eventstore.registration import SubjectReport, register_all
from eventstore.registry import HttpRegistry, Registry
from eventstore.replay import ReplayReport, as_json, read_records, replay_to_topic
from eventstore.serde import Serde
from eventstore.topics import ensure_topics
from kafkakit.positions import Edge, StartPosition

S = TypeVar("S")
EARLIEST = Edge("earliest")


class ProcessorOptions(TypedDict, total=False):
    """`CommandProcessor`'s tuning keywords (its defaults apply to those left out)."""

    batch_size: int
    session_timeout_ms: int
    linger_ms: float
    settle_heap: bool


@dataclass(frozen=True, slots=True)
class InitReport:
    """What `init` did: (topic, "created" | "exists") pairs and one report per registry subject."""

    topics: tuple[tuple[str, str], ...]
    schemas: tuple[SubjectReport, ...]


class EventStore(Generic[S]):
    """One event store: the topics named by `config`, the aggregate's schemas in the registry, and the
    serde between them; builds clients, processors and readers wired to all three, so that no caller
    assembles a `Serde` and a registry client by hand (and every part shares one schema cache).

    Parameters:
        config: the store's settings (`StoreConfig.from_env()` reads them from the environment): its
            `name` prefixes every topic (`<name>.events`, `<name>.commands`, ...) and hence every
            registry subject; `bootstrap_servers` and `schema_registry_url` say where Kafka and the
            Confluent-compatible registry answer.
        aggregate: the decider whose commands the store accepts and whose events it appends; every
            record type it declares needs an Avro schema file `<type>.avsc` in its `schema_dir`.
        registry: the schema registry to use instead of an `HttpRegistry` on
            `config.schema_registry_url` (e.g. `MemoryRegistry()` in unit tests or offline tools);
            the store does not close a registry it was given. Default: None (an `HttpRegistry`).

    Raises:
        StoreConfigError: the config and the aggregate cannot work together (no bootstrap servers, a
            registry URL that is not http(s), a record type without a valid `.avsc`, two classes
            under one type string); raised before anything is written or any service is called.

    Example: docs/examples/event_store.py (`init` once per store, a processor running somewhere,
    then clients):

        >>> store = EventStore(StoreConfig.from_env().with_overrides(name="shop"), ORDER)
        >>> report = store.init()  # topics + schema registration, repeatable
        >>> threading.Thread(target=store.processor(instance_id="shop-1").run, daemon=True).start()
        >>> with store.client() as client:
        ...     client.execute(CreateOrder(order_id="42", customer_id="c-7"), expected_version=0)
        Outcome(command_id='...', stream_id='order-42', status='ok', first_version=1, last_version=1, ...)
        >>> [e.event_type for e in store.read("order-42")]
        ['order.created']
    """

    def __init__(
        self, config: StoreConfig, aggregate: Aggregate[S], *, registry: Registry | None = None
    ) -> None:
        check(config, aggregate, registry_given=registry is not None)
        self.config = config
        self.aggregate = aggregate
        self._owns_registry = registry is None
        self.registry: Registry = (
            HttpRegistry(config.schema_registry_url, auth=config.schema_registry_auth)
            if registry is None
            else registry
        )
        self.serde = Serde(aggregate, self.registry, store=config)

    def close(self) -> None:
        """Close the registry client this store made; a registry passed in stays open (its owner closes
        it), and clients, processors and readers close themselves."""
        if self._owns_registry and isinstance(self.registry, HttpRegistry):
            self.registry.close()

    def __enter__(self) -> EventStore[S]:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- set-up ----------------------------------------------------------------------------------

    def init(self) -> InitReport:
        """Create the missing topics (verifying existing ones), then register the schemas. Repeatable:
        a second call creates and registers nothing, so every process may call it at start-up.

        Returns:
            What it did: each topic "created" or "exists", and one report per registry subject.

        Raises:
            TopicSetupError: Kafka is unreachable, a topic could not be created, or one exists with
                another partition count or cleanup policy than the store needs (the message names
                it and the fix).
            SchemaIncompatible: a changed `.avsc` cannot read what the registered version wrote;
                then nothing is registered.
            SubjectsNeedMigration: the store's schemas are still under the old subjects.
            RegistryUnavailable: the registry did not answer or answered with an error.
        """
        topics = ensure_topics(self.config)
        return InitReport(tuple(topics), tuple(self.register_schemas()))

    def register_schemas(self, *, dry_run: bool = False) -> list[SubjectReport]:
        """Register new and evolved schemas: all of them, or none if any is incompatible.

        Parameters:
            dry_run: check each subject against the registry and report, registering nothing (what
                `eventstore schemas check` shows). Default: False.

        Raises:
            SchemaIncompatible, SubjectsNeedMigration, RegistryUnavailable: as `init`.
        """
        return register_all(self.serde, dry_run=dry_run)

    # --- the parts -------------------------------------------------------------------------------

    def client(self, *, reply_partition: int | None = None) -> EventStoreClient[S]:
        """A new `EventStoreClient`; take one per thread (a client is not thread-safe).

        Parameters:
            reply_partition: the partition of `<name>.replies` the client listens on; default None
                (a random one). Pin it to spread many clients evenly over the partitions.

        Raises:
            OutcomeUnknown: Kafka is unreachable (with `may_have_been_applied=False`: nothing sent).
        """
        return EventStoreClient(self.config, self.aggregate, self.serde, reply_partition=reply_partition)

    def processor(self, instance_id: str, **options: Unpack[ProcessorOptions]) -> CommandProcessor[S]:
        """A new `CommandProcessor`, one member of the store's processor group; `run()` it.

        Parameters:
            instance_id: stable across restarts of the same instance (it names the static group
                membership and the transactional ids, so a restart fences its dead predecessor);
                two live processors must never share one.
            **options: `batch_size`, `session_timeout_ms`, `linger_ms`, `settle_heap`, as
                `CommandProcessor` documents them.
        """
        return CommandProcessor(self.config, self.aggregate, self.serde, instance_id=instance_id, **options)

    def reader(self) -> EventReader[S]:
        """A reader of committed events (`read_committed`), for several reads on one consumer; close it
        when done (`read`, `load` and `subscribe` open and close one each)."""
        return EventReader(self.config, self.aggregate, self.serde)

    # --- reads -----------------------------------------------------------------------------------

    def read(self, stream_id: str) -> list[EventEnvelope]:
        """One stream's committed events in version order ([] for a stream never written).

        Parameters:
            stream_id: the stream, as the aggregate's `stream_id` names it (`order-42`).

        Raises:
            CorruptStream: the stored versions have a gap or a duplicate.
            UndecodableRecord: an event cannot be decoded (named by topic, partition, offset).
        """
        with closing(self.reader()) as events:
            return events.read_stream(stream_id)

    def load(self, stream_id: str) -> StreamState[S]:
        """One stream's current version and state: its latest snapshot plus the events after it, so a
        long stream is not read from version 1 (version 0 and the initial state if never written).

        Raises:
            CorruptStream, UndecodableRecord: as `read`.
        """
        with closing(self.reader()) as events:
            return events.load(stream_id)

    def subscribe(
        self,
        start: StartPosition = EARLIEST,
        *,
        until_end: bool = False,
        idle_timeout: float | None = None,
    ) -> Iterator[EventEnvelope]:
        """Committed events from `start`, in order within each partition (so within each stream).

        Parameters:
            start: where to begin: `Edge("earliest")` (the default), `Edge("latest")`, offsets per
                partition or a timestamp (`kafkakit.positions`).
            until_end: stop at the end offsets seen when the subscription began, instead of
                following new events. Default: False.
            idle_timeout: stop after this many seconds without a record; default None (never).

        Raises:
            UndecodableRecord: an event cannot be decoded and no dead-letter topic is configured
                (`StoreConfig.dlq_topic`) to take it, or that topic did not take it.
        """
        with closing(self.reader()) as events:
            yield from events.subscribe(start, until_end=until_end, idle_timeout=idle_timeout)

    # --- replay ----------------------------------------------------------------------------------

    def replay(
        self,
        start: StartPosition,
        *,
        to_topic: str,
        topic: str | None = None,
        until: dict[int, int] | None = None,
        on_batch: Callable[[int], None] | None = None,
    ) -> ReplayReport:
        """Copy a topic's records from `start` to `to_topic`, exactly once: each batch's records and
        the replay's progress commit in one transaction, so a replay killed midway and run again
        neither loses nor duplicates a record (replay.py).

        Parameters:
            start: where the copy begins (offsets per partition, an edge or a timestamp).
            to_topic: the destination; created with the source's partition count if missing.
            topic: the source; default None (the store's events topic).
            until: partition -> end offset (exclusive); default None (the end offsets seen when the
                replay starts).
            on_batch: called with the number of records copied so far after each committed batch
                (progress output); default None.

        Raises:
            ReplayError: an empty range, the source as destination, a destination with fewer
                partitions than the source or that cannot be created, or a failed transaction (run
                again: it resumes safely).
        """
        source = self.config.events_topic if topic is None else topic
        bootstrap = self.config.bootstrap_servers
        return replay_to_topic(
            bootstrap,
            source,
            start,
            to_topic,
            until=until,
            on_batch=on_batch,
            client_config=self.config.kafka_client,
        )

    def dump(
        self, start: StartPosition, *, topic: str | None = None, until: dict[int, int] | None = None
    ) -> Iterator[dict[str, Any]]:
        """The records of a topic from `start` as JSON-ready dicts, Avro values decoded with their
        writer schema from the store's registry (`replay.as_json`): what `eventstore replay
        --to-stdout` prints.

        Parameters:
            start: where to begin (offsets per partition, an edge or a timestamp).
            topic: default None (the store's events topic).
            until: partition -> end offset (exclusive); default None (the ends seen at the start).

        Raises:
            ReplayError: the range names no partition being read.
        """
        source = self.config.events_topic if topic is None else topic
        for msg in read_records(
            self.config.bootstrap_servers, source, start, until, client_config=self.config.kafka_client
        ):
            yield as_json(msg, self.registry)


def check(config: StoreConfig, aggregate: object, *, registry_given: bool = False) -> None:
    """Raise StoreConfigError naming every reason `config` and `aggregate` cannot make a store."""
    if not isinstance(aggregate, Aggregate):
        raise StoreConfigError(
            f"EventStore needs an eventstore.Aggregate, got a {type(aggregate).__name__}; "
            "build one with Aggregate(name=..., decide=..., evolve=..., event_types=(...), ...)"
        )
    problems = [*_endpoint_problems(config, registry_given), *_aggregate_problems(aggregate)]
    if problems:
        raise StoreConfigError(
            f"event store {config.name!r} cannot work ({len(problems)} problem(s); nothing was written): "
            + "; ".join(problems)
        )


def _endpoint_problems(config: StoreConfig, registry_given: bool) -> list[str]:
    problems = []
    if not config.bootstrap_servers.strip():
        problems.append(
            "no Kafka bootstrap servers: set KAFKA_BOOTSTRAP_SERVERS or StoreConfig(bootstrap_servers=...)"
        )
    url = config.schema_registry_url.strip()
    if registry_given:
        return problems
    if not url:
        problems.append(
            "no schema registry URL: set SCHEMA_REGISTRY_URL or StoreConfig(schema_registry_url=...), "
            "e.g. http://127.0.0.1:18080/apis/ccompat/v7 (or pass registry=MemoryRegistry() offline)"
        )
    elif urlparse(url).scheme not in ("http", "https") or not urlparse(url).netloc:
        problems.append(
            f"schema registry URL {url!r} is not an http(s) URL; write it whole, "
            "e.g. http://127.0.0.1:18080/apis/ccompat/v7"
        )
    return problems


def _aggregate_problems(aggregate: Aggregate[Any]) -> list[str]:
    problems = [
        f"aggregate {aggregate.name!r} declares no {what}; list its classes in Aggregate({what}=(...))"
        for what, found in (
            ("event_types", aggregate.event_types),
            ("command_types", aggregate.command_types),
        )
        if not found
    ]
    problems.extend(_clashes(aggregate))
    missing = [t for t in aggregate.record_types() if not (aggregate.schema_dir / f"{t}.avsc").is_file()]
    if missing:
        problems.append(
            f"aggregate {aggregate.name!r} has no Avro schema for {', '.join(missing)} in "
            f"{aggregate.schema_dir}; add a <type>.avsc file per record type there, or point "
            "schema_dir at the folder that holds them"
        )
    problems.extend(_unreadable(aggregate, set(missing)))
    return problems


def _clashes(aggregate: Aggregate[Any]) -> list[str]:
    """Two classes under one type string: the store could not tell their records apart."""
    seen: dict[str, type] = {}
    problems = []
    for cls in (*aggregate.command_types, *aggregate.event_types, aggregate.state_type):
        name = type_name(cls)
        other = seen.setdefault(name, cls)
        if other is not cls:
            problems.append(
                f"{other.__name__} and {cls.__name__} both declare the type {name!r}; give each its own"
            )
    return problems


def _unreadable(aggregate: Aggregate[Any], missing: set[str]) -> list[str]:
    problems = []
    for record_type in aggregate.record_types():
        if record_type in missing:
            continue
        try:
            doc = json.loads(aggregate.schema_text(record_type))
            parse_schema(doc)
            named = isinstance(doc, dict) and doc.get("type") == "record" and "name" in doc
        except (ValueError, KeyError, TypeError, SchemaParseException) as exc:
            problems.append(f"{record_type}.avsc is not a valid Avro schema ({exc}); fix the file")
            continue
        if not named:
            problems.append(f"{record_type}.avsc must define a named Avro record; wrap its fields in one")
    return problems
