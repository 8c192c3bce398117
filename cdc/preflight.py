"""Checks against Postgres that Connect's validate does not do (well), run before registering a connector.

With the connector's own credentials (so a wrong password fails here, named), check:
1. the login works and may replicate (REPLICATION or superuser);
2. `wal_level` is `logical`;
3. every included table exists and has a primary key, or `message.key.columns` names existing columns
   for it — a table without a key would produce null-key records, which compacted topics reject;
4. the heartbeat table exists (created here when `create_heartbeat_table` is set, because the
   publication is filtered and Debezium needs it to exist before it starts).
All problems are collected and raised together as `PreflightFailed((field, message), ...)`.
"""

from __future__ import annotations

from dataclasses import dataclass

import psycopg

from cdc.connector_spec import ConnectorSpec
from cdc.errors import PreflightFailed


@dataclass(frozen=True, slots=True, kw_only=True)
class TableFacts:
    table: str
    exists: bool
    primary_key: tuple[str, ...]
    columns: frozenset[str]


@dataclass(frozen=True, slots=True, kw_only=True)
class PostgresFacts:
    wal_level: str
    can_replicate: bool
    tables: tuple[TableFacts, ...]


def assess(spec: ConnectorSpec, facts: PostgresFacts) -> list[tuple[str, str]]:
    """Problems as (spec field / connector option, message) pairs; empty when ready (pure)."""
    problems: list[tuple[str, str]] = []
    if facts.wal_level != "logical":
        problems.append(
            (
                "wal_level",
                f"Postgres runs with wal_level={facts.wal_level}; set wal_level=logical "
                "(ALTER SYSTEM SET wal_level = logical) and restart Postgres",
            )
        )
    if not facts.can_replicate:
        problems.append(
            (
                "database.user",
                f"role {spec.database.user!r} may not replicate; ALTER ROLE {spec.database.user} REPLICATION",
            )
        )
    for t in facts.tables:
        if not t.exists:
            problems.append(
                ("table.include.list", f"table {t.table} does not exist in database {spec.database.dbname}")
            )
            continue
        key_columns = spec.key_columns_for(t.table)
        missing = [c for c in key_columns if c not in t.columns]
        if missing:
            problems.append(
                ("message.key.columns", f"table {t.table} has no column(s) {missing} named as key columns")
            )
        elif not t.primary_key and not key_columns:
            problems.append(
                (
                    "table.include.list",
                    f"table {t.table} has no primary key: its change records would have null keys, "
                    "which a compacted topic rejects; add a primary key or list key columns for it "
                    "under message_key_columns",
                )
            )
    return problems


def gather(conn: psycopg.Connection[tuple[object, ...]], spec: ConnectorSpec) -> PostgresFacts:
    """Read what `assess` needs (catalog queries only)."""
    wal_level = str(_one(conn, "SHOW wal_level"))
    can_replicate = bool(
        _one(conn, "SELECT rolreplication OR rolsuper FROM pg_roles WHERE rolname = current_user")
    )
    return PostgresFacts(
        wal_level=wal_level,
        can_replicate=can_replicate,
        tables=tuple(_table_facts(conn, t) for t in spec.captured_tables),
    )


def run_preflight(spec: ConnectorSpec, *, create_heartbeat_table: bool = True) -> PostgresFacts:
    """Connect with the spec's credentials, create the heartbeat table if asked, then check everything."""
    try:
        conn = psycopg.connect(**spec.database.conninfo(), connect_timeout=10, autocommit=True)
    except psycopg.OperationalError as exc:
        raise PreflightFailed(
            [
                (
                    "database.user/database.password",
                    f"cannot log in to {spec.database.hostname}:{spec.database.port}/{spec.database.dbname} "
                    f"as {spec.database.user!r}: {str(exc).strip().splitlines()[-1]}; fix the credentials "
                    "or host in the spec",
                )
            ]
        ) from exc
    with conn:
        if create_heartbeat_table and spec.heartbeat.enabled:
            conn.execute(spec.heartbeat_table_ddl())  # names validated by ConnectorSpec
        facts = gather(conn, spec)
    problems = assess(spec, facts)
    if problems:
        raise PreflightFailed(problems)
    return facts


def _one(conn: psycopg.Connection[tuple[object, ...]], sql: str) -> object:
    row = conn.execute(sql).fetchone()
    return row[0] if row else None


def _table_facts(conn: psycopg.Connection[tuple[object, ...]], table: str) -> TableFacts:
    schema, name = table.split(".", 1)
    rows = conn.execute(
        """
        SELECT a.attname, coalesce(i.indisprimary, false)
        FROM pg_class c
        JOIN pg_namespace n ON n.oid = c.relnamespace
        JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
        LEFT JOIN pg_index i ON i.indrelid = c.oid AND i.indisprimary AND a.attnum = ANY (i.indkey)
        WHERE n.nspname = %s AND c.relname = %s AND c.relkind IN ('r', 'p')
        ORDER BY a.attnum
        """,
        (schema, name),
    ).fetchall()
    return TableFacts(
        table=table,
        exists=bool(rows),
        primary_key=tuple(str(r[0]) for r in rows if r[1]),
        columns=frozenset(str(r[0]) for r in rows),
    )
