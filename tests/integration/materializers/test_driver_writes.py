"""A small batch is written to the warehouse from the driver (delta-rs), a large one by Spark: both
must leave the same tables, skip a batch either of them committed, and finish a batch a crash cut
between the history append and the MERGE."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable
from test_unique_entities import frame

from materializers.views.warehouse import delta_rs
from materializers.views.warehouse.delta import HISTORY_DDL, DeltaWarehouse, query
from shop.products import COLUMNS, DATA_DDL

pytestmark = pytest.mark.integration

FIRST = [
    ("1", 10, "upsert", [], ("a", "first", "1.00", 1)),
    ("2", 11, "upsert", [], ("b", "second", "2.00", 2)),
    ("1", 12, "upsert", ["description"], ("a2", None, "1.50", 1)),  # an unchanged TOAST value
]
SECOND = [
    ("2", 20, "delete", [], (None, None, None, None)),
    ("1", 11, "upsert", [], ("late", "late", "0.00", 0)),  # older than 12: history only
    ("3", 21, "upsert", [], ("c", "third", "3.00", 3)),
]
BATCHES = [
    FIRST,
    SECOND,
    [*FIRST, ("2", 19, "upsert", [], ("zombie", "z", "9.00", 9))],  # a replay, and a late upsert of 2
    SECOND,  # all written before: an empty append
]
HISTORY = (
    "SELECT entity, position, op, src_offset, name, description, event_date FROM t ORDER BY entity, position"
)
CURRENT = "SELECT entity, position, deleted, name, description, price, stock FROM t ORDER BY entity"


def warehouse(spark: Any, root: Path) -> DeltaWarehouse:
    made = DeltaWarehouse(root, DATA_DDL, driver_rows=100)
    made.ensure_tables(spark)
    return made


def write(spark: Any, made: DeltaWarehouse, batch_id: int, *, in_driver: bool) -> None:
    rows = BATCHES[batch_id]
    made.write_batch(frame(spark, rows), "app", batch_id, COLUMNS, len(rows) if in_driver else None)


def tables(made: DeltaWarehouse) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    return query(made.history_path, HISTORY), query(made.current_path, CURRENT)


def versions(made: DeltaWarehouse) -> tuple[int, int]:
    return DeltaTable(made.history_path).version(), DeltaTable(made.current_path).version()


def test_the_driver_and_spark_leave_the_same_tables(spark: Any, tmp_path: Path) -> None:
    by_spark, in_driver = warehouse(spark, tmp_path / "spark"), warehouse(spark, tmp_path / "driver")
    for batch_id in range(len(BATCHES)):
        write(spark, by_spark, batch_id, in_driver=False)
        write(spark, in_driver, batch_id, in_driver=True)

    history, current = tables(in_driver)
    assert (history, current) == tables(by_spark)
    assert [(r["entity"], r["src_offset"]) for r in history] == [  # src_offset: the LSN here
        ("1", 10),
        ("1", 11),
        ("1", 12),
        ("2", 11),
        ("2", 19),
        ("2", 20),
        ("3", 21),
    ]
    assert [(r["entity"], r["deleted"], r["name"], r["description"]) for r in current] == [
        ("1", False, "a2", "first"),  # the late record lost, the kept description stayed
        ("2", True, None, None),  # the late upsert did not resurrect the delete
        ("3", False, "c", "third"),
    ]


def test_either_engine_skips_a_batch_the_other_committed(spark: Any, tmp_path: Path) -> None:
    made = warehouse(spark, tmp_path / "mixed")
    for batch_id in range(3):
        write(spark, made, batch_id, in_driver=batch_id == 1)
    written, at = tables(made), versions(made)

    write(spark, made, 1, in_driver=False)  # re-runs after a crash before Spark's checkpoint
    write(spark, made, 2, in_driver=True)
    assert versions(made) == at
    assert tables(made) == written
    by_spark = warehouse(spark, tmp_path / "spark")
    for batch_id in range(3):
        write(spark, by_spark, batch_id, in_driver=False)
    assert tables(by_spark) == written


@pytest.mark.parametrize("cut", ["merge", "append"])
def test_a_batch_cut_in_one_table_is_finished_once(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cut: str
) -> None:
    """The two tables are written side by side: whichever write fails, the other one commits, the
    batch fails, and its re-run writes only what is missing."""
    made = warehouse(spark, tmp_path / "cut")
    write(spark, made, 0, in_driver=True)
    history_before = len(tables(made)[0])

    def crash(*_args: Any, **_kwargs: Any) -> None:
        raise RuntimeError(f"driver killed in the {cut}")

    with monkeypatch.context() as patched:
        patched.setattr(delta_rs.DriverTable, cut, crash)
        with pytest.raises(RuntimeError, match=cut):
            write(spark, made, 1, in_driver=True)
    history, current = tables(made)
    deleted = [r["entity"] for r in current if r["deleted"]]
    if cut == "merge":
        assert len(history) == 6 and deleted == []
    else:
        assert len(history) == history_before < 6 and deleted == ["2"]
        assert DeltaTable(made.current_path).transaction_version("app") == 1

    write(spark, made, 1, in_driver=True)
    history, current = tables(made)
    assert len(history) == 6  # not appended twice
    assert [r["entity"] for r in current if r["deleted"]] == ["2"]
    assert DeltaTable(made.current_path).transaction_version("app") == 1
    assert DeltaTable(made.history_path).transaction_version("app") == 1


@pytest.mark.parametrize("in_driver", [True, False], ids=["delta-rs", "spark"])
def test_compaction_packs_each_date_into_one_file_and_keeps_the_rows(
    spark: Any, tmp_path: Path, in_driver: bool
) -> None:
    made = warehouse(spark, tmp_path / "compacted")
    for batch_id in range(3):
        write(spark, made, batch_id, in_driver=True)
    written = tables(made)
    assert len(DeltaTable(made.history_path).file_uris()) == 3  # a file per batch

    made.optimize(spark, 3 if in_driver else None)
    made.settle()  # delta-rs compacts in the background
    assert len(DeltaTable(made.history_path).file_uris()) == 1  # the batches share one date
    assert tables(made) == written


def operations(path: str) -> list[str]:
    return [commit["operation"] for commit in reversed(DeltaTable(path).history())]


def test_a_background_compaction_beside_the_next_batches_loses_and_doubles_nothing(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    made, twin = warehouse(spark, tmp_path / "compacting"), warehouse(spark, tmp_path / "twin")
    for batch_id in range(2):
        write(spark, made, batch_id, in_driver=True)
        write(spark, twin, batch_id, in_driver=True)
    original, released = delta_rs.DriverTable.compact, threading.Event()

    def held_back(table: delta_rs.DriverTable) -> None:  # runs once the test lets it
        if not released.wait(30):
            raise TimeoutError("optimize() waited for its own compaction")
        original(table)

    monkeypatch.setattr(delta_rs.DriverTable, "compact", held_back)
    made.optimize(spark, 3)  # returns while its compaction waits
    made.optimize(spark, 3)  # that one still runs: this round is skipped, not queued
    write(spark, made, 2, in_driver=True)
    write(spark, twin, 2, in_driver=True)
    released.set()
    write(spark, made, 3, in_driver=True)  # beside the compaction; its MERGE takes turns with it
    write(spark, twin, 3, in_driver=True)
    made.settle()

    assert tables(made) == tables(twin)
    assert operations(made.history_path).count("OPTIMIZE") == 1
    assert operations(made.current_path).count("OPTIMIZE") <= 1  # nothing to pack: no commit
    for path, twins in ((made.history_path, twin.history_path), (made.current_path, twin.current_path)):
        assert DeltaTable(path).transaction_version("app") == DeltaTable(twins).transaction_version("app")


def test_a_failed_background_compaction_is_raised_by_the_next_round(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    made = warehouse(spark, tmp_path / "broken")
    write(spark, made, 0, in_driver=True)

    def broken(_table: delta_rs.DriverTable) -> None:
        raise OSError("No space left on device")

    monkeypatch.setattr(delta_rs.DriverTable, "compact", broken)
    made.optimize(spark, 3)
    with pytest.raises(OSError, match="No space left"):
        for _ in range(200):  # a round that finds the failed one still running skips; the next raises
            made.optimize(spark, 3)
            time.sleep(0.05)
    made.optimize(spark, 3)  # raised once; a new round starts
    with pytest.raises(OSError, match="No space left"):
        made.settle()


def first_commit(table: Path) -> dict[str, Any]:
    """The engine, columns, partitioning and protocol a table's first commit recorded."""
    found: dict[str, Any] = {}
    for line in (table / "_delta_log" / "00000000000000000000.json").read_text().splitlines():
        action = json.loads(line)
        if "commitInfo" in action:
            found["engine"] = action["commitInfo"]["engineInfo"].split("/")[0].split(":")[0]
        if "metaData" in action:
            found["schema"] = json.loads(action["metaData"]["schemaString"])
            found["partitioned_by"] = action["metaData"]["partitionColumns"]
        if "protocol" in action:
            found["protocol"] = action["protocol"]
    return found


