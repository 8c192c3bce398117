"""The aggregate view's pure core: validation messages, durations, the state fingerprint, progress counts."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from materializers.aggregates.declaration import (
    ENVELOPE_TIME,
    KAFKA_TIME,
    AggregateView,
    Aggregation,
    CdcSource,
    Derived,
    EventSource,
    batch_counts,
    check_compatible,
    duration_ms,
    fingerprint,
    materializer,
    state_definition,
    state_record,
    validate,
)
from materializers.errors import (
    BadAggregate,
    BadAggregation,
    BadWindow,
    LatePolicyNotSupported,
    StateIncompatible,
    UnknownColumn,
)

FIELDS = {"order_id": "string", "sku": "string", "quantity": "int", "price": "long", "at": "timestamp"}


def view(**changes: Any) -> AggregateView:
    base = AggregateView(
        name="v",
        source=EventSource(topic="t", event_types=("order.line_added",), fields=FIELDS),
        event_time="at",
        group_by=("sku",),
        window="1 minute",
        allowed_lateness="30 seconds",
        aggregations=(Aggregation(op="count"), Aggregation(op="sum", column="quantity")),
    )
    return dataclasses.replace(base, **changes)


def test_a_good_view_passes_and_becomes_a_materializer() -> None:
    spec = materializer(view(derived=(Derived(name="cents", sql="quantity * price", type="long"),)))
    assert spec.kind == "aggregate" and spec.builtin_views == () and spec.aggregate is not None
    assert spec.data_ddl == (
        "window_start timestamp, window_end timestamp, `sku` string, `count` bigint, `sum_quantity` bigint"
    )
    for time in (ENVELOPE_TIME, KAFKA_TIME, "price"):  # a long field is epoch milliseconds
        validate(view(event_time=time))


@pytest.mark.parametrize(
    ("changes", "error", "says"),
    [
        ({"group_by": ("colour",)}, UnknownColumn, r"group_by names column 'colour'.*known: order_id, sku"),
        (
            {"aggregations": (Aggregation(op="max", column="nope"),)},
            UnknownColumn,
            r"max names column 'nope'",
        ),
        ({"event_time": "when"}, UnknownColumn, r"event_time names column 'when'"),
        ({"event_time": "sku"}, BadAggregate, r"event_time 'sku' is of type string.*@envelope"),
        ({"window": "0 minutes"}, BadWindow, r"window '0 minutes' is not a positive duration"),
        ({"window": "soon"}, BadWindow, r"window 'soon' is not a positive duration; write e.g."),
        ({"slide": "-1 s"}, BadWindow, r"slide '-1 s' is not a positive duration"),
        ({"slide": "2 minutes"}, BadWindow, r"slide '2 minutes' is larger than the window '1 minute'"),
        ({"allowed_lateness": "a while"}, BadWindow, r"allowed_lateness 'a while'"),
        ({"max_ahead": "0 s"}, BadWindow, r"max_ahead '0 s' is not a positive duration"),
        ({"group_by": ()}, BadAggregation, r"group_by is empty; name at least one column"),
        ({"aggregations": ()}, BadAggregation, r"aggregations is empty"),
        (
            {"aggregations": (Aggregation(op="sum", column="sku"),)},
            BadAggregation,
            r"sum\(sku\) over a non-numeric column \(type string\)",
        ),
        ({"aggregations": (Aggregation(op="min", column="order_id"),)}, BadAggregation, r"min\(order_id\)"),
        (
            {"aggregations": (Aggregation(op="count"), Aggregation(op="max", column="price", name="count"))},
            BadAggregation,
            r"output column\(s\) count named twice",
        ),
        (
            {"aggregations": (Aggregation(op="count", column="sku"),)},
            BadAggregation,
            r"count takes no column",
        ),
        ({"derived": (Derived(name="sku", sql="1", type="int"),)}, BadAggregation, r"derived column 'sku'"),
        ({"late_policy": "correct"}, LatePolicyNotSupported, r"'correct' needs correction_horizon"),
        (
            {"late_policy": "correct", "correction_horizon": "30 seconds"},
            LatePolicyNotSupported,
            r"correction_horizon '30 seconds' is not longer than allowed_lateness '30 seconds'",
        ),
        (
            {"correction_horizon": "1 hour"},
            LatePolicyNotSupported,
            r"correction_horizon is set but late_policy is 'drop'",
        ),
        ({"late_policy": "fix"}, LatePolicyNotSupported, r"late_policy 'fix'; use 'drop' or 'correct'"),
        ({"source": EventSource(topic="t", event_types=())}, BadAggregate, r"source.event_types is empty"),
    ],
)
def test_bad_definitions_are_refused_naming_the_field(
    changes: dict[str, Any], error: type, says: str
) -> None:
    with pytest.raises(error, match=says):
        validate(view(**changes))


def test_approximate_distinct_takes_any_type_and_a_slide_may_equal_the_size() -> None:
    validate(view(aggregations=(Aggregation(op="approx_count_distinct", column="order_id"),), slide="60 s"))


@pytest.mark.parametrize(
    ("text", "ms"),
    [("1 minute", 60_000), ("30s", 30_000), ("500 ms", 500), ("2 Hours", 7_200_000), ("1 d", 86_400_000)],
)
def test_durations(text: str, ms: int) -> None:
    assert duration_ms(text, "window") == ms


def test_fingerprint_is_stable_and_equal_for_equal_state() -> None:
    assert fingerprint(view()) == fingerprint(view())
    assert fingerprint(view()) == fingerprint(view(window="60 seconds", allowed_lateness="30000 ms"))
    assert fingerprint(view()) == fingerprint(view(slide="1 minute"))  # tumbling = slide of its size
    # Not part of Spark's state: the name, the topic, the fields decoded but not used
    assert fingerprint(view()) == fingerprint(
        view(name="w", source=EventSource(topic="u", event_types=("x",)))
    )
    assert fingerprint(view()) == fingerprint(view(max_ahead="2 hours"))  # decides what enters only
    assert "correction_horizon_ms" not in state_definition(view())  # drop views kept their fingerprint
    corrected = view(late_policy="correct", correction_horizon="1 hour")
    assert state_definition(corrected)["correction_horizon_ms"] == 3_600_000
    assert fingerprint(corrected) != fingerprint(view(late_policy="correct", correction_horizon="2 hours"))
    assert len(fingerprint(view())) == 64


@pytest.mark.parametrize(
    "changes",
    [
        {"window": "2 minutes"},
        {"slide": "30 seconds"},
        {"group_by": ("sku", "order_id")},
        {"group_by": ("order_id",)},
        {"aggregations": (Aggregation(op="count"),)},
        {"aggregations": (Aggregation(op="count"), Aggregation(op="max", column="quantity"))},
        {"event_time": ENVELOPE_TIME},
        {"allowed_lateness": "1 minute"},
        {"derived": (Derived(name="cents", sql="quantity * price", type="long"),)},
        {"late_policy": "correct", "correction_horizon": "1 hour"},
    ],
)
def test_fingerprint_changes_with_what_the_state_depends_on(changes: dict[str, Any]) -> None:
    assert fingerprint(view(**changes)) != fingerprint(view())


def test_a_changed_definition_is_refused_saying_what_changed_and_how_to_go_on() -> None:
    stored = state_record(view())
    check_compatible(view(), stored, "checkpoint /c", "start over")  # same definition
    check_compatible(view(), None, "checkpoint /c", "start over")  # no state yet
    with pytest.raises(StateIncompatible) as refused:
        check_compatible(view(window="2 minutes"), stored, "checkpoint /c", "delete /c and replay")
    message = str(refused.value)
    assert "state at checkpoint /c was built by another definition" in message
    assert "window_ms: 60000 -> 120000" in message and "slide_ms: 60000 -> 120000" in message
    assert "delete /c and replay" in message and "Nothing was started or written" in message


class _Row:
    """What PySpark hands over for an observed metric."""

    def __init__(self, **values: int) -> None:
        self.values = values

    def asDict(self) -> dict[str, int]:  # PySpark's name
        return self.values


def test_batch_counts_read_spark_progress() -> None:
    progress = {
        "stateOperators": [{"numRowsDroppedByWatermark": 3}, {"numRowsDroppedByWatermark": 1}],
        "observedMetrics": {"aggregate_input": _Row(records=9, refused=2)},
    }
    assert batch_counts(progress) == (4, 2)
    assert batch_counts({"observedMetrics": {"aggregate_input": {"refused": 1}}}) == (0, 1)
    assert batch_counts({}) == (0, 0)


def test_a_checkpoint_of_another_definition_is_refused_before_spark(tmp_path: Path) -> None:
    from materializers.aggregates.job import STATE_FILE, check_state
    from materializers.config import RunConfig
    from materializers.plan import JobPlan

    config = RunConfig(home=tmp_path)
    plan = JobPlan.of(materializer(view()), config)
    check_state(plan)  # nothing stored yet
    plan.checkpoint.mkdir(parents=True)
    (plan.checkpoint / STATE_FILE).write_text(json.dumps(state_record(view())))
    check_state(plan)
    wider = JobPlan.of(materializer(view(window="5 minutes")), config)
    with pytest.raises(StateIncompatible, match=r"checkpoint .* window_ms: 60000 -> 300000.*--from earliest"):
        check_state(wider)


def cdc_view(**changes: Any) -> AggregateView:
    source = CdcSource(topic="dbz.public.orders", table="public.orders", fields=FIELDS, key_column="order_id")
    return dataclasses.replace(view(source=source), **changes)


def test_a_cdc_view_is_a_materializer_of_its_table() -> None:
    spec = materializer(cdc_view())
    assert (spec.default_topic, spec.default_table, spec.key_column, spec.event_types) == (
        "dbz.public.orders",
        "public.orders",
        "order_id",
        (),
    )
    # Signed contributions are another state than an event view's of the same definition.
    assert state_definition(cdc_view())["source"] == ["cdc", "order_id"]
    assert "source" not in state_definition(view())
    assert fingerprint(cdc_view()) != fingerprint(view())


@pytest.mark.parametrize(
    ("changes", "error", "says"),
    [
        (
            {"aggregations": (Aggregation(op="max", column="price"),)},
            BadAggregation,
            r"max\(price\) over a CDC source cannot be kept exact.*use count/sum",
        ),
        (
            {"aggregations": (Aggregation(op="approx_count_distinct", column="sku"),)},
            BadAggregation,
            r"approx_count_distinct\(sku\) over a CDC source",
        ),
        (
            {"event_time": ENVELOPE_TIME},
            BadAggregate,
            r"event_time '@envelope' over a CDC source; name a time column",
        ),
        ({"event_time": KAFKA_TIME}, BadAggregate, r"event_time '@kafka' over a CDC source"),
    ],
)
def test_cdc_refusals(changes: dict[str, Any], error: type[Exception], says: str) -> None:
    with pytest.raises(error, match=says):
        validate(cdc_view(**changes))


def test_cdc_table_needs_its_schema() -> None:
    source = CdcSource(topic="t", table="orders", fields=FIELDS)
    with pytest.raises(
        BadAggregate, match=r"source.table 'orders' names no schema; write it as schema.table"
    ):
        validate(view(source=source))
