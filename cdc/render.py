"""JSON-ready views of change events and statuses for `cdc tail` / `--json` output (pure).

Exactness over prettiness: Decimals and intervals become strings (no float rounding), bytes become
base64, datetimes ISO-8601, UUIDs text, NaN/±inf floats the strings "NaN"/"Infinity"/"-Infinity"
(JSON has no literal for them), and an unavailable TOAST column the marker {"unchanged": true}.
"""

from __future__ import annotations

import base64
import dataclasses
import enum
import math
from collections.abc import Mapping
from datetime import date, datetime, time, timedelta
from decimal import Decimal
from typing import Any
from uuid import UUID

from cdc.change_event import ChangeEvent, Tombstone
from cdc.values import Interval, Unchanged


def jsonable(value: Any) -> Any:
    if isinstance(value, Unchanged):
        return {"unchanged": True}
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, Decimal | UUID):
        return str(value)
    if isinstance(value, datetime | date | time):
        return value.isoformat()
    if isinstance(value, Interval):
        return value.to_iso()
    if isinstance(value, timedelta):
        return value.total_seconds()
    if isinstance(value, bytes):
        return base64.b64encode(value).decode()
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    return str(value)


def event_json(item: ChangeEvent | Tombstone) -> dict[str, Any]:
    """One line of `cdc tail` output."""
    where = {
        "topic": item.position.topic,
        "partition": item.position.partition,
        "offset": item.position.offset,
    }
    if isinstance(item, Tombstone):
        return {"type": "tombstone", **where, "key": jsonable(item.key)}
    return {
        "type": "change",
        **where,
        "op": item.op.name,
        "key": jsonable(item.key),
        "before": jsonable(item.before),
        "after": jsonable(item.after),
        "source": jsonable(item.source),
        "event_time": jsonable(item.event_time),
    }
