"""A batch where no entity changes twice (a snapshot's backfill) skips the warehouse's per-entity
aggregation and in-batch dedup: the shortcut must give the rows the aggregation gives, and a batch
with a repeated entity must still take the aggregation."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from materializers.decode import positions
from materializers.decode.changes import latest_per_entity, unique_entities
from materializers.views.warehouse.delta import DeltaWarehouse, query
from shop.products import COLUMNS, DATA_DDL

pytestmark = pytest.mark.integration

DDL = (
    "entity string, position string, op string, set_fields map<string,string>, del_fields array<string>, "
    f"keep_fields array<string>, event_ts timestamp, src_topic string, src_partition int, src_offset long, "
    f"{DATA_DDL}"
)


def frame(spark: Any, rows: list[tuple[str, int, str, list[str], tuple[Any, ...]]]) -> Any:
    """(entity, lsn, op, keep_fields, (name, description, price, stock)) rows as a change frame."""
    from datetime import UTC, datetime

    at = datetime(2026, 11, 26, 9, tzinfo=UTC)
    return spark.createDataFrame(
        [
            (e, positions.cdc(lsn, snapshot=False), op, {}, [], keep, at, "t", 0, lsn, *data)
            for e, lsn, op, keep, data in rows
        ],
        DDL,
    )


UNIQUE = [
    ("1", 10, "upsert", [], ("a", "first", "1.00", 1)),
    ("2", 11, "upsert", ["description"], ("b", None, "2.00", 2)),  # an unchanged TOAST value
    ("3", 12, "delete", [], (None, None, None, None)),
]


def rows(frame_: Any) -> list[dict[str, Any]]:
    return sorted((r.asDict(recursive=True) for r in frame_.collect()), key=lambda r: r["entity"])


def test_the_unique_shortcut_gives_the_aggregations_rows(spark: Any) -> None:
    changes = frame(spark, UNIQUE)
    assert unique_entities(changes)
    shortcut = rows(latest_per_entity(changes, ("event_ts",), COLUMNS, unique=True))
    assert shortcut == rows(latest_per_entity(changes, ("event_ts",), COLUMNS))
    kept = next(r for r in shortcut if r["entity"] == "2")
    assert kept["carried_at"]["description"] is None  # not carried: the view keeps its own value
    assert kept["carried_at"]["name"] == positions.cdc(11, snapshot=False)


def test_a_repeated_entity_is_not_unique_and_history_keeps_one_row_per_position(
    spark: Any, tmp_path: Path
) -> None:
    twice = frame(spark, [*UNIQUE, ("1", 13, "upsert", [], ("a2", "second", "1.50", 0))])
    assert not unique_entities(twice)
    warehouse = DeltaWarehouse(tmp_path / "delta", DATA_DDL)
    warehouse.ensure_tables(spark)
    warehouse.write_batch(twice, "app", 0, COLUMNS)
    # The same records delivered again in a later batch (a replay): nothing is added.
    warehouse.write_batch(frame(spark, UNIQUE), "app", 1, COLUMNS)

    history = query(
        warehouse.history_path, "SELECT entity, count(*) AS n FROM t GROUP BY entity ORDER BY entity"
    )
    assert history == [{"entity": "1", "n": 2}, {"entity": "2", "n": 1}, {"entity": "3", "n": 1}]
    current = query(warehouse.current_path, "SELECT entity, name, deleted FROM t ORDER BY entity")
    assert current == [
        {"entity": "1", "name": "a2", "deleted": False},
        {"entity": "2", "name": "b", "deleted": False},
        {"entity": "3", "name": None, "deleted": True},
    ]
