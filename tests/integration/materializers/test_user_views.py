"""A view of the user's own, defined here, driven through the View protocol alone on both batch paths:
loaded as `module:attr`, built by a factory from the plan, run beside the built-in views, its
refusals dead-lettered, its replays absorbed, and verified against the fold of the event topic."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import pytest
from conftest import read_all, run_once
from records import OrderEvents

from kafkakit.positions import parse_start
from materializers.catalog import lookup
from materializers.errors import ViewUnavailable
from materializers.ops.verify import verify
from materializers.runtime import driver_loop
from materializers.runtime.job import Job, JobPlan
from materializers.truth import Difference, Truth, compare
from materializers.view import DriverView, Reject, TableBatch
from shop.orders import ORDERS, WANTED, patch

pytestmark = pytest.mark.integration

PATHS = pytest.mark.parametrize("small_batch_rows", ["10000", "0"], ids=["driver", "executors"])
# The view's "store": one dict per Redis prefix (unique per test), outliving any one job, as a
# database would; a factory hands each job's view its part.
STORE: dict[str, dict[str, dict[str, str]]] = {}


class OrderFold(DriverView):
    """Each order's state folded in Python from its events, applied only at version n+1 (a replay or
    a duplicate changes nothing, a gap is refused): what the cache holds, in a dict."""

    name = "order_fold"

    def __init__(self, state: dict[str, dict[str, str]]) -> None:
        self.state = state

    def columns(self) -> tuple[str, ...]:
        return ("entity", "position", "src_topic", "src_partition", "src_offset", "event_type", *WANTED)

    def apply_table(self, batch: TableBatch) -> Sequence[Reject]:
        refused: list[Reject] = []
        for row in batch.table.to_pylist():  # sorted by entity, then position (a sequential fold)
            held = self.state.get(row["entity"], {})
            version, at = int(row["position"]), int(held.get("_version", "0"))
            if version <= at:
                continue
            if version != at + 1:
                refused.append((row["src_topic"], row["src_partition"], row["src_offset"], "version gap"))
                continue
            sets, dels = patch(row["event_type"], row)
            folded = {k: v for k, v in {**held, **sets}.items() if k not in dels}
            self.state[row["entity"]] = {**folded, "_version": str(version)}
        return refused

    def verify(self, truth: Truth) -> list[Difference]:
        held = {e: {k: v for k, v in s.items() if k != "_version"} for e, s in self.state.items()}
        return compare(self.name, truth.rows, held)


def order_fold(plan: JobPlan) -> OrderFold:
    return OrderFold(STORE.setdefault(plan.redis_prefix, {}))


ORDERS_WITH_FOLD = replace(ORDERS, name="orders_fold", builtin_views=("cache",), views=(order_fold,))


class RefusedFold(OrderFold):
    """A view whose store refuses to create its state, as a store without the grant does."""

    def prepare(self, spark: Any) -> None:
        raise ViewUnavailable("the fold's store refused CREATE: grant it to the job's user")


ORDERS_REFUSED = replace(
    ORDERS, name="orders_refused", builtin_views=("cache",), views=(lambda plan: RefusedFold({}),)
)


@PATHS
def test_a_user_view_beside_the_cache_on_both_paths(
    spark: Any, topics: Any, producer: Any, run_config: Any, endpoints: Any, uid: str, small_batch_rows: str
) -> None:
    spec = lookup(f"{__name__}:ORDERS_WITH_FOLD")  # as `materializers start module:attr` loads it
    assert spec is ORDERS_WITH_FOLD
    events = OrderEvents(endpoints.schema_registry_url, uid)
    topic = topics("mat-user-view")
    records = [
        events.record("u-1", 1, "order.created", order_id="u-1", customer_id="c-1"),
        events.record("u-1", 2, "order.line_added", order_id="u-1", sku="A", quantity=2, unit_price_cents=5),
        events.record("u-1", 3, "order.placed", order_id="u-1", total_cents=10),
        events.record("u-2", 1, "order.created", order_id="u-2", customer_id="c-2"),
        events.record("u-2", 3, "order.cancelled", order_id="u-2", reason="gap"),  # v2 never comes
    ]
    plan = JobPlan.of(spec, run_config(topic=topic, small_batch_rows=small_batch_rows))
    producer.produce(topic, key=records[0][0], value=records[0][1], headers=records[0][2])
    producer.flush()
    first = run_once(spark, plan)  # the query's first batch: the rest come in a later, known-size batch
    for key, value, headers in records[1:]:
        producer.produce(topic, key=key, value=value, headers=headers)
    producer.flush()
    job = run_once(spark, plan, job=first)
    assert [v.name for v in job.views] == ["cache", "order_fold"]
    steps = job.clock.take(1)
    assert {"cache", "order_fold"} <= set(steps) and ("decode_to_driver" in steps) == (
        small_batch_rows != "0"
    )
    state = STORE[plan.redis_prefix]
    assert state["u-1"] == {
        "order_id": "u-1",
        "customer_id": "c-1",
        "status": "placed",
        "total_cents": "10",
        "line:A": "2x5",
        "_version": "3",
    }
    # The gap is refused by the cache and by this view: each refusal is a dead letter of offset 4.
    letters = [dict(m.headers())["dlq-source-offset"] for m in read_all(endpoints, plan.dlq_topic)]
    assert letters == [b"4", b"4"] and job.dead_letters == 2
    assert [str(d) for d in verify(plan)] == []

    # Duplicates (a producer's retry) read by a restarted driver's new job: nothing changes.
    for key, value, headers in records[:3]:
        producer.produce(topic, key=key, value=value, headers=headers)
    producer.flush()
    before = {e: dict(s) for e, s in state.items()}
    code: list[int] = []  # driver_loop.run in a thread, as a driver runs it, leaves pytest's signal handlers
    driver = threading.Thread(
        target=lambda: code.append(
            driver_loop.run([Job(spark, plan)], parse_start("earliest"), available_now=True)
        )
    )
    driver.start()
    driver.join(240)
    assert code == [0]
    assert state == before and [str(d) for d in verify(plan)] == []


def test_a_view_that_cannot_create_its_state_stops_the_start_before_any_batch(
    spark: Any, topics: Any, producer: Any, run_config: Any, endpoints: Any, uid: str
) -> None:
    """The views' state is created while Spark plans the source: a view that fails there fails the
    start with its own error, and no query runs, no offset is planned, nothing reaches the cache."""
    topic = topics("mat-refused-view")
    key, value, headers = OrderEvents(endpoints.schema_registry_url, uid).record(
        "r-1", 1, "order.created", order_id="r-1", customer_id="c-1"
    )
    producer.produce(topic, key=key, value=value, headers=headers)
    producer.flush()
    plan = JobPlan.of(ORDERS_REFUSED, run_config(topic=topic))
    with pytest.raises(ViewUnavailable, match="grant it to the job's user"):
        Job(spark, plan).start(parse_start("earliest"), available_now=True)
    assert [q.name for q in spark.streams.active if q.name.startswith("orders_refused")] == []
    assert not (plan.checkpoint / "offsets").exists()
    assert plan.cache().read("r-1") is None
