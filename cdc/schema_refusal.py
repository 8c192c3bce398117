"""Which columns made the schema registry refuse a connector's new schema.

With `format: avro`, a table change (a column's type, a NOT NULL column added) gives Debezium a new
value schema, which the converter registers before it writes the record. Where the registry has a
compatibility rule for the subject (e.g. BACKWARD: consumers on the new schema must read the old
records), it refuses an incompatible one, and the task fails with Apicurio's diff, which points into
the envelope (`/fields/1/type/1`) and never names a column. The registered schema carries each
column's Postgres type (the connector sets `column.propagate.source.type`), so comparing it with the
table as it is now names what changed. Pure functions here; `explain` is the I/O shell.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from cdc.failures import failure_cause
from kafkakit.http_auth import NO_REGISTRY_AUTH, HttpAuth, httpx_options

_REFUSED = re.compile(r"RuleViolationException: Incompatible artifact: (\S+) \[")
_SOURCE_TYPE = "__debezium.source.column.type"


@dataclass(frozen=True, slots=True)
class Column:
    """A column of the table as Postgres has it now (`type` as Debezium names it: INT4, TEXT, ...)."""

    name: str
    type: str
    nullable: bool
    has_default: bool


def refused_artifact(trace: str | None) -> str | None:
    """The artifact (`<topic>-value` or `-key`) whose new schema a compatibility rule refused."""
    found = _REFUSED.search(trace or "")
    return found.group(1) if found else None


def table_of(artifact: str, topic_prefix: str) -> str | None:
    """`schema.table` for `<prefix>.<schema>.<table>-value`, None for another connector's artifact."""
    topic = re.sub(r"-(key|value)$", "", artifact)
    if not topic.startswith(topic_prefix + "."):
        return None
    table = topic.removeprefix(topic_prefix + ".")
    return table if table.count(".") == 1 else None


def registered_columns(schema: Mapping[str, Any]) -> dict[str, str]:
    """Column -> Postgres type, from a registered envelope or a key record. The envelope defines the
    row record once, in `before` (`after` refers to it by name), so the first definition is taken."""
    fields = {f["name"]: f for f in schema.get("fields", ())}
    envelope = "after" in fields or "before" in fields
    defined = (_record(fields[n]["type"]) for n in ("before", "after") if n in fields)
    row = next((r for r in defined if r), {}) if envelope else schema
    return {f["name"]: _source_type(f["type"]) for f in row.get("fields", ())}


def _record(avro_type: Any) -> Mapping[str, Any]:
    branches = avro_type if isinstance(avro_type, list) else [avro_type]
    return next((b for b in branches if isinstance(b, dict) and b.get("type") == "record"), {})


def _source_type(avro_type: Any) -> str:
    branches = avro_type if isinstance(avro_type, list) else [avro_type]
    for branch in branches:
        if isinstance(branch, dict):
            source = branch.get("connect.parameters", {}).get(_SOURCE_TYPE)
            return str(source or branch.get("connect.name") or branch.get("type"))
        if branch != "null":
            return str(branch)
    return "?"


def column_changes(registered: Mapping[str, str], now: Sequence[Column]) -> tuple[str, ...]:
    """What differs between the registered columns and the table now, one phrase per column."""
    changes = []
    for column in now:
        before = registered.get(column.name)
        if before is None:
            required = not column.nullable and not column.has_default
            changes.append(f"{column.name} added" + (" NOT NULL without a default" if required else ""))
        elif before.upper() != column.type.upper():
            changes.append(f"{column.name} {before} -> {column.type}")
    names = {c.name for c in now}
    changes += [f"{name} dropped" for name in registered if name not in names]
    return tuple(changes)


def explain(
    trace: str | None,
    config: Mapping[str, str],
    *,
    pg_dsn: str,
    registry_url: str,
    registry_auth: HttpAuth = NO_REGISTRY_AUTH,
) -> tuple[str, ...]:
    """The column changes behind a refused schema, or () when the trace is not such a refusal or the
    registry (asked with `registry_auth`) or Postgres cannot say (the failure's own message still
    stands then)."""
    import httpx
    import psycopg

    artifact = refused_artifact(trace)
    table = artifact and table_of(artifact, config.get("topic.prefix", ""))
    if not artifact or not table:
        return ()
    base = re.sub(r"/apis/.*$", "", registry_url.rstrip("/"))
    try:
        got = httpx.get(
            f"{base}/apis/registry/v2/groups/default/artifacts/{artifact}",
            timeout=10,
            **httpx_options(registry_auth),
        )
        got.raise_for_status()
        registered = registered_columns(json.loads(got.text))
        with psycopg.connect(pg_dsn, connect_timeout=10) as conn:
            now = [Column(*row) for row in conn.execute(_COLUMNS, tuple(table.split(".")))]
    except (httpx.HTTPError, psycopg.Error, ValueError, KeyError, TypeError, AttributeError):
        return ()
    return column_changes(registered, now)


def explained_cause(
    trace: str | None,
    config: Mapping[str, str],
    *,
    pg_dsn: str,
    registry_url: str,
    registry_auth: HttpAuth = NO_REGISTRY_AUTH,
) -> str | None:
    """`failure_cause`, with the column changes named when a compatibility rule refused a schema."""
    changes = explain(trace, config, pg_dsn=pg_dsn, registry_url=registry_url, registry_auth=registry_auth)
    return failure_cause(trace, config, changes)


# Debezium names a column's type by its udt (INT4, TEXT, NUMERIC, ...), upper-cased.
_COLUMNS = """
SELECT column_name, upper(udt_name), is_nullable = 'YES', column_default IS NOT NULL
FROM information_schema.columns WHERE table_schema = %s AND table_name = %s ORDER BY ordinal_position
"""