@pytest.mark.parametrize(
    ("ddl", "engine"),
    [
        (f"{HISTORY_DDL}, {DATA_DDL}, event_date date", "delta-rs"),
        ("a boolean, b tinyint, c smallint, d bigint, e float, f double, g decimal(38,9), h date, "
         "i binary, j int NOT NULL, event_date date", "delta-rs"),
        # what delta-rs would not write as Spark does is left to Spark's CREATE TABLE
        ("a varchar(10), b string COMMENT 'kept', c timestamp_ntz, event_date date", "Apache-Spark"),
        ("a array<string>, b map<string,int>, c struct<x:int>, event_date date", "Apache-Spark"),
    ],
)  # fmt: skip
def test_a_new_table_is_the_one_spark_creates(spark: Any, tmp_path: Path, ddl: str, engine: str) -> None:
    spark.sql(f"CREATE TABLE delta.`{tmp_path / 'spark'}` ({ddl}) USING DELTA PARTITIONED BY (event_date)")
    delta_rs.create_table(spark, str(tmp_path / "made"), ddl, ("event_date",))

    made, by_spark = first_commit(tmp_path / "made"), first_commit(tmp_path / "spark")
    assert made.pop("engine") == engine
    assert by_spark.pop("engine") == "Apache-Spark"
    assert made == by_spark
    assert made["partitioned_by"] == ["event_date"]


def test_an_existing_table_is_left_as_it_is(spark: Any, tmp_path: Path) -> None:
    made = warehouse(spark, tmp_path)
    write(spark, made, 0, in_driver=True)
    before = versions(made), tables(made)

    delta_rs.create_table(spark, made.history_path, "other string", ("other",))
    made.ensure_tables(spark)

    assert (versions(made), tables(made)) == before
    assert first_commit(Path(made.history_path))["schema"]["fields"][0]["name"] == "entity"
