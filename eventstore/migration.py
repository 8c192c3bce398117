"""Moving a store's schemas from the old `<store>-<record type>` subjects to `<topic>-<record full name>`.

Guarantees:
- Every version of each old subject is registered under each new subject of its record type, oldest
  first, so a new subject's version history (what a BACKWARD check compares with) is the old one's.
- Each version is registered byte for byte as it was (`Registry.versions`), and one schema text has
  one id in every subject, so the new subjects' versions have the ids that records already written
  carry, and new records carry them too. Old subjects are left in place: nothing reading by id breaks.
- Repeatable: a version whose text is already under the new subject is skipped, so a second run
  changes nothing and an interrupted run is finished by the next.
Assumption: nobody registers under the new subjects while the migration runs.

`plan` is pure (what to do, given the subjects' histories); `migrate` reads the histories and does it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Literal

from eventstore.registry import Registered, Registry
from eventstore.schemas import canonical
from eventstore.subjects import StoreSubjects

Status = Literal["to copy", "copied", "already there"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Step:
    """One old version and where it goes; `new_version` is 0 until it is under the new subject."""

    record_type: str
    old_subject: str
    old_version: int
    new_subject: str
    new_version: int
    schema_id: int
    status: Status
    text: str = field(repr=False, compare=False)


def plan(names: StoreSubjects, history: Mapping[str, Sequence[Registered]]) -> tuple[Step, ...]:
    """The steps, in the order they must run; `history` holds the versions of every existing subject."""
    steps = []
    for record_type, old in sorted(names.legacy.items()):
        for new in names.current[record_type]:
            there = {canonical(r.text): r.version for r in history.get(new, ())}
            for version in sorted(history.get(old, ()), key=lambda r: r.version):
                found = there.get(canonical(version.text), 0)
                steps.append(
                    Step(
                        record_type=record_type,
                        old_subject=old,
                        old_version=version.version,
                        new_subject=new,
                        new_version=found,
                        schema_id=version.schema_id,
                        status="already there" if found else "to copy",
                        text=version.text,
                    )
                )
    return tuple(steps)


def migrate(registry: Registry, names: StoreSubjects) -> tuple[Step, ...]:
    """Copy what `plan` says is missing; returns every step with what became of it."""
    history = {old: registry.versions(old) for old in names.legacy.values()}
    for record_type, old in names.legacy.items():
        if history[old]:
            history.update({new: registry.versions(new) for new in names.current[record_type]})
    return tuple(_run(registry, step) for step in plan(names, history))


def _run(registry: Registry, step: Step) -> Step:
    if step.status != "to copy":
        return step
    schema_id = registry.register(step.new_subject, step.text)
    latest = registry.latest(step.new_subject)
    return replace(step, status="copied", schema_id=schema_id, new_version=latest.version if latest else 0)
