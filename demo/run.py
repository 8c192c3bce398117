"""`make demo`: the CDC round trip on the real stack, narrated.

A table in Postgres, a Debezium connector registered through Kafka Connect's REST API, then a
snapshot, an insert, an update and a delete read back from the compacted Kafka topic. (The full
pipeline — event store and materializers — joins this script as those packages land.)
Exit code 0 when every check passed, 1 otherwise.
"""

from __future__ import annotations

import json
import sys
import time
import uuid
from urllib.parse import urlparse

import httpx
import psycopg
from confluent_kafka import Consumer
from rich.console import Console
from rich.table import Table

from devstack.session import StackHandle, open_stack

console = Console()


def connector_config(stack: StackHandle, table: str, prefix: str, slot: str) -> dict[str, str]:
    dsn = urlparse(stack.pg_dsn)
    return {
        "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
        "plugin.name": "pgoutput",
        "database.hostname": dsn.hostname or "127.0.0.1",
        "database.port": str(dsn.port or 5432),
        "database.user": dsn.username or "postgres",
        "database.password": dsn.password or "postgres",
        "database.dbname": dsn.path.lstrip("/") or "postgres",
        "topic.prefix": prefix,
        "table.include.list": f"public.{table}",
        "slot.name": slot,
        "publication.name": f"{slot}_pub",
        "publication.autocreate.mode": "filtered",
        "decimal.handling.mode": "string",
        "topic.creation.default.replication.factor": "1",
        "topic.creation.default.partitions": "1",
        "topic.creation.default.cleanup.policy": "compact",
    }


def read_changes(stack: StackHandle, topic: str, expected: int, timeout: float = 60) -> list[tuple[str, str]]:
    consumer = Consumer(
        {"bootstrap.servers": stack.kafka_bootstrap_servers, "group.id": f"demo-{uuid.uuid4().hex}",
         "auto.offset.reset": "earliest", "enable.auto.commit": False}
    )  # fmt: skip
    consumer.subscribe([topic])
    rows: list[tuple[str, str]] = []
    deadline = time.monotonic() + timeout
    while len(rows) < expected and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is None or msg.error():
            continue
        key = json.dumps(json.loads(msg.key())["payload"])
        value = msg.value()
        rows.append((key, "tombstone" if value is None else _describe(json.loads(value)["payload"])))
    consumer.close()
    return rows


def _describe(payload: dict[str, object]) -> str:
    return f"op={payload['op']} before={json.dumps(payload['before'])} after={json.dumps(payload['after'])}"


def wait_running(client: httpx.Client, name: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        body = client.get(f"/connectors/{name}/status").json()
        if body.get("tasks") and all(t["state"] == "RUNNING" for t in body["tasks"]):
            return
        time.sleep(0.5)
    raise RuntimeError(f"connector {name} did not reach RUNNING in {timeout}s")


def release_slot(stack: StackHandle, slot: str, timeout: float = 30) -> None:
    """A slot left behind pins WAL forever; the deleted connector's task lets go of it within seconds."""
    deadline = time.monotonic() + timeout
    with psycopg.connect(stack.pg_dsn, autocommit=True) as conn:
        while time.monotonic() < deadline:
            dropped = conn.execute(
                "select pg_drop_replication_slot(slot_name) from pg_replication_slots where slot_name = %s and not active",
                (slot,),
            ).fetchall()
            exists = conn.execute(
                "select 1 from pg_replication_slots where slot_name = %s", (slot,)
            ).fetchone()
            if dropped or exists is None:
                return
            time.sleep(0.5)


def run(stack: StackHandle) -> bool:
    suffix = uuid.uuid4().hex[:6]
    table, prefix, slot, name = f"demo_products_{suffix}", f"demo{suffix}", f"demo_{suffix}", f"demo-{suffix}"
    console.rule(f"[bold]CDC round trip[/bold] on the {stack.backend} stack")
    with psycopg.connect(stack.pg_dsn, autocommit=True) as conn:
        conn.execute(f"create table {table} (id int primary key, name text, price numeric(10,2))")
        conn.execute(f"insert into {table} values (1, 'teapot', 19.90), (2, 'kettle', 34.00)")
    console.print(f"1. created table [cyan]{table}[/cyan] with 2 rows")
    with httpx.Client(base_url=stack.kafka_connect_url, timeout=30) as client:
        client.put(
            f"/connectors/{name}/config", json=connector_config(stack, table, prefix, slot)
        ).raise_for_status()
        wait_running(client, name)
        console.print(
            f"2. registered Debezium connector [cyan]{name}[/cyan] (pgoutput, compacted topics): RUNNING"
        )
        with psycopg.connect(stack.pg_dsn, autocommit=True) as conn:
            conn.execute(f"insert into {table} values (3, 'mug', 7.50)")
            conn.execute(f"update {table} set price = 29.00 where id = 2")
            conn.execute(f"delete from {table} where id = 1")
        console.print("3. inserted id=3, updated id=2, deleted id=1")
        changes = read_changes(stack, f"{prefix}.public.{table}", expected=6)
        client.delete(f"/connectors/{name}")
    release_slot(stack, slot)
    table_view = Table(title=f"4. change events on {prefix}.public.{table}", title_justify="left")
    table_view.add_column("key")
    table_view.add_column("change")
    for key, change in changes:
        table_view.add_row(key, change)
    console.print(table_view)
    ops = [c.split()[0] for _, c in changes]
    ok = ops == ["op=r", "op=r", "op=c", "op=u", "op=d", "tombstone"]
    console.print(
        "[green]every check passed[/green]" if ok else f"[red]unexpected change sequence: {ops}[/red]"
    )
    return ok


def main() -> int:
    with open_stack() as stack:
        return 0 if run(stack) else 1


if __name__ == "__main__":
    sys.exit(main())
