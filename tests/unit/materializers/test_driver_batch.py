"""The pure parts of the warehouse's driver-side writes: the fold to each entity's newest change,
the history rows, the MERGE's source and its SQL in DataFusion's dialect."""

from __future__ import annotations

import random
from collections.abc import Iterable
from dataclasses import replace
from datetime import UTC, date, datetime

import pyarrow as pa
import pytest

from kafkakit.errors import ConfigError
from materializers.config import DRIVER_ROWS, RunConfig, parse_driver_rows
from materializers.decode.changes import entity_order, newest_indices, newest_of
from materializers.materializer import Materializer
from materializers.plan import JobPlan
from materializers.runtime.batch_size import budget_of, rows_for, sized
from materializers.views.warehouse.delta import (
    DATAFUSION,
    arrow_bounds,
    current_rows,
    history_rows,
    merge_assignments,
)
from shop.products import PRODUCTS

DATA = ("name", "description")
AT = datetime(2026, 11, 27, 9, tzinfo=UTC)
# (entity, position, op, keep_fields, name, description)
ROWS = [
    ("1", "p10", "upsert", [], "a", "first"),
    ("2", "p11", "upsert", [], "b", "second"),
    ("1", "p12", "upsert", ["description"], "a2", None),
    ("1", "p09", "upsert", [], "late", "late"),
    ("2", "p13", "delete", [], None, None),
    ("2", "p11", "upsert", [], "b", "second"),  # delivered twice
]


def batch() -> pa.Table:
    columns = list(zip(*ROWS, strict=True))
    return pa.table(
        {
            "entity": columns[0],
            "position": columns[1],
            "op": columns[2],
            "event_ts": pa.array([AT] * len(ROWS), pa.timestamp("us", "UTC")),
            "src_topic": ["t"] * len(ROWS),
            "src_partition": pa.array([0] * len(ROWS), pa.int32()),
            "src_offset": pa.array(range(len(ROWS)), pa.int64()),
            "name": columns[4],
            "description": columns[5],
            "keep_fields": pa.array(columns[3], pa.list_(pa.string())),
            "event_date": pa.array([AT.date()] * len(ROWS), pa.date32()),
        }
    )


def test_newest_indices_takes_each_column_from_its_newest_carrier() -> None:
    found = newest_indices([r[0] for r in ROWS], [r[1] for r in ROWS], [r[3] for r in ROWS], DATA)
    assert found.rows == [2, 4]  # entity 1: p12; entity 2: the delete at p13
    assert found.carriers == {"name": [2, 4], "description": [0, 4]}  # p12 kept the description


def test_current_rows_carry_the_newest_values_and_their_positions() -> None:
    table = batch()
    newest = newest_indices(
        *(table.column(c).to_pylist() for c in ("entity", "position", "keep_fields")), DATA
    )
    rows = current_rows(table, newest, DATA).to_pylist()
    assert [(r["entity"], r["position"], r["deleted"], r["name"], r["description"]) for r in rows] == [
        ("1", "p12", False, "a2", "first"),
        ("2", "p13", True, None, None),
    ]
    assert rows[0]["carried_at"] == {"name": "p12", "description": "p10"}
    assert rows[0]["updated_at"] == AT


def test_a_batch_of_one_change_per_entity_is_its_own_merge_source_in_its_order() -> None:
    table = batch().take([4, 2])  # entity 2's delete, then entity 1's p12, each carrying every column:
    table = table.set_column(table.schema.get_field_index("keep_fields"), "keep_fields",
                             pa.array([[], []], pa.list_(pa.string())))  # fmt: skip
    newest = newest_of(table["entity"], table["position"], table["keep_fields"], DATA)
    assert newest.rows == [1, 0] and all(newest.carriers[c] is newest.rows for c in DATA)
    whole = current_rows(table, newest, DATA)
    assert whole.column("entity").to_pylist() == ["2", "1"]  # the batch's order, nothing taken
    taken = current_rows(table, newest._replace(carriers={c: list(newest.rows) for c in DATA}), DATA)
    assert taken.column("entity").to_pylist() == ["1", "2"]  # along the entity order
    assert whole.schema == taken.schema
    assert sorted(whole.to_pylist(), key=lambda r: r["entity"]) == taken.to_pylist()
    assert whole.to_pylist()[1]["carried_at"] == {"name": "p12", "description": "p12"}


