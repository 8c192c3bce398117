"""Registering a store's schemas, refusing versions that cannot read the data already written.

For each record type and each of its subjects (`<topic>-<record full name>`, one per topic it is written
to): if the subject has a registered schema that differs from the local file, the new one must pass BOTH
the local check (structural walk + fastavro resolution, schemas.check_backward) and the registry's
compatibility endpoint under a BACKWARD rule; only then is it registered. A store whose schemas are
still under the old `<store>-<record type>` subjects is refused (SubjectsNeedMigration) until migrated.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from eventstore.errors import SchemaIncompatible
from eventstore.schemas import canonical, check_backward
from eventstore.serde import Serde

Status = Literal["unchanged", "new", "evolved", "compatible", "would-register"]


@dataclass(frozen=True, slots=True)
class SubjectReport:
    subject: str
    record_type: str
    status: Status
    version: int
    schema_id: int


def check_one(serde: Serde, record_type: str, subject: str) -> Status:
    """Raise SchemaIncompatible if the local schema of `record_type` may not replace `subject`'s latest."""
    text = serde.catalog.text(record_type)
    latest = serde.registry.latest(subject)
    if latest is None:
        return "new"
    if canonical(latest.text) == canonical(text):
        return "unchanged"
    check_backward(subject, latest.text, text)
    ok, messages = serde.registry.is_compatible(subject, text)
    if not ok:
        raise SchemaIncompatible(
            f"the registry refuses the new schema for {subject}: {'; '.join(messages) or 'not BACKWARD compatible'}; "
            "give new fields defaults and keep old fields' types",
            subject=subject,
            field="; ".join(messages) or "?",
        )
    return "compatible"


def register_all(serde: Serde, *, dry_run: bool = False) -> list[SubjectReport]:
    """Check every subject first, then register (so one bad schema registers nothing).

    Refuses a store still under the old subjects before anything else, a dry run included.
    """
    serde.require_migrated()
    pairs = [(t, s) for t in sorted(serde.catalog.texts) for s in serde.subjects(t)]
    statuses = {(t, s): check_one(serde, t, s) for t, s in pairs}
    reports = []
    for (record_type, subject), status in statuses.items():
        if dry_run:
            latest = serde.registry.latest(subject)
            reports.append(
                SubjectReport(
                    subject,
                    record_type,
                    status if status == "unchanged" else "would-register",
                    latest.version if latest else 0,
                    latest.schema_id if latest else 0,
                )
            )
            continue
        schema_id = serde.schema_id(record_type)
        latest = serde.registry.latest(subject)
        final: Status = "evolved" if status == "compatible" else status
        reports.append(SubjectReport(subject, record_type, final, latest.version if latest else 1, schema_id))
    return reports
