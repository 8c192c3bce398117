"""Compare a materializer's views with their source of truth and list every difference.

Source of truth: the Postgres table for CDC views; the fold of the whole event topic (decoded in
Python with the registry's writer schemas, stream by stream in version order, duplicates ignored,
stopping at a version gap exactly as the cache does) for event views. The truth is read once and
each view compares itself with it (`View.verify`).
"""

from __future__ import annotations

import io
import json
import time
from collections.abc import Iterator
from typing import Any

from kafkakit.client_config import KafkaClientConfig
from kafkakit.clients import make_consumer
from materializers.decode import event_shape
from materializers.decode.avro_events import WriterSchemas
from materializers.errors import BadMaterializer, SourceUnavailable
from materializers.ops.lag import log_bounds
from materializers.plan import JobPlan
from materializers.truth import Difference as Difference
from materializers.truth import Truth
from materializers.truth import compare as compare
from materializers.views.builtin import as_text


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
    return {str(r[0]): as_text(dict(zip(columns, r[1:], strict=True)), columns) for r in rows}


def cdc_truth(plan: JobPlan) -> Truth:
    cols = plan.spec.data_columns
    table = plan.config.table or plan.spec.default_table
    return Truth(
        kind="cdc", rows=postgres_rows(plan.config.endpoints.pg_dsn, table, cols, key=plan.spec.key_column)
    )


def read_topic(
    bootstrap: str, topic: str, *, client_config: KafkaClientConfig | None = None
) -> Iterator[Any]:
    """Every record of `topic` from the beginning to the end offsets as of now."""
    from confluent_kafka import OFFSET_BEGINNING, TopicPartition

    consumer = make_consumer(
        {"bootstrap.servers": bootstrap, "group.id": "materializers-verify", "enable.auto.commit": False},
        client_config=client_config,
    )
    try:
        ends = {
            p: high for p, (_low, high) in log_bounds(bootstrap, topic, client_config=client_config).items()
        }
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in ends])
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

    fold, wanted = plan.spec.fold, set(plan.spec.event_types)
    if fold is None:
        raise BadMaterializer(
            f"materializer {plan.spec.name!r} has no fold, so its event views cannot be verified; give "
            "Materializer(fold=...) the function folding (event_type, data) pairs into the view's fields"
        )

    schemas = WriterSchemas(
        plan.config.endpoints.schema_registry_url, auth=plan.config.endpoints.schema_registry_auth
    )
    streams: dict[str, dict[int, tuple[str, dict[str, Any]]]] = {}
    endpoints = plan.config.endpoints
    for msg in read_topic(
        endpoints.kafka_bootstrap_servers, plan.topic, client_config=endpoints.kafka_client
    ):
        value, headers = msg.value(), dict(msg.headers() or [])
        try:
            version = int(headers[event_shape.H_VERSION])
            event_type = headers[event_shape.H_TYPE].decode()
            if not value or value[0] != event_shape.MAGIC or (wanted and event_type not in wanted):
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
            expected[stream] = fold(ordered)
    return expected, sum(len(v) for v in streams.values())


def verify(plan: JobPlan) -> list[Difference]:
    """Every difference between the plan's views and the source of truth (read once for all views)."""
    views = plan.views()
    if not views:
        return []
    if plan.spec.kind == "cdc":
        truth = cdc_truth(plan)
    else:
        expected, events = event_fold(plan)
        truth = Truth(kind="events", rows=expected, events=events)
    return [d for view in views for d in view.verify(truth)]