def test_history_rows_keep_each_pair_once_and_drop_the_written_ones() -> None:
    table = batch()
    seen = pa.table({"entity": ["1", "9"], "position": ["p10", "p10"]}, schema=VIEWS)
    fresh = history_rows(table, seen, DATA)
    assert list(
        zip(fresh.column("entity").to_pylist(), fresh.column("position").to_pylist(), strict=True)
    ) == [
        ("2", "p11"),
        ("1", "p12"),
        ("1", "p09"),
        ("2", "p13"),
    ]
    assert "keep_fields" not in fresh.column_names and fresh.column_names[-1] == "event_date"
    assert history_rows(table, table.select(["entity", "position"]), DATA).num_rows == 0
    assert history_rows(table, None, DATA).num_rows == 5  # the pair delivered twice, once


# delta-rs's queries answer with string views where the collected batch has strings
VIEWS = pa.schema([("entity", pa.string_view()), ("position", pa.string_view())])


def test_arrow_bounds() -> None:
    assert arrow_bounds(batch()) == ("1", "2", "p09", "p13", [date(2026, 11, 27)])


def test_merge_assignments_in_datafusions_dialect() -> None:
    found = merge_assignments(("Name",), DATAFUSION)
    assert found["position"] == 's."position"'
    assert found["Name"] == (
        "CASE WHEN s.carried_at['Name'] IS NULL OR s.carried_at['Name'] <= t.position "
        'THEN t."Name" ELSE s."Name" END'
    )


def test_driver_rows_setting() -> None:
    assert RunConfig.from_env({}).warehouse_driver_rows is None  # auto
    assert RunConfig.from_env({}).with_overrides(warehouse_driver_rows="0").warehouse_driver_rows == 0
    with pytest.raises(ConfigError, match="non-negative integer"):
        parse_driver_rows("-1")


def folded(entities: list[str], positions: list[str], keep_fields: list[list[str] | None]) -> tuple:
    """The fold as a loop over the rows: what `newest_indices` must agree with."""

    def newest(rows: Iterable[int]) -> dict[str, int]:
        found: dict[str, int] = {}
        for i in rows:
            at = found.get(entities[i])
            if at is None or positions[i] > positions[at]:
                found[entities[i]] = i
        return found

    every = range(len(entities))
    rows = newest(every)
    carriers = {c: newest(i for i in every if not (keep_fields[i] and c in keep_fields[i])) for c in DATA}
    order = sorted(rows)
    return [rows[e] for e in order], {c: [carriers[c].get(e) for e in order] for c in DATA}


def test_newest_indices_agree_with_a_loop_over_the_rows() -> None:
    rnd = random.Random(7)
    for _ in range(500):
        n = rnd.randint(0, 25)
        entities = [rnd.choice(["1", "10", "9", "é", ""]) for _ in range(n)]
        positions = [rnd.choice(["p1", "p10", "p2", "q"]) for _ in range(n)]
        kept = [rnd.choice([None, [], ["name"], ["description", "name"], ["other"]]) for _ in range(n)]
        found = newest_indices(entities, positions, kept, DATA)
        assert (found.rows, found.carriers) == folded(entities, positions, kept)


def test_history_rows_agree_with_a_loop_over_the_rows() -> None:
    """Each (entity, position) once, its first row, minus the pairs already written, in row order:
    found along the fold's sort, with and without a repeat."""
    rnd = random.Random(11)
    for _ in range(300):
        n = rnd.randint(0, 25)
        pairs = [(rnd.choice(["1", "10", "9", "é"]), rnd.choice(["p1", "p10", "p2"])) for _ in range(n)]
        written = rnd.sample(sorted(set(pairs)), k=min(2, len(set(pairs)))) if rnd.random() < 0.3 else []
        written += [("other", "p1")] if rnd.random() < 0.3 else []  # written, not in this batch
        table = pa.table(
            {
                "entity": pa.array([e for e, _ in pairs], pa.string()),
                "position": pa.array([p for _, p in pairs], pa.string()),
                **{c: pa.array([None] * n, pa.string()) for c in ("op", "src_topic", *DATA)},
                "event_ts": pa.array([AT] * n, pa.timestamp("us", "UTC")),
                "src_partition": pa.array([0] * n, pa.int32()),
                "src_offset": pa.array(range(n), pa.int64()),
                "event_date": pa.array([AT.date()] * n, pa.date32()),
            }
        )
        seen = pa.table(
            {"entity": [e for e, _ in written], "position": [p for _, p in written]}, schema=VIEWS
        )
        expected = [i for i, pair in enumerate(pairs) if pair not in pairs[:i] and pair not in written]
        order = entity_order(table["entity"], table["position"])
        for fresh in (history_rows(table, seen, DATA), history_rows(table, seen, DATA, order)):
            assert fresh.column("src_offset").to_pylist() == expected


