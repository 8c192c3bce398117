"""An append-only, exactly-once event store on Kafka.

Public API (each name is imported on first use, so `import eventstore.errors` stays light):

    >>> from eventstore import EventStore, StoreConfig, WrongExpectedVersion
    >>> from shop.order import ORDER, AddLine
    >>> store = EventStore(StoreConfig.from_env().with_overrides(name="shop"), ORDER)
    >>> store.init()                                  # topics + Avro schemas, repeatable
    >>> with store.client() as client:
    ...     try:
    ...         client.execute(AddLine(order_id="42", sku="A-1", quantity=1, unit_price_cents=250),
    ...                        expected_version=3)
    ...     except WrongExpectedVersion as exc:       # the stream moved: read again, decide again
    ...         print(exc.actual)

- `EventStore`: the facade wiring a `StoreConfig` and an `Aggregate` to topics, registry and serde;
  it builds `EventStoreClient`s (send commands, await outcomes), `CommandProcessor`s (decide and
  append in Kafka transactions) and `EventReader`s, and reads, subscribes and replays.
- `Aggregate`: what a user supplies, a decider over frozen dataclasses plus its Avro schema folder.
- The records: `EventEnvelope`, `Outcome`, `Position`, `StreamState`; `MemoryRegistry` for tests.
- Errors, all under `EventStoreError` (itself a `kafkakit.ToolkitError`): `DomainError` (subclass it
  for business rules), `WrongExpectedVersion`, `SchemaViolation`, `CommandRejected`, `OutcomeUnknown`
  (retrying with the same command id is safe), `StoreConfigError` (the store cannot work as
  configured), and the infrastructure ones.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from eventstore.errors import (
    CommandRejected,
    CorruptStream,
    DomainError,
    EventStoreError,
    OutcomeUnknown,
    ProcessorFenced,
    RegistryUnavailable,
    ReplayError,
    SchemaIncompatible,
    SchemaNotFound,
    SchemaViolation,
    StoreConfigError,
    StreamNotFound,
    SubjectsNeedMigration,
    TopicSetupError,
    UndecodableRecord,
    WrongExpectedVersion,
)
from kafkakit.exports import lazy_exports

__all__ = [
    "Aggregate",
    "CommandProcessor",
    "CommandRejected",
    "CorruptStream",
    "DomainError",
    "EventEnvelope",
    "EventReader",
    "EventStore",
    "EventStoreClient",
    "EventStoreError",
    "InitReport",
    "MemoryRegistry",
    "Outcome",
    "OutcomeUnknown",
    "Pending",
    "Position",
    "ProcessorFenced",
    "RegistryUnavailable",
    "ReplayError",
    "ReplayReport",
    "SchemaIncompatible",
    "SchemaNotFound",
    "SchemaViolation",
    "StoreConfig",
    "StoreConfigError",
    "StreamNotFound",
    "StreamState",
    "SubjectReport",
    "SubjectsNeedMigration",
    "TopicSetupError",
    "UndecodableRecord",
    "WrongExpectedVersion",
]

if TYPE_CHECKING:
    from eventstore.aggregate import Aggregate
    from eventstore.client import EventStoreClient, Pending
    from eventstore.config import StoreConfig
    from eventstore.decision import StreamState
    from eventstore.envelope import EventEnvelope, Outcome, Position
    from eventstore.processor import CommandProcessor
    from eventstore.reading import EventReader
    from eventstore.registration import SubjectReport
    from eventstore.registry import MemoryRegistry
    from eventstore.replay import ReplayReport
    from eventstore.store import EventStore, InitReport

__getattr__, __dir__ = lazy_exports(
    __name__,
    __all__,
    {
        "eventstore.aggregate": ("Aggregate",),
        "eventstore.client": ("EventStoreClient", "Pending"),
        "eventstore.config": ("StoreConfig",),
        "eventstore.decision": ("StreamState",),
        "eventstore.envelope": ("EventEnvelope", "Outcome", "Position"),
        "eventstore.processor": ("CommandProcessor",),
        "eventstore.reading": ("EventReader",),
        "eventstore.registration": ("SubjectReport",),
        "eventstore.registry": ("MemoryRegistry",),
        "eventstore.replay": ("ReplayReport",),
        "eventstore.store": ("EventStore", "InitReport"),
    },
)
