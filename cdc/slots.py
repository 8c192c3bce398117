"""Dropping a connector's replication slot and publication once its connector is gone.

Deleting a connector on Connect stops its task asynchronously; the walsender holding the slot can
linger for a moment, and `pg_drop_replication_slot` refuses an active slot. So this polls (bounded)
until the slot is inactive, then drops it. A leaked slot pins WAL for every user of the server.
"""

from __future__ import annotations

import time

import psycopg
from psycopg import sql

from cdc.errors import WaitTimeout


def drop_slot(pg_dsn: str, slot: str, publication: str | None = None, *, timeout: float = 60.0) -> bool:
    """Drop `slot` (and `publication`); return whether the slot existed. Raises WaitTimeout if still in use."""
    deadline = time.monotonic() + timeout
    with psycopg.connect(pg_dsn, autocommit=True, connect_timeout=10) as conn:
        if publication:
            conn.execute(sql.SQL("DROP PUBLICATION IF EXISTS {}").format(sql.Identifier(publication)))
        while True:
            row = conn.execute(
                "SELECT active FROM pg_replication_slots WHERE slot_name = %s", (slot,)
            ).fetchone()
            if row is None:
                return False
            if not row[0]:
                try:
                    conn.execute("SELECT pg_drop_replication_slot(%s)", (slot,))
                    return True
                except psycopg.errors.ObjectInUse:
                    pass  # a walsender re-attached between our check and the drop: poll again
            if time.monotonic() >= deadline:
                raise WaitTimeout(
                    f"replication slot {slot} is still active after {timeout:.0f}s; stop the connector "
                    f"using it, then SELECT pg_drop_replication_slot('{slot}')"
                )
            time.sleep(0.3)