def test_newest_of_a_batch_collected_in_chunks() -> None:
    table = batch()
    chunked = pa.concat_tables([table.slice(0, 2), table.slice(2)])
    assert chunked.column("entity").num_chunks == 2
    found = newest_of(chunked["entity"], chunked["position"], chunked["keep_fields"], DATA)
    ordered = newest_of(
        chunked["entity"],
        chunked["position"],
        chunked["keep_fields"],
        DATA,
        entity_order(chunked["entity"], chunked["position"]),
    )
    assert (
        found
        == ordered
        == newest_indices([r[0] for r in ROWS], [r[1] for r in ROWS], [r[3] for r in ROWS], DATA)
    )


def test_auto_driver_batches_fit_the_budget_at_the_records_bytes() -> None:
    budget = (1 << 30) // 4  # a quarter of 1 GiB
    # 433-byte Avro records (+256 per decoded row): 389k records, ~268 MB at 689 B each
    assert rows_for(budget, 433.5) == 389_319
    assert rows_for(4 * budget, 433.5) == 1_557_276  # the driver's memory, not a fixed count
    assert rows_for(budget, 5_166) == DRIVER_ROWS  # JSON with inline schemas: never below the floor
    assert rows_for(budget, None) == DRIVER_ROWS  # an empty topic: a live stream's bound


def test_the_budget_follows_the_driver_memory_and_stays_under_max_result_size() -> None:
    gib = 1 << 30
    assert budget_of(gib, gib) == gib // 8  # Spark's defaults
    assert budget_of(16 * gib, gib) == gib // 2  # a collect past maxResultSize would fail the job
    assert budget_of(16 * gib, 0) == 2 * gib  # maxResultSize 0: no limit
    assert budget_of(2 * gib, 4 * gib) == gib // 4


def test_explicit_bounds_are_kept_and_a_cluster_or_python_rows_get_the_floor() -> None:
    # spark=None: none of these asks the driver or the broker
    explicit = RunConfig(small_batch_rows=10, warehouse_driver_rows=0)
    assert sized(explicit, "t", spark=None, warehouse_only=True) is explicit  # type: ignore[arg-type]
    cluster = RunConfig(master="spark://h:7077", small_batch_rows=10)
    found = sized(cluster, "t", spark=None, warehouse_only=True)  # type: ignore[arg-type]
    assert (found.small_batch_rows, found.warehouse_driver_rows) == (10, DRIVER_ROWS)
    found = sized(RunConfig(), "t", spark=None, warehouse_only=False)  # type: ignore[arg-type]
    assert (found.small_batch_rows, found.warehouse_driver_rows) == (DRIVER_ROWS, DRIVER_ROWS)


def test_only_a_warehouse_alone_takes_the_byte_sized_bound() -> None:
    def plan(spec: Materializer = PRODUCTS, **flags: str) -> JobPlan:
        return JobPlan.of(spec, RunConfig().with_overrides(**flags))

    assert not plan().warehouse_only()  # products keeps the cache and a Tantivy index too
    assert plan(views="warehouse").warehouse_only()
    assert not plan(views="cache,warehouse").warehouse_only()  # its field maps double a row
    assert not plan(views="search,warehouse", search_backend="opensearch").warehouse_only()
    assert not plan(views="cache").warehouse_only()
    own = replace(PRODUCTS, search_fields=(), views=(object(),))  # its own view may hold Python rows
    assert not plan(own).warehouse_only()
    assert plan(own, views="warehouse").warehouse_only()  # ... unless the run leaves it out
