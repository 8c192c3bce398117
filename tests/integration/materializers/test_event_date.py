"""The warehouse's partition column is the UTC date of a change's time, whatever the session's zone,
exact at the edges of a day and before 1970."""

from __future__ import annotations

from datetime import UTC, date, datetime
from typing import Any

import pytest

from materializers.view import event_date

pytestmark = pytest.mark.integration

TIMES = [
    datetime(1970, 1, 1, tzinfo=UTC),
    datetime(1969, 12, 31, 23, 59, 59, 999_999, tzinfo=UTC),
    datetime(1900, 3, 1, 0, 0, 0, 1, tzinfo=UTC),
    datetime(2026, 11, 30, 23, 59, 59, 999_999, tzinfo=UTC),
    datetime(2026, 12, 1, tzinfo=UTC),
    datetime(9999, 12, 31, 23, 59, 59, 999_999, tzinfo=UTC),
]


@pytest.mark.parametrize("zone", ["UTC", "America/Los_Angeles", "Pacific/Kiritimati"])
def test_event_date_is_the_utc_date_in_any_session_zone(spark: Any, zone: str) -> None:
    before = spark.conf.get("spark.sql.session.timeZone")
    spark.conf.set("spark.sql.session.timeZone", zone)
    try:
        frame = spark.createDataFrame(
            [(i, t) for i, t in enumerate(TIMES)] + [(len(TIMES), None)], "i int, event_ts timestamp"
        )
        got = {r.i: r.d for r in frame.select("i", event_date().alias("d")).collect()}
    finally:
        spark.conf.set("spark.sql.session.timeZone", before)
    assert got == {**{i: t.date() for i, t in enumerate(TIMES)}, len(TIMES): None}
    assert got[1] == date(1969, 12, 31) and got[4] == date(2026, 12, 1)
