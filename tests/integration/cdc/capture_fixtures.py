"""Record what the real Debezium connector emits, as unit-test fixtures.

Run against a running stack (`source .stack/env` first):
    .venv/bin/python tests/integration/cdc/capture_fixtures.py [--format avro]
It reads the topics at the stack's SASL_SSL listener where its env names one
(KAFKA_SECURE_BOOTSTRAP_SERVERS, KAFKA_SECURE_CLIENT_CONFIG), else at KAFKA_BOOTSTRAP_SERVERS, as the
tests do (cdc_helpers.KafkaAccess).
It writes tests/unit/cdc/fixtures/debezium_records.json: the raw key/value bytes (as UTF-8 text) of
every record on the torture and TOAST topics, so the unit tests can check decoding without services.
With `--format avro` (Connect must list Apicurio's AvroConverter) it writes debezium_avro_records.json
instead: the same changes as Avro records (base64) plus the writer schemas they name, by id, from
SCHEMA_REGISTRY_URL. Cleans up its connector, slot and tables.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import random
import string
from collections.abc import Callable
from pathlib import Path

import httpx
from cdc_helpers import RawRecord, pg, read_topic, unique
from cdc_torture import LARGE_BYTES, create_sql, insert_sql

from cdc.connect_client import ConnectClient
from cdc.registry_client import ccompat_url
from devstack.connectors import ConnectorFactory
from devstack.kafka_security import KafkaAccess

FIXTURES = Path(__file__).resolve().parents[2] / "unit" / "cdc" / "fixtures"
OUT = {"json": FIXTURES / "debezium_records.json", "avro": FIXTURES / "debezium_avro_records.json"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--format", choices=sorted(OUT), default="json")
    record_format = parser.parse_args().format
    dsn, kafka = os.environ["PG_DSN"], KafkaAccess.from_stack_env(os.environ)
    registry = os.environ.get("SCHEMA_REGISTRY_URL", "http://127.0.0.1:18080/apis/ccompat/v7")
    suffix = unique("cap")
    table, enum, toast = f"public.tt_{suffix}", f"mood_{suffix}", f"public.toast_{suffix}"
    big = "".join(random.Random(3).choices(string.ascii_letters, k=4000))
    with pg(dsn) as conn, ConnectClient(os.environ["KAFKA_CONNECT_URL"]) as connect:
        for sql in create_sql(table, enum):
            conn.execute(sql)
        conn.execute(insert_sql(table), {"large": LARGE_BYTES})
        conn.execute(f"CREATE TABLE {toast} (id int PRIMARY KEY, note text, n int)")
        conn.execute(f"ALTER TABLE {toast} ALTER COLUMN note SET STORAGE EXTERNAL")
        factory = ConnectorFactory(connect, dsn, record_format, registry)
        try:
            spec = factory.start(factory.spec([table, toast], name="capture-fixtures-" + suffix[-6:]))
            t_topic, x_topic = spec.topic_for(table), spec.topic_for(toast)
            read_topic(kafka, t_topic, until=lambda rs: len(rs) >= 4)
            conn.execute(f"INSERT INTO {toast} VALUES (1, %s, 1)", (big,))
            conn.execute(f"UPDATE {toast} SET n = 2 WHERE id = 1")
            conn.execute(f"UPDATE {table} SET c_text = 'updated', c_int = 42 WHERE id = 1")
            conn.execute(f"DELETE FROM {table} WHERE id = 2")
            conn.execute(f"ALTER TABLE {table} ADD COLUMN c_added text DEFAULT 'd'")
            conn.execute(f"INSERT INTO {table} (id, c_added) VALUES (5, 'new shape')")
            conn.execute(f"ALTER TABLE {table} DROP COLUMN c_bits")
            conn.execute(f"UPDATE {table} SET c_added = 'dropped bits' WHERE id = 3")
            torture = read_topic(kafka, t_topic, until=lambda rs: len(rs) >= 9)
            toasted = read_topic(kafka, x_topic, until=lambda rs: len(rs) >= 2)
        finally:
            factory.cleanup()
            conn.execute(f"DROP TABLE IF EXISTS {table}, {toast}")
            conn.execute(f"DROP TYPE IF EXISTS {enum}")
    out = OUT[record_format]
    out.parent.mkdir(parents=True, exist_ok=True)
    text = (lambda b: base64.b64encode(b).decode()) if record_format == "avro" else bytes.decode
    doc: dict[str, object] = {
        "torture": [_raw(r, text) for r in torture],
        "toast": [_raw(r, text) for r in toasted],
    }
    if record_format == "avro":
        doc["schemas"] = _writer_schemas(registry, [*torture, *toasted])
    out.write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {len(torture)} + {len(toasted)} records to {out}")


def _raw(r: RawRecord, text: Callable[[bytes], str]) -> dict[str, object]:
    return {
        "topic": r.topic,
        "partition": r.partition,
        "offset": r.offset,
        "key": None if r.key is None else text(r.key),
        "value": None if r.value is None else text(r.value),
    }


def _writer_schemas(registry: str, records: list[RawRecord]) -> dict[str, str]:
    ids = {int.from_bytes(raw[1:5], "big") for r in records for raw in (r.key, r.value) if raw}
    url = ccompat_url(registry)
    return {
        str(i): str(httpx.get(f"{url}/schemas/ids/{i}", timeout=10).json()["schema"]) for i in sorted(ids)
    }


if __name__ == "__main__":
    main()
