"""A table's REPLICA IDENTITY: what Postgres logs of the old row, so what `before` image Debezium's
UPDATE and DELETE changes carry. DEFAULT logs the old primary key only when it changed (an UPDATE has
no `before`; a DELETE's holds the key and, in Debezium, defaults for the other NOT NULL columns), FULL
logs the whole old row. A consumer that takes a row's old contribution back (an aggregate view over
CDC) needs FULL: with less it would subtract made-up values without a word.
"""

from __future__ import annotations

import psycopg

from cdc.errors import ReplicaIdentityNotFull

# pg_class.relreplident
IDENTITIES = {"d": "DEFAULT", "n": "NOTHING", "f": "FULL", "i": "USING INDEX"}


def full_identity_problem(table: str, identity: str | None) -> str | None:
    """Why `table` (relreplident `identity`, None: no such table) cannot give full before images (pure)."""
    if identity is None:
        return f"table {table} does not exist in Postgres; create it or fix the view's source.table"
    if identity == "f":
        return None
    return (
        f"table {table} has REPLICA IDENTITY {IDENTITIES.get(identity, identity)}, so its UPDATE and DELETE "
        f"changes carry no full before image and an old row could not be taken back; run "
        f"ALTER TABLE {table} REPLICA IDENTITY FULL (Postgres then logs each old row whole, more WAL per "
        "change); changes captured before that carry no image: rebuild the view from a snapshot taken after"
    )


def identity_of(conn: psycopg.Connection[tuple[object, ...]], table: str) -> str | None:
    schema, name = table.split(".", 1)
    row = conn.execute(
        "SELECT c.relreplident FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
        "WHERE n.nspname = %s AND c.relname = %s AND c.relkind IN ('r', 'p')",
        (schema, name),
    ).fetchone()
    return None if row is None else str(row[0])


def require_full(conn: psycopg.Connection[tuple[object, ...]], table: str) -> None:
    """Raises ReplicaIdentityNotFull unless `table` exists with REPLICA IDENTITY FULL."""
    problem = full_identity_problem(table, identity_of(conn, table))
    if problem is not None:
        raise ReplicaIdentityNotFull(problem)
