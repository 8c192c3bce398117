"""CDC: a table captured by Debezium, its changes decoded into exact Python values. A table, a
connector, its slot and publication of their own per run, all removed at the end. Run against the
local stack:

    set -a; source .stack/env; set +a; .venv/bin/python docs/examples/cdc_capture.py
"""

from __future__ import annotations

import os
from contextlib import suppress

import psycopg
from _stack import drop, unique

from cdc import (
    ConnectClient,
    ConnectorNotFound,
    ConnectorSpec,
    DatabaseSpec,
    Op,
    RegistryClient,
    RegistrySpec,
    decode_record,
    drop_slot,
    run_preflight,
)
from kafkakit import make_consumer

table = unique("docs_stock").replace("-", "_")
dsn = os.environ["PG_DSN"]
spec = ConnectorSpec(
    name=table,
    database=DatabaseSpec.from_dsn(dsn),
    topic_prefix=table,
    tables=(f"public.{table}",),
    registry=RegistrySpec.from_url(os.environ["SCHEMA_REGISTRY_URL"]),  # Avro records, the default
)
connect = ConnectClient(os.environ["KAFKA_CONNECT_URL"])
try:
    with psycopg.connect(dsn, autocommit=True) as pg:
        pg.execute(f"CREATE TABLE {table} (sku text PRIMARY KEY, on_hand int NOT NULL, price numeric(10,2))")
        pg.execute(f"INSERT INTO {table} VALUES ('A', 10, 2.50), ('B', 2, 19.99)")
    run_preflight(spec)  # a primary key, wal_level=logical, types Debezium keeps exactly
    print("created:", connect.apply(spec.name, spec.to_config()).created)  # a repeatable PUT
    connect.wait_running(spec.name)
    connect.wait_snapshot_complete(spec.name)
    with psycopg.connect(dsn, autocommit=True) as pg:  # streamed after the snapshot
        pg.execute(f"UPDATE {table} SET on_hand = 1 WHERE sku = 'B'")
        pg.execute(f"DELETE FROM {table} WHERE sku = 'A'")
    consumer = make_consumer(
        {
            "bootstrap.servers": os.environ["KAFKA_BOOTSTRAP_SERVERS"],
            "group.id": table,
            "auto.offset.reset": "earliest",
        }
    )
    consumer.subscribe([spec.topic_for(f"public.{table}")])
    schemas = RegistryClient(os.environ["SCHEMA_REGISTRY_URL"])  # the writer schemas, by id
    changes = []
    while len(changes) < 4 and (msg := consumer.poll(30)) is not None:
        if msg.error() or msg.value() is None:  # a delete's tombstone follows its change
            continue
        fields = {"topic": msg.topic(), "partition": msg.partition(), "offset": msg.offset()}
        changes.append(decode_record(**fields, key=msg.key(), value=msg.value(), schemas=schemas))
    consumer.close()
    for change in changes:
        if change.op is Op.DELETE:  # `before` holds the key alone unless REPLICA IDENTITY FULL
            print(f"DELETE {change.key['sku']}")
        else:
            row = change.after
            print(f"{change.op.name} {change.key['sku']}: on_hand {row['on_hand']}, price {row['price']!r}")
finally:
    with suppress(ConnectorNotFound):
        connect.delete(spec.name)
    connect.close()
    drop_slot(dsn, spec.resolved_slot_name, spec.resolved_publication_name)
    with psycopg.connect(dsn, autocommit=True) as pg:
        pg.execute(f"DROP TABLE IF EXISTS {table}")
    drop(table)  # its topic and registry subjects
