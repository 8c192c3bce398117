"""Fold change events into table state: the latest row per primary key (pure).

This is what a compacted CDC topic means: replaying it and keeping the last value per key gives the table.
Rules: read/create/update set the row; delete and tombstone remove it; truncate clears the table; a
column marked `UNCHANGED` (TOAST not re-sent by Postgres) keeps the value the previous row image had.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from cdc.change_event import ChangeEvent, Op, Tombstone
from cdc.values import UNCHANGED

TableState = dict[tuple[Any, ...], Mapping[str, Any]]


def merge_unchanged(previous: Mapping[str, Any] | None, after: Mapping[str, Any]) -> dict[str, Any]:
    """The new row image with each UNCHANGED column filled from the previous image (kept if unknown)."""
    merged = dict(after)
    for column, value in after.items():
        if value is UNCHANGED and previous is not None and column in previous:
            merged[column] = previous[column]
    return merged


def apply_change(state: TableState, item: ChangeEvent | Tombstone) -> TableState:
    """Apply one event to `state` in place (a fold over millions of records must not copy) and return it."""
    if isinstance(item, Tombstone):
        state.pop(item.key_tuple, None)
    elif item.op is Op.TRUNCATE:
        state.clear()
    elif item.op is Op.DELETE:
        state.pop(item.key_tuple, None)
    elif item.after is not None:
        state[item.key_tuple] = merge_unchanged(state.get(item.key_tuple), item.after)
    return state


def fold(items: Iterable[ChangeEvent | Tombstone]) -> TableState:
    state: TableState = {}
    for item in items:
        apply_change(state, item)
    return state
