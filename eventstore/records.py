"""Pure conversion between typed dataclasses (events, commands, state) and Avro-ready dicts.

Assumptions: fields use str/int/float/bool/bytes, `X | None`, `tuple[X, ...]` and nested dataclasses.
Tuples become Avro arrays (lists) and come back as tuples, so values stay hashable and immutable.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from functools import cache
from typing import Any, TypeVar, Union, cast, get_args, get_origin

T = TypeVar("T")


def to_record(obj: object) -> dict[str, Any]:
    """A dataclass instance as a plain dict (tuples -> lists, nested dataclasses -> dicts)."""
    if not dataclasses.is_dataclass(obj) or isinstance(obj, type):
        raise TypeError(
            f"{obj!r} is not a dataclass instance; events, commands and state must be dataclasses"
        )
    return {f.name: _plain(getattr(obj, f.name)) for f in dataclasses.fields(obj)}


def _plain(value: object) -> object:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return to_record(value)
    if isinstance(value, tuple | list):
        return [_plain(v) for v in value]
    return value


@cache
def _hints(cls: Any) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def from_record(cls: type[T], data: dict[str, Any]) -> T:
    """Build `cls` from a decoded dict, ignoring keys the class does not declare."""
    hints = _hints(cast(Any, cls))
    kwargs = {
        f.name: _typed(hints[f.name], data[f.name])
        for f in dataclasses.fields(cast(Any, cls))
        if f.name in data
    }
    return cls(**kwargs)


def _typed(hint: Any, value: Any) -> Any:
    origin = get_origin(hint)
    if origin in (Union, types.UnionType):
        if value is None:
            return None
        inner = [a for a in get_args(hint) if a is not type(None)]
        return _typed(inner[0], value) if len(inner) == 1 else value
    if origin is tuple:
        args = get_args(hint)
        return tuple(_typed(args[0], v) for v in value)
    if isinstance(hint, type) and dataclasses.is_dataclass(hint) and isinstance(value, dict):
        return from_record(hint, value)
    return value
