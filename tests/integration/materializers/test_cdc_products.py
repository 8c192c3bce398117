"""CDC products -> Redis, Tantivy, Delta through a real Debezium connector; replays change nothing."""

from __future__ import annotations

from typing import Any

import pytest
from conftest import read_all, run_once, wait_for_end_offset

from materializers.ops.verify import verify
from materializers.runtime.job import JobPlan
from materializers.views.warehouse.delta import query
from shop.products import PRODUCTS, TABLE_DDL

pytestmark = pytest.mark.integration


def counts(plan: JobPlan) -> dict[str, Any]:
    wh = plan.warehouse()
    index = plan.search()
    assert index is not None
    return {
        "cache": plan.cache().entities(),
        "positions": {e: plan.cache().position(e) for e in ("1", "2", "3", "4", "5", "6")},
        "search": index.live_documents(),
        "current": query(wh.current_path, "SELECT count(*) AS n FROM t")[0]["n"],
        "history": query(
            wh.history_path, "SELECT count(*) AS n, count(DISTINCT entity || position) AS d FROM t"
        )[0],
    }


def test_cdc_inserts_updates_deletes_then_replay(
    spark: Any, cdc_source: Any, run_config: Any, producer: Any, endpoints: Any
) -> None:
    source = cdc_source(TABLE_DDL)
    pg = source.pg
    for i in range(1, 6):
        pg.execute(
            f"INSERT INTO {source.table} VALUES (%s, %s, %s, %s, %s)",  # type: ignore[arg-type]
            (i, f"widget {i}", f"a sturdy {'red' if i % 2 else 'blue'} widget", f"{i}.50", i * 10),
        )
    source.start()  # snapshot: 5 reads
    pg.execute(f"UPDATE {source.table} SET price = 99.99, name = 'gadget two' WHERE id = 2")  # type: ignore[arg-type]
    pg.execute(f"UPDATE {source.table} SET description = NULL WHERE id = 3")  # type: ignore[arg-type]
    pg.execute(f"DELETE FROM {source.table} WHERE id = 4")  # type: ignore[arg-type]
    pg.execute(f"INSERT INTO {source.table} VALUES (6, 'sprocket', 'blue sprocket', 0.10, 1)")  # type: ignore[arg-type]
    end = wait_for_end_offset(endpoints, source.topic, 5 + 2 + 2 + 1)
    # A poison record: not a Debezium envelope. It must be dead-lettered, the rest applied.
    producer.produce(source.topic, key=b'{"payload":{"id":7}}', value=b"\x00not json")
    producer.flush()

    plan = JobPlan.of(PRODUCTS, run_config(topic=source.topic, table=f"public.{source.table}"))
    job = run_once(spark, plan)

    assert [str(d) for d in verify(plan)] == []
    assert (
        plan.cache().read("4") is None and plan.cache().position("4") is not None
    )  # delete keeps its position
    assert plan.cache().read("2") == {
        "name": "gadget two",
        "description": "a sturdy blue widget",
        "price": "99.99",
        "stock": "20",
    }
    index = plan.search()
    assert index is not None and index.search("sprocket") == ["6"]
    assert sorted(index.search("blue")) == ["2", "6"]
    before = counts(plan)
    assert before["history"] == {
        "n": end - 1,
        "d": end - 1,
    }  # every change once; the tombstone is not a change
    assert job.dead_letters == 1
    dlq = read_all(endpoints, plan.dlq_topic)
    assert len(dlq) == 1 and dlq[0].value() == b"\x00not json"
    headers = {k: v.decode() for k, v in dlq[0].headers()}
    assert headers["dlq-source-offset"] == str(end) and headers["dlq-source-topic"] == source.topic
    assert "Debezium" in headers["dlq-error"]

    # Replay everything from offset 0 into the same views under a fresh checkpoint (new app id, so
    # Delta/Tantivy batch markers cannot help): positions alone must keep every view unchanged.
    replay = JobPlan.of(
        PRODUCTS,
        run_config(
            topic=source.topic, table=f"public.{source.table}", checkpoint=str(plan.job_dir / "replay-ckpt")
        ),
    )
    run_once(spark, replay, f'{{"{source.topic}": {{"0": 0}}}}')
    assert counts(plan) == before
    assert [str(d) for d in verify(plan)] == []
