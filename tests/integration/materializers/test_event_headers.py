"""Kafka headers read by the event decoders (event_shape.header), in Spark itself: the first header
of a name, null when absent, and no higher-order function left in the plan (one kept the whole
decode stage out of Spark's code generation)."""

from __future__ import annotations

from typing import Any

import pytest

from materializers.decode import event_shape

pytestmark = pytest.mark.integration

SCHEMA = "id int, headers array<struct<key: string, value: binary>>"
ROWS = [
    (1, [("event-type", b"order.placed"), ("stream-version", b"3")]),
    (2, [("stream-version", b"7"), ("event-type", b"first"), ("event-type", b"second")]),
    (3, [("event-types", b"a longer name"), ("x", b"event-type")]),
    (4, []),
    (5, None),
    (6, [("event-type", None)]),
]


def test_header_is_the_first_of_its_name_or_null(spark: Any) -> None:
    frame = spark.createDataFrame(ROWS, SCHEMA).select(
        "id", event_shape.event_type().alias("type"), event_shape.stream_version().alias("version")
    )
    found = {r["id"]: (r["type"], r["version"]) for r in frame.collect()}
    assert found == {
        1: ("order.placed", 3),
        2: ("first", 7),
        3: (None, None),
        4: (None, None),
        5: (None, None),
        6: (None, None),
    }
    assert "lambdafunction" not in frame._jdf.queryExecution().optimizedPlan().toString()
