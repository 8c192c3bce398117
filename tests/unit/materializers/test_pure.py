"""Pure parts of the materializers: positions, decisions, start options, trigger, status, fold, diff."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafkakit.errors import BadStartPosition, ConfigError
from kafkakit.positions import parse_start
from materializers.catalog import lookup
from materializers.config import RunConfig, normalize_trigger
from materializers.decode import positions
from materializers.decode.positions import Decision, decide
from materializers.errors import UnknownMaterializer
from materializers.ops.verify import compare
from materializers.runtime import checkpoint, status
from shop import orders
from shop.products import PRODUCTS

enc = positions.encode


@given(st.integers(0, 2**64 - 1), st.integers(0, 2**64 - 1))
def test_encoded_order_is_numeric_order(a: int, b: int) -> None:
    assert (enc(a) < enc(b)) == (a < b) and positions.decode(enc(a)) == a


def test_cdc_position_streamed_change_beats_snapshot_at_same_lsn() -> None:
    assert (
        positions.cdc(7, snapshot=True) < positions.cdc(7, snapshot=False) < positions.cdc(8, snapshot=True)
    )
    assert positions.decode(positions.cdc(7, snapshot=False)) == 7


def test_encode_rejects_out_of_range() -> None:
    with pytest.raises(ValueError):
        enc(-1)


@pytest.mark.parametrize(
    ("stored", "incoming", "sequential", "expected"),
    [
        (None, 5, False, Decision.APPLY),
        (5, 5, False, Decision.SKIP),  # duplicate
        (5, 4, False, Decision.SKIP),  # late, older
        (5, 9, False, Decision.APPLY),  # upserts may jump
        (None, 1, True, Decision.APPLY),
        (None, 2, True, Decision.GAP),
        (3, 4, True, Decision.APPLY),
        (3, 5, True, Decision.GAP),
        (3, 3, True, Decision.SKIP),
    ],
)
def test_decide(stored: int | None, incoming: int, sequential: bool, expected: Decision) -> None:
    assert (
        decide(enc(stored) if stored is not None else None, enc(incoming), sequential=sequential) is expected
    )


def test_start_options_edges_and_timestamp() -> None:
    assert positions.spark_start_options(parse_start("earliest"), {"t": [0]}) == {
        "startingOffsets": "earliest"
    }
    ts = positions.spark_start_options(parse_start("2026-01-01T00:00:00Z"), {"t": [0]})
    assert ts == {"startingTimestamp": "1767225600000"}


def test_start_options_fill_unnamed_partitions_with_earliest() -> None:
    opts = positions.spark_start_options(parse_start('{"t": {"1": 7}}'), {"t": [0, 1, 2]})
    assert json.loads(opts["startingOffsets"]) == {"t": {"0": -2, "1": 7, "2": -2}}
    bare = positions.spark_start_options(parse_start("0:4"), {"t": [0, 1]})
    assert json.loads(bare["startingOffsets"]) == {"t": {"0": 4, "1": -2}}


def test_start_options_refuse_foreign_topic_or_partition() -> None:
    with pytest.raises(BadStartPosition, match="does not read"):
        positions.spark_start_options(parse_start('{"u": {"0": 1}}'), {"t": [0]})
    with pytest.raises(BadStartPosition, match="no partition 3"):
        positions.spark_start_options(parse_start('{"t": {"3": 1}}'), {"t": [0]})


@pytest.mark.parametrize(
    ("text", "spark"),
    [("1s", "1 seconds"), ("500ms", "500 milliseconds"), ("2m", "2 minutes"), ("10 seconds", "10 seconds")],
)
def test_trigger(text: str, spark: str) -> None:
    assert normalize_trigger(text) == spark


def test_the_default_trigger_is_the_same_from_code_and_from_the_environment() -> None:
    assert RunConfig().trigger == RunConfig.from_env({}).trigger == "250 milliseconds"
    assert RunConfig.from_env({"MATERIALIZERS_TRIGGER": "2s"}).trigger == "2 seconds"


def test_bad_trigger_and_env() -> None:
    with pytest.raises(ConfigError, match="500ms or 2m"):
        normalize_trigger("soon")
    with pytest.raises(ConfigError, match="positive integer"):
        RunConfig.from_env({"MATERIALIZERS_OPTIMIZE_EVERY": "0"})
    config = RunConfig.from_env({"MATERIALIZERS_TOPIC": "x", "REDIS_URL": "redis://h:1/0"}).with_overrides(
        trigger="5s", topic=None
    )
    assert (config.topic, config.trigger, config.endpoints.redis_url) == ("x", "5 seconds", "redis://h:1/0")


def test_views_and_max_offsets_settings() -> None:
    config = RunConfig.from_env({"MATERIALIZERS_VIEWS": "warehouse, cache"})
    assert config.views == ("cache", "warehouse")  # canonical order whatever the order given
    flagged = config.with_overrides(views="search", max_offsets_per_trigger="250000")
    assert (flagged.views, flagged.max_offsets_per_trigger) == (("search",), 250_000)
    assert RunConfig().views == () and RunConfig().max_offsets_per_trigger == 0  # (): every view
    # A materializer's own views can be named; whether it has them is the plan's check (test_views.py).
    assert RunConfig().with_overrides(views="by_customer,cache").views == ("cache", "by_customer")
    with pytest.raises(ConfigError, match="cache, search, warehouse"):
        RunConfig().with_overrides(views="cache,el astic")
    with pytest.raises(ConfigError, match="cache, search, warehouse"):
        RunConfig.from_env({"MATERIALIZERS_VIEWS": " , "})
    with pytest.raises(ConfigError, match="non-negative integer"):
        RunConfig().with_overrides(max_offsets_per_trigger="-5")


def test_progress_and_lag() -> None:
    progress = {
        "batchId": 4,
        "inputRowsPerSecond": 10.0,
        "processedRowsPerSecond": 20.0,
        "durationMs": {"triggerExecution": 1500},
        "sources": [{"endOffset": '{"t": {"0": 7, "1": 3}}', "latestOffset": {"t": {"0": 10, "1": 3}}}],
    }
    job = status.from_progress(status.JobStatus(name="p", state="running", pid=1), progress)
    # Spark's progress says nothing trustworthy about lag: readers measure it (materializers.ops.lag).
    assert (job.batch_id, job.lag, job.total_lag, job.last_batch_ms) == (4, None, None, 1500)
    assert checkpoint.behind({"t": {"0": 7}}, {"t": {"0": 10, "1": 3}}) == {"t[0]": 3, "t[1]": 3}


def test_order_fold() -> None:
    events = [
        ("order.created", {"order_id": "o", "customer_id": "c"}),
        ("order.line_added", {"sku": "A", "quantity": 2, "unit_price_cents": 5}),
        ("order.line_added", {"sku": "B", "quantity": 1, "unit_price_cents": 7}),
        ("order.line_removed", {"sku": "A"}),
        ("order.placed", {"total_cents": 7}),
    ]
    assert orders.fold(events) == {
        "order_id": "o",
        "customer_id": "c",
        "status": "placed",
        "total_cents": "7",
        "line:B": "1x7",
    }
    with pytest.raises(ValueError, match="unknown order event type"):
        orders.patch("order.exploded", {})


def test_compare_lists_missing_extra_and_changed() -> None:
    diffs = compare("cache", {"1": {"a": "x"}, "2": {"a": "y"}}, {"2": {"a": "z"}, "3": {"a": "w"}})
    assert [(d.entity, d.expected, d.actual) for d in diffs] == [
        ("1", {"a": "x"}, None),
        ("2", {"a": "y"}, {"a": "z"}),
        ("3", None, {"a": "w"}),
    ]


def test_catalog() -> None:
    assert PRODUCTS.data_columns == ("name", "description", "price", "stock")
    assert lookup("orders").sequential
    with pytest.raises(UnknownMaterializer, match="installed: orders, products"):
        lookup("nope")


def test_the_small_batch_bound_is_a_non_negative_count_or_auto_from_flag_or_env() -> None:
    # auto (None): the job sizes both bounds (driver_batch.sized)
    assert RunConfig.from_env({}).small_batch_rows is RunConfig.from_env({}).warehouse_driver_rows is None
    assert RunConfig.from_env({"MATERIALIZERS_SMALL_BATCH_ROWS": "0"}).small_batch_rows == 0
    assert RunConfig().with_overrides(small_batch_rows="250").small_batch_rows == 250
    assert RunConfig(small_batch_rows=250).with_overrides(small_batch_rows="auto").small_batch_rows is None
    for bad in ("-1", "many", "1e3", "Auto"):
        with pytest.raises(ConfigError, match="non-negative integer"):
            RunConfig.from_env({"MATERIALIZERS_SMALL_BATCH_ROWS": bad})


def test_spark_range_options_read_each_partitions_range_with_its_last_offset_included() -> None:
    options = positions.spark_range_options([("t", 1, 5, 9), ("t", 0, 3, 3), ("u", 2, 0, 4)])
    assert json.loads(options["assign"]) == {"t": [1, 0], "u": [2]}
    assert json.loads(options["startingOffsets"]) == {"t": {"1": 5, "0": 3}, "u": {"2": 0}}
    assert json.loads(options["endingOffsets"]) == {"t": {"1": 10, "0": 4}, "u": {"2": 5}}  # exclusive
    for bad in ([("t", 0, 5, 4)], [("t", 0, -1, 4)], [("t", 0, 1, 2), ("t", 0, 3, 4)]):
        with pytest.raises(ValueError, match="not one range of offsets of t-0"):
            positions.spark_range_options(bad)


def test_a_local_master_caps_a_batch_at_what_the_driver_applies_whole() -> None:
    from functools import partial

    from materializers.runtime.job import batch_cap

    collecting = partial(batch_cap, collects=True)  # a view takes the batch into the driver anyway
    assert collecting(0, 50_000, "local[2]") == 50_000
    assert collecting(0, 50_000, "local") == 50_000
    assert collecting(0, 50_000, "local[*]") == 50_000
    assert collecting(0, 50_000, "spark://master:7077") == 0  # a cluster: everything available
    assert collecting(0, 50_000, "local-cluster[2,1,1024]") == 0  # separate executor processes
    assert collecting(250_000, 50_000, "local[2]") == 250_000  # the user's cap wins
    assert collecting(0, 0, "local[2]") == 0  # the driver's path is off: no cap either
    assert batch_cap(0, 50_000, "local[2]", collects=False) == 0  # executors' writers keep large batches


def test_a_full_batch_is_read_by_every_task_slot_only_where_the_driver_applies_it_whole() -> None:
    from dataclasses import dataclass
    from functools import partial

    from materializers.runtime.job import split_reads

    @dataclass
    class Bounded:  # a view applied from the driver up to `rows` records
        rows: int

        def in_driver(self, rows: int) -> bool:
            return rows <= self.rows

    views = [Bounded(50_000), Bounded(10_000)]
    local = partial(split_reads, local=True)
    assert local(10_000, 50_000, views, 8) == 1_250  # every planned batch goes to the driver
    assert local(10_001, 50_000, views[:1], 2) == 5_001  # a full batch: one task per slot
    assert local(20_000, 50_000, views, 8) == 0  # one view writes such a batch from the executors
    assert local(60_000, 50_000, views[:1], 8) == 0  # larger than the driver's path takes
    assert local(0, 50_000, views[:1], 8) == 0  # no cap: a batch of any size
    assert local(10_000, 50_000, views, 1) == 0  # one task slot: nothing to split for


def test_a_cluster_spreads_a_batch_larger_than_a_driver_sized_share_over_its_slots() -> None:
    from materializers.runtime.job import split_reads

    # A cluster's batch takes all that is available: every 12,500 records (a 50,000-record batch's
    # share of 4 slots) are a task of their own, whatever the views; a live batch stays one task.
    assert split_reads(0, 50_000, [], 4, local=False) == 12_500
    assert split_reads(0, 50_001, [], 4, local=False) == 12_501
    assert split_reads(200_000, 50_000, [], 4, local=False) == 12_500  # a user's cap changes no grain
    assert split_reads(0, 50_000, [], 1, local=False) == 0  # one slot
    assert split_reads(0, 0, [], 4, local=False) == 0  # --small-batch-rows 0: the bound is not known


def test_a_batch_the_executors_apply_is_sorted_per_entity_only_where_its_reads_may_have_split() -> None:
    from materializers.runtime.job import sorted_first

    assert sorted_first(60_000, 25_000, sequential=False)  # more than a task reads: split
    assert sorted_first(None, 25_000, sequential=False)  # its size not known
    assert not sorted_first(25_000, 25_000, sequential=False)  # one task's share: offset order kept
    assert not sorted_first(None, 0, sequential=False)  # the query splits nothing
    assert sorted_first(10, 0, sequential=True)  # a fold's patches always apply in version order
