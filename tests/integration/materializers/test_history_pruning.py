"""The history table's duplicate check reads only the files whose position range overlaps the batch's
(Delta file statistics): CDC positions grow with time, so its cost follows the batch, not the day;
duplicates are still dropped."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from materializers.decode import positions
from materializers.views.warehouse.delta import DeltaWarehouse, query
from shop.products import COLUMNS, DATA_DDL

pytestmark = pytest.mark.integration

HOUR_US = 3_600_000_000
DAY_US = 1_790_000_000_000_000 // (24 * HOUR_US) * (24 * HOUR_US)  # a midnight UTC in 2026
DDL = (
    "entity string, position string, op string, set_fields map<string,string>, del_fields array<string>, "
    f"keep_fields array<string>, ts_us long, src_topic string, src_partition int, src_offset long, {DATA_DDL}"
)


def changes(spark: Any, rows: list[tuple[int, int, int]]) -> Any:
    """Upserts (entity, lsn, microseconds after 09:00) as a one-partition change frame."""
    from pyspark.sql import functions as F

    start = DAY_US + 9 * HOUR_US
    data: list[tuple[Any, ...]] = [
        (
            str(e),
            positions.cdc(lsn, snapshot=False),
            "upsert",
            {},
            [],
            [],
            start + us,
            "t",
            0,
            lsn,
            f"n{e}",
            "d",
            "1.00",
            1,
        )
        for e, lsn, us in rows
    ]
    frame = spark.createDataFrame(data, DDL).coalesce(1)
    return frame.withColumn("event_ts", F.timestamp_micros("ts_us")).drop("ts_us")


def test_duplicate_check_reads_the_batch_range_only(spark: Any, tmp_path: Path) -> None:
    warehouse = DeltaWarehouse(tmp_path / "delta", DATA_DDL)
    warehouse.ensure_tables(spark)
    for batch, hour in enumerate((0, 1, 2)):  # one file per batch, an hour apart
        rows = [(e, 100 * hour + e, hour * HOUR_US + e) for e in range(1, 4)]
        warehouse.write_batch(changes(spark, rows), "app", batch, COLUMNS)

    # A change of the last batch delivered again hours later (a re-produced record: same entity and
    # position, a new timestamp) beside a new one.
    replay = changes(spark, [(3, 203, 5 * HOUR_US), (4, 204, 5 * HOUR_US)])
    written = warehouse.written(replay, replay.select("entity", "position"))
    assert len(written.inputFiles()) == 1  # of 3
    assert [tuple(r) for r in written.collect()] == [("3", positions.cdc(203, snapshot=False))]

    warehouse.write_batch(replay, "app", 3, COLUMNS)
    counts = query(
        warehouse.history_path, "SELECT entity, count(*) AS n FROM t GROUP BY entity ORDER BY entity"
    )
    assert counts == [
        {"entity": "1", "n": 3},
        {"entity": "2", "n": 3},
        {"entity": "3", "n": 3},
        {"entity": "4", "n": 1},
    ]


def test_the_check_runs_only_for_a_batch_reaching_down_to_the_ceiling(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    checks: list[int] = []
    check = DeltaWarehouse.written

    def counted(self: DeltaWarehouse, *args: Any) -> Any:
        checks.append(1)
        return check(self, *args)

    monkeypatch.setattr(DeltaWarehouse, "written", counted)
    warehouse = DeltaWarehouse(tmp_path / "delta", DATA_DDL)
    warehouse.ensure_tables(spark)
    warehouse.write_batch(changes(spark, [(1, 1, 1), (2, 2, 2)]), "app", 0, COLUMNS)  # empty table
    warehouse.write_batch(changes(spark, [(1, 11, 11), (2, 12, 12)]), "app", 1, COLUMNS)  # all above
    assert checks == []
    # Debezium re-sends a change after a connector restart (same entity and LSN) beside a new one.
    warehouse.write_batch(changes(spark, [(2, 12, 50), (3, 21, 51)]), "app", 2, COLUMNS)
    assert checks == [1]
    # A restarted job (a new writer) replays the first batch: the ceiling comes from the table.
    restarted = DeltaWarehouse(tmp_path / "delta", DATA_DDL)
    restarted.write_batch(changes(spark, [(1, 1, 1), (2, 2, 2)]), "other-app", 0, COLUMNS)
    assert checks == [1, 1]

    history = query(warehouse.history_path, "SELECT entity, position FROM t ORDER BY entity, position")
    assert [(r["entity"], positions.decode(str(r["position"]))) for r in history] == [
        ("1", 1),
        ("1", 11),
        ("2", 2),
        ("2", 12),
        ("3", 21),
    ]


def test_an_append_that_raised_after_committing_makes_the_writer_read_the_ceiling_again(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pyspark.sql.readwriter import DataFrameWriter

    warehouse = DeltaWarehouse(tmp_path / "delta", DATA_DDL)
    warehouse.ensure_tables(spark)
    warehouse.write_batch(changes(spark, [(1, 1, 1)]), "app", 0, COLUMNS)
    save = DataFrameWriter.save

    def committed_then_failed(self: Any, *args: Any, **kwargs: Any) -> None:
        save(self, *args, **kwargs)
        raise RuntimeError("connection lost after the commit")

    monkeypatch.setattr(DataFrameWriter, "save", committed_then_failed)
    with pytest.raises(RuntimeError):
        warehouse.write_batch(changes(spark, [(2, 12, 12)]), "app", 1, COLUMNS)
    monkeypatch.setattr(DataFrameWriter, "save", save)
    # The re-sent change lies above what the writer had seen before the failure.
    warehouse.write_batch(changes(spark, [(2, 12, 50), (3, 21, 51)]), "app", 2, COLUMNS)

    history = query(
        warehouse.history_path, "SELECT entity, count(*) AS n FROM t GROUP BY entity ORDER BY entity"
    )
    assert history == [{"entity": "1", "n": 1}, {"entity": "2", "n": 1}, {"entity": "3", "n": 1}]


def test_without_file_statistics_the_ceiling_comes_from_a_scan(spark: Any, tmp_path: Path) -> None:
    warehouse = DeltaWarehouse(tmp_path / "delta", DATA_DDL)
    warehouse.ensure_tables(spark)
    spark.conf.set("spark.databricks.delta.stats.collect", "false")
    try:
        warehouse.write_batch(changes(spark, [(1, 1, 1), (2, 2, 2)]), "app", 0, COLUMNS)
    finally:
        spark.conf.unset("spark.databricks.delta.stats.collect")
    import pyarrow as pa
    from deltalake import DeltaTable as DeltaLog

    files = pa.table(DeltaLog(warehouse.history_path).get_add_actions(flatten=True))
    assert (
        "max.position" not in files.column_names or files.column("max.position").null_count == files.num_rows
    )
    # A restarted writer replays the batch: the log has no maxima, the scan finds position 2.
    DeltaWarehouse(tmp_path / "delta", DATA_DDL).write_batch(
        changes(spark, [(1, 1, 1), (2, 2, 2)]), "other-app", 0, COLUMNS
    )
    history = query(warehouse.history_path, "SELECT count(*) AS n FROM t")
    assert history == [{"n": 2}]
