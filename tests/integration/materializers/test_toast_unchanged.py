"""Unchanged TOAST values (Debezium's `__debezium_unavailable_value`) keep what every view holds.

With REPLICA IDENTITY DEFAULT an update that leaves a large column alone reaches Debezium without it
and the connector sends a placeholder instead; the views must keep the value of the newest change that
carried the column, across batches, inside one batch, and against late records.
"""

from __future__ import annotations

from typing import Any

import pytest
from conftest import read_all, run_once, wait_for_end_offset
from records import debezium, produce

from cdc.values import DEFAULT_UNAVAILABLE_PLACEHOLDER
from materializers.decode import debezium as dbz
from materializers.decode import positions
from materializers.decode.changes import split
from materializers.ops.verify import verify
from materializers.runtime import checkpoint
from materializers.runtime.job import JobPlan
from materializers.views.warehouse.delta import query
from shop.products import COLUMNS, DATA_DDL, PRODUCTS, TABLE_DDL

pytestmark = pytest.mark.integration

DESC = "description"
BIG1 = "walnut " * 2000
BIG2 = "linen " * 2000
BIG2B = "zebra " * 2000
BIG3 = "copper " * 2000


def row(entity: int, price: str, description: str | None = None) -> dict[str, Any]:
    found: dict[str, Any] = {"name": f"p{entity}", "price": price, "stock": entity}
    if description is not None:
        found[DESC] = description
    return found


def keep(entity: int, lsn: int, price: str) -> tuple[bytes, bytes]:
    """An update of the price only: the description arrives as the placeholder."""
    return debezium(entity, lsn, "u", row(entity, price), unavailable=(DESC,))


def test_unchanged_toast_keeps_the_views_value(
    spark: Any, topics: Any, producer: Any, run_config: Any
) -> None:
    topic = topics("mat-toast")
    plan = JobPlan.of(PRODUCTS, run_config(topic=topic))
    produce(
        producer,
        topic,
        [
            debezium(1, 100, "c", row(1, "1.00", BIG1)),
            debezium(2, 110, "c", row(2, "2.00", BIG2)),
            debezium(4, 120, "c", row(4, "4.00", "four-a")),
            debezium(4, 150, "u", row(4, "4.10", "four-b")),
        ],
    )
    run_once(spark, plan)
    produce(
        producer,
        topic,
        [
            keep(1, 200, "1.50"),  # placeholder in a later batch than the value
            debezium(2, 210, "u", row(2, "2.50", BIG2B)),  # one batch: a new description ...
            keep(2, 220, "2.75"),  # ... then the placeholder
            debezium(3, 230, "c", row(3, "3.00", BIG3)),  # one batch: insert, then placeholder
            keep(3, 240, "3.50"),
            keep(5, 250, "5.00"),  # never seen with a description: the views have none
        ],
    )
    run_once(spark, plan)
    produce(
        producer,
        topic,
        [
            keep(1, 300, "1.75"),  # a second placeholder update in a third batch
            keep(3, 310, "3.75"),
            debezium(4, 140, "u", row(4, "4.40", "four-late")),  # late: older than what the views hold
            keep(4, 400, "4.50"),  # so this keeps "four-b", not the late record's description
        ],
    )
    run_once(spark, plan)
    assert checkpoint.batch_ids(plan.checkpoint / "commits") == [0, 1, 2]  # one batch per run

    expected = {
        "1": {"name": "p1", DESC: BIG1, "price": "1.75", "stock": "1"},
        "2": {"name": "p2", DESC: BIG2B, "price": "2.75", "stock": "2"},
        "3": {"name": "p3", DESC: BIG3, "price": "3.75", "stock": "3"},
        "4": {"name": "p4", DESC: "four-b", "price": "4.50", "stock": "4"},
        "5": {"name": "p5", "price": "5.00", "stock": "5"},
    }
    assert plan.cache().entities() == expected

    index = plan.search()
    assert index is not None
    assert index.live_documents() == {
        e: {k: v for k, v in fields.items() if k in ("name", DESC)} for e, fields in expected.items()
    }
    assert index.search("zebra") == ["2"] and index.search("linen") == []

    current = query(
        plan.warehouse().current_path,
        "SELECT entity, position, deleted, name, description, price, stock FROM t ORDER BY entity",
    )
    assert current == [
        {
            "entity": e,
            "position": positions.cdc(lsn, snapshot=False),
            "deleted": False,
            "name": fields["name"],
            DESC: fields.get(DESC),
            "price": fields["price"],
            "stock": int(fields["stock"]),
        }
        for (e, fields), lsn in zip(expected.items(), (300, 220, 310, 400, 250), strict=True)
    ]

    history = query(
        plan.warehouse().history_path, "SELECT entity, position, description, price FROM t ORDER BY position"
    )
    by_lsn = {positions.decode(str(r["position"])): r for r in history}
    assert sorted(by_lsn) == [100, 110, 120, 140, 150, 200, 210, 220, 230, 240, 250, 300, 310, 400]
    not_sent = {200, 220, 240, 250, 300, 310, 400}
    assert {lsn for lsn, r in by_lsn.items() if r[DESC] is None} == not_sent  # "not sent by the source"
    assert by_lsn[220]["price"] == "2.75" and by_lsn[210][DESC] == BIG2B


