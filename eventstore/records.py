"""Pure conversion between typed dataclasses (events, commands, state) and Avro-ready dicts.

Assumptions: fields use str/int/float/bool/bytes, `X | None`, `tuple[X, ...]` and nested dataclasses.
Tuples become Avro arrays (lists) and come back as tuples, so values stay hashable and immutable.
"""

from __future__ import annotations

import dataclasses
import operator
import types
import typing
from collections.abc import Callable
from functools import cache
from typing import Any, Literal, TypeVar, Union, cast, get_args, get_origin

T = TypeVar("T")


_SCALARS = frozenset({str, int, float, bool, bytes, type(None)})
Convert = Callable[[Any], Any]


@cache
def _is_dataclass_type(cls: Any) -> bool:
    return dataclasses.is_dataclass(cls)


@cache
def _names(cls: Any) -> tuple[str, ...]:
    return tuple(f.name for f in dataclasses.fields(cls))


def to_record(obj: object) -> dict[str, Any]:
    """A dataclass instance as a plain dict (tuples -> lists, nested dataclasses -> dicts)."""
    kind: Any = type(obj)
    if not _is_dataclass_type(kind):
        raise TypeError(
            f"{obj!r} is not a dataclass instance; events, commands and state must be dataclasses"
        )
    names, getter = _flat_getter(kind)
    if getter is not None:
        return dict(zip(names, getter(obj), strict=True))
    return {name: _plain(getattr(obj, name)) for name in names}


@cache
def _flat_getter(cls: Any) -> tuple[tuple[str, ...], Callable[[Any], tuple[Any, ...]] | None]:
    """A class whose fields are all declared scalars (or Optional/Literal ones) needs no per-value
    conversion: its values are read in one call (most events and every outcome)."""
    names = _names(cls)
    try:
        hints = typing.get_type_hints(cls)
    except (NameError, TypeError):  # unresolvable annotations: convert value by value
        return names, None
    if len(names) < 2 or not all(_scalar_hint(hints[name]) for name in names):
        return names, None
    return names, operator.attrgetter(*names)


def _scalar_hint(hint: Any) -> bool:
    origin = get_origin(hint)
    if origin is Literal:
        return all(type(arg) in _SCALARS for arg in get_args(hint))
    if origin in (Union, types.UnionType):
        return all(_scalar_hint(arg) for arg in get_args(hint))
    return hint in _SCALARS


def _plain(value: object) -> object:
    # Per-class facts are cached: this runs for every field of every record the processor writes.
    kind: Any = type(value)
    if kind in _SCALARS:
        return value
    if kind is tuple or kind is list:
        return [_plain(v) for v in cast(Any, value)]
    if _is_dataclass_type(kind):
        return to_record(value)
    return value


@cache
def _plan(cls: Any) -> tuple[tuple[str, Convert | None], ...]:
    """Each field's name and how to convert its decoded value (None: take it as it is)."""
    hints = typing.get_type_hints(cls)
    return tuple((f.name, _converter(hints[f.name])) for f in dataclasses.fields(cls))


def from_record(cls: type[T], data: dict[str, Any]) -> T:
    """Build `cls` from a decoded dict, ignoring keys the class does not declare."""
    kwargs = {
        name: value if convert is None or value is None else convert(value)
        for name, convert in _plan(cast(Any, cls))
        if name in data
        for value in (data[name],)
    }
    return cls(**kwargs)


def _converter(hint: Any) -> Convert | None:
    origin = get_origin(hint)
    if origin in (Union, types.UnionType):
        inner = [a for a in get_args(hint) if a is not type(None)]
        # None passes through in from_record; a union of several types is taken as decoded.
        return _converter(inner[0]) if len(inner) == 1 else None
    if origin is tuple:
        item = _converter(get_args(hint)[0])
        return tuple if item is None else (lambda values: tuple(item(v) for v in values))
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return lambda value: from_record(hint, value) if isinstance(value, dict) else value
    return None
