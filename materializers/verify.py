"""Compare a materializer's views with their source of truth and list every difference.

Source of truth: the Postgres table for CDC views; the fold of the whole event topic (decoded in
Python with the registry's writer schemas, stream by stream in version order, duplicates ignored,
stopping at a version gap exactly as the cache does) for event views.
"""

from __future__ import annotations

import io
import json
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from kafkakit.clients import make_consumer
from materializers import event_shape, orders
from materializers.avro_events import WriterSchemas
from materializers.errors import SourceUnavailable
from materializers.job import JobPlan
from materializers.views import delta_warehouse


@dataclass(frozen=True, slots=True)
class Difference:
    view: str
    entity: str
    expected: Mapping[str, str] | None
    actual: Mapping[str, str] | None

    def __str__(self) -> str:
        return f"{self.view}: {self.entity}: expected {dict(self.expected or {}) or None}, found {dict(self.actual or {}) or None}"


def compare(
    view: str, expected: Mapping[str, Mapping[str, str]], actual: Mapping[str, Mapping[str, str]]
) -> list[Difference]:
    """Pure: every entity whose value differs, is missing or is extra."""
    return [
        Difference(view, entity, expected.get(entity), actual.get(entity))
        for entity in sorted(set(expected) | set(actual))
        if expected.get(entity) != actual.get(entity)
    ]


def _as_text(row: Mapping[str, Any], columns: tuple[str, ...]) -> dict[str, str]:
    return {c: str(row[c]) for c in columns if row.get(c) is not None}


def postgres_rows(
    dsn: str, table: str, columns: tuple[str, ...], key: str = "id"
) -> dict[str, dict[str, str]]:
    import psycopg
    from psycopg import sql

    try:
        with psycopg.connect(dsn) as conn:
            rows = conn.execute(
                sql.SQL("SELECT {}, {} FROM {}").format(
                    sql.Identifier(key),
                    sql.SQL(", ").join(sql.Identifier(c) for c in columns),
                    sql.Identifier(*table.split(".")),
                )
            ).fetchall()
    except psycopg.Error as exc:
        raise SourceUnavailable(
            f"cannot read {table} from Postgres ({exc}); check PG_DSN and --table"
        ) from exc
    return {str(r[0]): _as_text(dict(zip(columns, r[1:], strict=True)), columns) for r in rows}


def delta_current(plan: JobPlan) -> dict[str, dict[str, str]]:
    cols = plan.spec.data_columns
    rows = delta_warehouse.query(plan.warehouse().current_path, "SELECT * FROM t WHERE NOT deleted")
    return {str(r["entity"]): _as_text(r, cols) for r in rows}


def verify_cdc(plan: JobPlan) -> list[Difference]:
    cols = plan.spec.data_columns
    truth = postgres_rows(plan.config.endpoints.pg_dsn, plan.config.table or plan.spec.default_table, cols)
    diffs = compare("cache", truth, plan.cache().entities()) if plan.keeps("cache") else []
    index = plan.search()
    if index is not None:
        searchable = {e: {k: v for k, v in row.items() if k in index.text_fields} for e, row in truth.items()}
        diffs += compare("search", searchable, index.live_documents())
    if plan.spec.current_table and plan.keeps("warehouse"):
        diffs += compare("warehouse.current", truth, delta_current(plan))
    return diffs


def read_topic(bootstrap: str, topic: str) -> Iterator[Any]:
    """Every record of `topic` from the beginning to the end offsets as of now."""
    from confluent_kafka import OFFSET_BEGINNING, TopicPartition

    consumer = make_consumer(
        {"bootstrap.servers": bootstrap, "group.id": "materializers-verify", "enable.auto.commit": False}
    )
    try:
        meta = consumer.list_topics(topic, timeout=10).topics[topic]
        ends = {
            p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
            for p in meta.partitions
        }
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in meta.partitions])
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                yield msg
            at = consumer.position([TopicPartition(topic, p) for p in ends])
            if all(tp.offset >= ends[tp.partition] or ends[tp.partition] == 0 for tp in at):
                return
        raise SourceUnavailable(f"timed out reading {topic} to its end; is Kafka up?")
    finally:
        consumer.close()


def event_fold(plan: JobPlan) -> tuple[dict[str, dict[str, str]], int]:
    """(expected cache per stream, number of distinct decodable events) from the event topic."""
    from fastavro import parse_schema, schemaless_reader

    schemas = WriterSchemas(plan.config.endpoints.schema_registry_url)
    streams: dict[str, dict[int, tuple[str, dict[str, Any]]]] = {}
    for msg in read_topic(plan.config.endpoints.kafka_bootstrap_servers, plan.topic):
        value, headers = msg.value(), dict(msg.headers() or [])
        try:
            version = int(headers[event_shape.H_VERSION])
            event_type = headers[event_shape.H_TYPE].decode()
            if not value or value[0] != event_shape.MAGIC or event_type not in orders.EVENT_TYPES:
                continue
            text = schemas.get(int.from_bytes(value[1:5], "big"))
            if text is None:
                continue
            data = schemaless_reader(
                io.BytesIO(value[event_shape.HEADER_SIZE :]), parse_schema(json.loads(text)), None
            )
        except (KeyError, ValueError, EOFError, TypeError):
            continue
        if isinstance(data, dict):
            streams.setdefault(msg.key().decode(), {}).setdefault(version, (event_type, data))
    expected: dict[str, dict[str, str]] = {}
    for stream, by_version in streams.items():
        ordered = []
        for version in range(1, len(by_version) + 1):
            if version not in by_version:
                break
            ordered.append(by_version[version])
        if ordered:
            expected[stream] = orders.fold(ordered)
    return expected, sum(len(v) for v in streams.values())


def verify_events(plan: JobPlan) -> list[Difference]:
    expected, events = event_fold(plan)
    diffs = compare("cache", expected, plan.cache().entities()) if plan.keeps("cache") else []
    if not plan.keeps("warehouse"):
        return diffs
    rows = delta_warehouse.query(
        plan.warehouse().history_path,
        "SELECT count(*) AS n, count(DISTINCT entity || '/' || position) AS d FROM t",
    )
    found = {"rows": str(rows[0]["n"]), "distinct": str(rows[0]["d"])}
    diffs += compare(
        "warehouse.facts", {"count": {"rows": str(events), "distinct": str(events)}}, {"count": found}
    )
    return diffs


def verify(plan: JobPlan) -> list[Difference]:
    return verify_cdc(plan) if plan.spec.kind == "cdc" else verify_events(plan)
