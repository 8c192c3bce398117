"""rebuild: new views beside the live ones, readers served throughout, atomic switch, old retired."""

from __future__ import annotations

import threading
import time
from typing import Any

import psycopg
import pytest
from conftest import run_once
from records import debezium

from kafkakit.positions import parse_start
from materializers.ops import generations
from materializers.ops.rebuild import rebuild
from materializers.ops.verify import verify
from materializers.runtime.job import JobPlan
from materializers.views.warehouse.delta import query
from shop.products import PRODUCTS, TABLE_DDL

pytestmark = pytest.mark.integration


class Reader(threading.Thread):
    """What a client does: resolve the pointers, then read; every read must see the whole view."""

    def __init__(self, config: Any, expected: int) -> None:
        super().__init__(daemon=True)
        self.config, self.expected = config, expected
        self.stop = threading.Event()
        self.reads = 0
        self.generations: set[str] = set()
        self.problems: list[str] = []

    def read_once(self) -> None:
        base = JobPlan.of(PRODUCTS, self.config)
        prefix = generations.live_redis_prefix(base.cache().client(), base.base_prefix)
        cached = len(type(base.cache())(base.cache().url, prefix).entities())
        generation = generations.live_generation(base.job_dir)
        live = JobPlan.of(PRODUCTS, self.config, generation)
        index = live.search()
        assert index is not None
        searchable = len(index.live_documents())
        current = query(live.warehouse().current_path, "SELECT count(*) AS n FROM t WHERE NOT deleted")[0][
            "n"
        ]
        self.generations.add(generation)
        if (cached, searchable, current) != (self.expected,) * 3:
            self.problems.append(
                f"{generation or 'original'}: cache {cached}, search {searchable}, delta {current}"
            )

    def run(self) -> None:
        while not self.stop.is_set():
            try:
                self.read_once()
            except Exception as exc:  # a vanished directory or table is exactly what must not happen
                self.problems.append(repr(exc))
            self.reads += 1


def test_rebuild_switches_readers_without_a_gap(
    spark: Any, topics: Any, producer: Any, run_config: Any, endpoints: Any, uid: str
) -> None:
    topic = topics("mat-rebuild")
    table = f"mat_rb_{uid}"
    pg = psycopg.connect(endpoints.pg_dsn, autocommit=True)
    pg.execute(f"CREATE TABLE {table} ({TABLE_DDL})")  # type: ignore[arg-type]
    config = run_config(topic=topic, table=f"public.{table}")
    records = []
    for i in range(1, 61):  # the table's history, as its CDC records; the table holds the end state
        row = {"name": f"p{i}", "description": f"item {i}", "price": f"{i}.50", "stock": i}
        pg.execute(
            f"INSERT INTO {table} VALUES (%s, %s, %s, %s, %s)",  # type: ignore[arg-type]
            (i, row["name"], row["description"], row["price"], row["stock"]),
        )
        records.append(debezium(i, 1000 + i, "c", row))
    for i in range(51, 61):
        pg.execute(f"DELETE FROM {table} WHERE id = %s", (i,))  # type: ignore[arg-type]
        records.append(debezium(i, 2000 + i, "d", None))
    for key, value in records:
        producer.produce(topic, key=key, value=value)
    producer.flush()
    original = JobPlan.of(PRODUCTS, config)
    reader = Reader(config, expected=50)
    try:
        run_once(spark, original)
        assert verify(original) == []
        reader.start()
        deadline = time.monotonic() + 60
        while "" not in reader.generations and time.monotonic() < deadline:  # it read the original
            time.sleep(0.05)
        done = rebuild(spark, PRODUCTS, config, parse_start("earliest"), grace=5.0)
        seen = reader.reads
        deadline = time.monotonic() + 60
        while reader.reads < seen + 2 and time.monotonic() < deadline:  # reads after the retirement
            time.sleep(0.1)
        reader.stop.set()
        reader.join(60)
        assert reader.problems == []
        assert reader.generations == {"", done.new_generation} and reader.reads > seen

        live = generations.resolve(PRODUCTS, config)
        assert live.generation == done.new_generation and live.redis_prefix.endswith(
            "@" + done.new_generation
        )
        assert [str(d) for d in verify(live)] == []
        # The original generation is gone: keys, index, tables, checkpoint.
        assert original.cache().entities() == {}
        assert not any((original.job_dir / d).exists() for d in ("search", "delta", "checkpoint"))

        # The next run continues from the new generation's checkpoint.
        pg.execute(f"UPDATE {table} SET stock = 99 WHERE id = 7")  # type: ignore[arg-type]
        key, value = debezium(
            7, 5000, "u", {"name": "p7", "description": "item 7", "price": "7.50", "stock": 99}
        )
        producer.produce(topic, key=key, value=value)
        producer.flush()
        run_once(spark, live)
        assert [str(d) for d in verify(live)] == []
        assert live.cache().read("7") == {
            "name": "p7",
            "description": "item 7",
            "price": "7.50",
            "stock": "99",
        }
    finally:
        reader.stop.set()
        original.cache().clear()
        generations.resolve(PRODUCTS, config).cache().clear()
        pg.execute(f"DROP TABLE IF EXISTS {table}")  # type: ignore[arg-type]
        pg.close()