def test_decode_takes_the_connectors_placeholder(spark: Any) -> None:
    records = [
        debezium(1, 10, "u", row(1, "1.00"), unavailable=(DESC,), placeholder="<toast>"),
        debezium(2, 20, "u", row(2, "2.00", DEFAULT_UNAVAILABLE_PLACEHOLDER)),
        debezium(3, 30, "d", None),
    ]
    raw = spark.createDataFrame(
        [(k, v, "t", 0, i) for i, (k, v) in enumerate(records)],
        "key binary, value binary, topic string, partition int, offset long",
    )

    def decoded(**placeholder: str) -> dict[str, Any]:
        changes, errors = split(
            dbz.DebeziumDecoder(data_columns=COLUMNS, data_ddl=DATA_DDL, key_column="id", **placeholder)(raw)
        )
        assert errors.count() == 0
        return {r["entity"]: r for r in changes.collect()}

    custom = decoded(unavailable_placeholder="<toast>")
    assert custom["1"]["keep_fields"] == [DESC] and custom["1"][DESC] is None
    # A null in set_fields means "not set" (changes.py): the kept column is never written.
    assert custom["1"]["set_fields"] == {"name": "p1", "description": None, "price": "1.00", "stock": "1"}
    assert custom["2"]["keep_fields"] == [] and custom["2"][DESC] == DEFAULT_UNAVAILABLE_PLACEHOLDER
    assert custom["3"]["keep_fields"] == [] and custom["3"]["set_fields"] == {}
    default = decoded()
    assert default["1"]["keep_fields"] == [] and default["1"][DESC] == "<toast>"
    assert default["2"]["keep_fields"] == [DESC] and default["2"]["set_fields"][DESC] is None


def test_real_connector_with_default_replica_identity(
    spark: Any, cdc_source: Any, run_config: Any, endpoints: Any
) -> None:
    source = cdc_source(TABLE_DDL)
    pg = source.pg
    # EXTERNAL: stored out of line uncompressed, so the 20 kB description is TOASTed for sure.
    pg.execute(f"ALTER TABLE {source.table} ALTER COLUMN description SET STORAGE EXTERNAL")  # type: ignore[arg-type]
    pg.execute(f"INSERT INTO {source.table} VALUES (1, 'lamp', %s, 10.00, 1)", (BIG1,))  # type: ignore[arg-type]
    source.start()  # snapshot read of 1
    pg.execute(f"INSERT INTO {source.table} VALUES (2, 'rug', %s, 20.00, 2)", (BIG2,))  # type: ignore[arg-type]
    pg.execute(f"UPDATE {source.table} SET price = 11.00 WHERE id = 1")  # type: ignore[arg-type]
    pg.execute(f"UPDATE {source.table} SET price = 21.00 WHERE id = 2")  # type: ignore[arg-type]
    wait_for_end_offset(endpoints, source.topic, 4)
    plan = JobPlan.of(PRODUCTS, run_config(topic=source.topic, table=f"public.{source.table}"))
    run_once(spark, plan)
    pg.execute(f"UPDATE {source.table} SET price = 12.00, stock = 5 WHERE id = 1")  # type: ignore[arg-type]
    wait_for_end_offset(endpoints, source.topic, 5)
    run_once(spark, plan)

    sent = [m.value() for m in read_all(endpoints, source.topic)]
    placeholder = DEFAULT_UNAVAILABLE_PLACEHOLDER.encode()
    assert sum(placeholder in v for v in sent) == 3  # the connector really left the description out
    assert [str(d) for d in verify(plan)] == []
    assert plan.cache().read("1") == {"name": "lamp", DESC: BIG1, "price": "12.00", "stock": "5"}
    index = plan.search()
    assert index is not None and index.live_documents()["2"] == {"name": "rug", DESC: BIG2}


