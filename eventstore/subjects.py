"""Registry subject names: `<topic>-<record full name>` (Confluent's TopicRecordNameStrategy).

A Confluent or Apicurio serde configured with TopicRecordNameStrategy looks a record's schema up under
the topic the record is written to plus the Avro full name of the record (namespace + "." + name), so
the store registers each record type under every topic it writes that type to: commands in
`<store>.commands`, events in `<store>.events`, the state in `<store>.snapshots`, the outcome in both
`<store>.outcomes` and `<store>.replies`. One schema text has one id in every subject (Confluent and
Apicurio alike), so a record carries the same id whichever of its topics it lands in.

Stores registered before this used `<store>-<record type>` ("legacy" subjects). Their records stay
readable (readers look schemas up by id), but new subjects must not be started beside an old history:
they would not know the versions registered before. `unmigrated` finds such stores; migration.py
moves them.

Pure: no registry access; whether a subject exists is asked through a predicate.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from eventstore.aggregate import Aggregate, type_name
from eventstore.config import StoreConfig
from eventstore.errors import SchemaNotFound, SubjectsNeedMigration
from eventstore.schemas import OUTCOME, Catalog


def full_name(schema_text: str) -> str:
    """The Avro full name of a named schema: `namespace.name` (a dotted name is already full)."""
    doc = json.loads(schema_text)
    name = str(doc["name"])
    namespace = doc.get("namespace")
    return name if "." in name or not namespace else f"{namespace}.{name}"


def subject(topic: str, record_full_name: str) -> str:
    return f"{topic}-{record_full_name}"


def legacy_subject(store: str, record_type: str) -> str:
    """The subject stores used before TopicRecordNameStrategy: `<store>-<record type>`."""
    return f"{store}-{record_type}"


def record_topics(config: StoreConfig, aggregate: Aggregate[Any]) -> dict[str, tuple[str, ...]]:
    """Record type -> every topic the store writes it to (a type in two roles gets both topics)."""
    pairs = [
        *((type_name(c), config.commands_topic) for c in aggregate.command_types),
        *((type_name(c), config.events_topic) for c in aggregate.event_types),
        (type_name(aggregate.state_type), config.snapshots_topic),
        (OUTCOME, config.outcomes_topic),
        (OUTCOME, config.replies_topic),
    ]
    topics: dict[str, tuple[str, ...]] = {}
    for record_type, topic in pairs:
        known = topics.get(record_type, ())
        topics[record_type] = known if topic in known else (*known, topic)
    return topics


@dataclass(frozen=True, slots=True)
class StoreSubjects:
    """Every subject of one store: the current ones per record type and the legacy one each replaces."""

    store: str
    current: Mapping[str, tuple[str, ...]]
    legacy: Mapping[str, str]

    @classmethod
    def build(cls, config: StoreConfig, aggregate: Aggregate[Any], catalog: Catalog) -> StoreSubjects:
        topics = record_topics(config, aggregate)
        current = {
            t: tuple(subject(topic, full_name(catalog.text(t))) for topic in topics[t]) for t in topics
        }
        return cls(config.name, current, {t: legacy_subject(config.name, t) for t in current})

    def of(self, record_type: str) -> tuple[str, ...]:
        try:
            return self.current[record_type]
        except KeyError:
            raise SchemaNotFound(
                f"no subject for record type {record_type!r}; known types: {sorted(self.current)}"
            ) from None


def unmigrated(names: StoreSubjects, exists: Callable[[str], bool]) -> tuple[str, ...]:
    """Legacy subjects that exist while their record type is not yet under every one of its new subjects.

    A record type without a legacy subject (new since, or a fresh store) needs nothing: only then does
    `exists` get asked about the new subjects, so a fresh store costs one question per record type.
    """
    return tuple(
        old
        for record_type, old in sorted(names.legacy.items())
        if exists(old) and not all(exists(s) for s in names.current[record_type])
    )


def require_migrated(names: StoreSubjects, exists: Callable[[str], bool]) -> None:
    """Raise SubjectsNeedMigration, naming the old subjects and the command that moves them."""
    old = unmigrated(names, exists)
    if old:
        raise SubjectsNeedMigration(
            f"store {names.store!r} has schemas only under the old subjects {', '.join(old)}; "
            f"run `eventstore schemas migrate --name {names.store}` to copy their versions to the "
            "<topic>-<record full name> subjects, then retry (nothing was registered)",
            store=names.store,
            subjects=old,
        )
