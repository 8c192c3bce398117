"""Errors raised by the eventstore package; all derive from `kafkakit.errors.ToolkitError`.

Every message says what went wrong and what to do next. Domain errors (raised by a decider) derive from
`DomainError` and carry a stable `code` so they survive the trip through the reply topic.
"""

from __future__ import annotations

from typing import ClassVar

from kafkakit.errors import ConfigError, ToolkitError


class EventStoreError(ToolkitError):
    """Root of the eventstore package's errors."""


class StoreConfigError(EventStoreError, ConfigError):
    """An `EventStore` cannot work with this config or aggregate; raised before anything is written.

    The message names what is wrong and how to fix it (a missing schema file, an empty registry URL).
    """


class DomainError(EventStoreError):
    """A command broke a business rule; nothing was appended. Subclasses set a stable `code`."""

    code: ClassVar[str] = "domain_error"


class WrongExpectedVersion(EventStoreError):
    """The stream moved since the caller read it; nothing was appended."""

    def __init__(self, message: str, *, stream_id: str, expected: int | None, actual: int) -> None:
        super().__init__(message)
        self.stream_id = stream_id
        self.expected = expected
        self.actual = actual


class SchemaViolation(EventStoreError):
    """A record does not match its Avro schema; `field` names the offending field."""

    def __init__(self, message: str, *, field: str, reason: str) -> None:
        super().__init__(message)
        self.field = field
        self.reason = reason


class CommandRejected(EventStoreError):
    """The processor refused a command it could not read (unknown type, schema mismatch)."""


class SchemaIncompatible(EventStoreError):
    """A new schema version cannot read data written with the registered one; nothing was registered."""

    def __init__(self, message: str, *, subject: str, field: str) -> None:
        super().__init__(message)
        self.subject = subject
        self.field = field


class SchemaNotFound(EventStoreError):
    """No .avsc file or registry entry exists for a record type or schema id."""


class RegistryUnavailable(EventStoreError):
    """The schema registry cannot be reached or answered with an error."""


class UndecodableRecord(EventStoreError):
    """A stored record cannot be decoded (unknown event type or schema id, bad bytes).

    The message names topic/partition/offset; the record is never silently skipped.
    """

    def __init__(self, message: str, *, topic: str, partition: int, offset: int) -> None:
        super().__init__(message)
        self.topic = topic
        self.partition = partition
        self.offset = offset


class OutcomeUnknown(EventStoreError):
    """The caller could not learn a command's outcome. Retrying with the same command id is safe.

    `may_have_been_applied` is False only when the command certainly never reached Kafka.
    """

    def __init__(self, message: str, *, command_id: str, may_have_been_applied: bool) -> None:
        super().__init__(message)
        self.command_id = command_id
        self.may_have_been_applied = may_have_been_applied


class StreamNotFound(EventStoreError):
    """A stream has no committed events (never written, or a mistyped id)."""


class CorruptStream(EventStoreError):
    """A stream's stored versions have a gap or duplicate; the log needs investigation."""


class ProcessorFenced(EventStoreError):
    """Another processor instance took over this one's transactional id; this instance must stop."""


class TopicSetupError(EventStoreError):
    """Topics are missing or were created with the wrong configuration."""


class ReplayError(EventStoreError):
    """A replay cannot start or continue (bad range, destination mismatch)."""


class SubjectsNeedMigration(EventStoreError):
    """The store's schemas are registered only under the old `<store>-<record type>` subjects.

    Nothing was registered: fresh `<topic>-<record full name>` subjects would start a second version
    history beside the old one. `subjects` names the old subjects; `eventstore schemas migrate` moves them.
    """

    def __init__(self, message: str, *, store: str, subjects: tuple[str, ...]) -> None:
        super().__init__(message)
        self.store = store
        self.subjects = subjects
