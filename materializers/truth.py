"""What the source of truth says a materializer's views must hold, and how a view differs from it.

`verify` computes one `Truth` per run (the Postgres table for a CDC materializer, the fold of the
whole event topic for an event-sourced one) and hands it to every view, which compares what it holds
with `compare` (pure). A view's differences name the view, so one report covers every store.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True, slots=True)
class Difference:
    view: str
    entity: str
    expected: Mapping[str, str] | None
    actual: Mapping[str, str] | None

    def __str__(self) -> str:
        return f"{self.view}: {self.entity}: expected {dict(self.expected or {}) or None}, found {dict(self.actual or {}) or None}"


@dataclass(frozen=True, slots=True, kw_only=True)
class Truth:
    """`rows`: per entity, the fields a view must hold as text (CDC: the table's live rows with every
    data column; events: each stream's fold, what the cache holds). `events`: how many distinct
    decodable events the topic holds (the facts an append-only history must hold); 0 for CDC."""

    kind: Literal["cdc", "events"]
    rows: Mapping[str, Mapping[str, str]]
    events: int = 0


def compare(
    view: str, expected: Mapping[str, Mapping[str, str]], actual: Mapping[str, Mapping[str, str]]
) -> list[Difference]:
    """Pure: every entity whose value differs, is missing or is extra."""
    return [
        Difference(view, entity, expected.get(entity), actual.get(entity))
        for entity in sorted(set(expected) | set(actual))
        if expected.get(entity) != actual.get(entity)
    ]