def test_a_batch_split_over_tasks_keeps_each_entitys_changes_in_order(
    spark: Any, topics: Any, producer: Any, run_config: Any, endpoints: Any
) -> None:
    """A full batch of a one-partition topic is read by two tasks (`job.split_reads`), an entity's
    value in the first task's offsets, its placeholder in the second's. Applied from the driver, the
    collected batch keeps offset order; applied by the executors (a batch that reads a partition the
    batch before did not: its size is not known ahead), it is sorted per entity first. Either way
    every view keeps the value."""
    from confluent_kafka.admin import NewPartitions

    from kafkakit.clients import make_admin

    topic = topics("mat-split")
    fillers = 3000  # several cache round trips (redis_cache.PIPELINE) before the value is sent
    plan = JobPlan.of(PRODUCTS, run_config(topic=topic, small_batch_rows=str(2 * fillers + 2)))

    def halves(entity: int, lsn: int, big: str) -> list[tuple[bytes, bytes]]:
        """Fillers, the entity's value | its placeholder, the fillers' updates: at the split."""
        others = [(10_000 * entity + i, lsn + 2 + i) for i in range(fillers)]  # distinct per entity
        return [
            *(debezium(e, at, "c", row(e, "9.00", f"d{e}")) for e, at in others),
            debezium(entity, lsn, "c", row(entity, "1.00", big)),
            keep(entity, lsn + 1, "1.50"),
            *(debezium(e, at + fillers, "u", row(e, "9.50", f"e{e}")) for e, at in others),
        ]

    produce(producer, topic, halves(1, 100, BIG1))
    job = run_once(spark, plan)
    assert job.task_records == fillers + 1  # a batch's share of each of local[2]'s two task slots
    assert "decode_to_driver" in job.clock.take(0)

    admin = make_admin(
        {"bootstrap.servers": endpoints.kafka_bootstrap_servers}, client_config=endpoints.kafka_client
    )
    admin.create_partitions([NewPartitions(topic, 2)])[topic].result(timeout=30)
    for key, value in halves(2, 200, BIG2):
        producer.produce(topic, key=key, value=value, partition=0)
    producer.flush()
    job = run_once(spark, plan)
    assert checkpoint.planned_records(plan.checkpoint, 1) is None  # partition 1 is new to batch 1
    steps = job.clock.take(1)
    assert "decode_to_driver" not in steps and "cache" in steps  # the executors' path

    for entity, big in (("1", BIG1), ("2", BIG2)):
        assert plan.cache().read(entity) == {
            "name": f"p{entity}",
            DESC: big,
            "price": "1.50",
            "stock": entity,
        }
    index = plan.search()
    assert index is not None and index.search("walnut") == ["1"] and index.search("linen") == ["2"]
    current = query(
        plan.warehouse().current_path, "SELECT entity, description, price FROM t WHERE entity IN ('1', '2')"
    )
    assert sorted((r["entity"], r[DESC], r["price"]) for r in current) == [
        ("1", BIG1, "1.50"),
        ("2", BIG2, "1.50"),
    ]
