"""Testing views and pipelines: the contract every view keeps, and what a test reads of a job.

`ViewContract` is the contract suite the built-in views pass (the Redis cache, Tantivy, OpenSearch,
the Delta warehouse, the Postgres read model), shipped as a pytest test class for your own view to
subclass, as pyeventsourcing ships its recorder test cases:

    from materializers.testing import ViewContract, contract_materializer

    LOW_STOCK_CONTRACT = contract_materializer("low_stock_contract", views=(LowStock.for_plan,))

    class TestLowStock(ViewContract):
        materializer = LOW_STOCK_CONTRACT  # at module level: the driver process imports it
        view = "low_stock"

Its tests run real `materializers start` drivers on the toolkit's pytest plugin's stack
(`toolkit_stack`, `topic_factory`, `materializer_factory`) over Debezium JSON change records of a
table of `CONTRACT_COLUMNS` keyed by an integer `id`, and ask the view itself whether it holds what
the source says (`View.verify`). A view keeps the contract when:
- a change applies once, in position order, whichever path carries the batch (the executors' or the
  driver's): a late change never wins, a duplicate changes nothing, a delete removes the entity and
  keeps it removed, an unchanged TOAST value keeps the value the view holds;
- a replay of the whole topic by a new checkpoint into the same view changes nothing;
- a driver killed (kill -9) right after the view wrote a batch and before the checkpoint committed
  it leaves a view that the restarted driver's re-run of that batch makes exact;
- its `verify` finds a difference where there is one (a verify that always agrees proves nothing).

Also here, for tests and demos that watch a running job: `read_status`, `with_lag`, `end_offsets`,
`committed`, `records_behind`, `read_timeline`, `startup_phases`, `batch_medians`, `query_delta`.
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Mapping
from functools import partial
from pathlib import Path
from typing import Any, ClassVar

from cdc.values import DEFAULT_UNAVAILABLE_PLACEHOLDER
from kafkakit.clients import make_producer
from materializers.config import ENV_FAILPOINT, ENV_SMALL_BATCH_ROWS
from materializers.decode.debezium import DebeziumDecoder
from materializers.materializer import Materializer, ViewSource
from materializers.ops.lag import end_offsets, with_lag
from materializers.plan import JobPlan
from materializers.runtime.checkpoint import committed
from materializers.runtime.checkpoint import lag as records_behind
from materializers.runtime.status import JobStatus
from materializers.runtime.status import read as read_status
from materializers.runtime.timeline import batch_medians, startup
from materializers.runtime.timeline import read as read_timeline
from materializers.truth import Difference, Truth
from materializers.view import View
from materializers.views.warehouse.delta import query as query_delta

__all__ = [
    "CONTRACT_COLUMNS",
    "CONTRACT_DDL",
    "JobStatus",
    "ViewContract",
    "batch_medians",
    "committed",
    "contract_materializer",
    "debezium_change",
    "end_offsets",
    "query_delta",
    "read_status",
    "read_timeline",
    "records_behind",
    "startup_phases",
    "with_lag",
]

startup_phases = startup
CONTRACT_COLUMNS = ("name", "description", "price", "stock")
CONTRACT_DDL = "name string, description string, price string, stock int"
MARKER_WAIT_S = 240.0


def contract_materializer(
    name: str,
    *,
    builtin_views: tuple[str, ...] = (),
    views: tuple[ViewSource, ...] = (),
    search_fields: tuple[str, ...] = (),
) -> Materializer:
    """A CDC materializer of the contract's table (`id` integer key, `CONTRACT_COLUMNS`) keeping the
    view under test: built-in ones by name, or views of your own (instances or factories)."""
    return Materializer(
        name=name,
        kind="cdc",
        default_topic=f"{name}.contract",
        default_table="public.view_contract_items",
        data_ddl=CONTRACT_DDL,
        decoder=partial(
            DebeziumDecoder, data_columns=CONTRACT_COLUMNS, data_ddl=CONTRACT_DDL, key_column="id"
        ),
        sequential=False,
        builtin_views=builtin_views,
        views=views,
        search_fields=search_fields,
    )


def debezium_change(
    entity: int, lsn: int, op: str, row: Mapping[str, Any] | None, *, unavailable: tuple[str, ...] = ()
) -> tuple[bytes, bytes]:
    """(key, value) of one change as Debezium's JsonConverter writes it (schemas on, abridged): `op`
    c/u/r/d at LSN `lsn`; `unavailable` columns carry Debezium's unchanged-TOAST placeholder."""
    after = {"id": entity, **(row or {}), **dict.fromkeys(unavailable, DEFAULT_UNAVAILABLE_PLACEHOLDER)}
    ts_ms = 1_764_000_000_000 + lsn
    payload = {
        "before": None,
        "after": None if op == "d" else after,
        "source": {"lsn": lsn, "ts_ms": ts_ms, "connector": "postgresql"},
        "op": op,
        "ts_ms": ts_ms,
    }
    key = {"schema": {"type": "struct"}, "payload": {"id": entity}}
    return json.dumps(key).encode(), json.dumps({"schema": {"type": "struct"}, "payload": payload}).encode()


def _item(name: str, description: str | None = None) -> dict[str, Any]:
    return {"name": name, "description": description or f"{name} desc", "price": "1.00", "stock": 1}


def _held(name: str, description: str | None = None) -> dict[str, str]:
    """An item as the source of truth states it: every column as text."""
    return {k: str(v) for k, v in _item(name, description).items()}


FIRST = [debezium_change(1, 300, "c", _item("walnut", "solid walnut table"))]
SECOND = [
    debezium_change(1, 200, "u", _item("pine")),  # late: never wins
    debezium_change(2, 100, "c", _item("linen")),
    debezium_change(2, 500, "d", None),
    debezium_change(3, 600, "c", _item("copper")),
    debezium_change(1, 400, "u", _item("oak"), unavailable=("description",)),  # TOAST kept
    debezium_change(1, 300, "c", _item("walnut", "solid walnut table")),  # a duplicate
]
LATE_CREATE = [debezium_change(2, 50, "c", _item("resurrected"))]  # older than entity 2's delete
EXPECTED = {"1": _held("oak", "solid walnut table"), "3": _held("copper")}


class ViewContract:
    """The contract suite for one view (see the module doc). Set `materializer` (made with
    `contract_materializer`, defined at module level so the driver process can import it) and
    `view` (the view's name); override `driver_env` for settings the drivers need and `forget` when
    the view keeps state outside the run's home, Redis prefix and topics (an index or a table named
    for the materializer)."""

    materializer: ClassVar[Materializer]
    view: ClassVar[str]

    def driver_env(self) -> dict[str, str]:
        """More environment for the drivers (a backend's settings, say); none by default."""
        return {}

    def forget(self, plan: JobPlan) -> None:
        """Remove what the view keeps outside the run's own home and Redis prefix (nothing here)."""

    # --- the tests -------------------------------------------------------------------------------

    def test_changes_apply_once_in_position_order_and_a_replay_changes_nothing(
        self, toolkit_stack: Any, topic_factory: Any, materializer_factory: Any
    ) -> None:
        topic = topic_factory(f"{self.view}-contract")
        self._produce(toolkit_stack, topic, FIRST)
        # The executors' path: no batch is applied whole in the driver.
        first = materializer_factory.start(
            self.materializer, topic=topic, env={**self.driver_env(), ENV_SMALL_BATCH_ROWS: "0"}
        )
        try:
            materializer_factory.wait_caught_up(first)
            self._produce(toolkit_stack, topic, SECOND)
            materializer_factory.wait_caught_up(first)
            assert self._differences(first.plan) == []
            planted = {**EXPECTED, "3": _held("brass")}
            assert self._differences(first.plan, planted), f"{self.view}: verify missed a difference"
            assert materializer_factory.stop(first) == 0

            # The whole topic again by a new checkpoint writing the same view, on the driver's path:
            # nothing batch-keyed can help, only positions; a late create cannot resurrect entity 2.
            self._produce(toolkit_stack, topic, LATE_CREATE)
            shutil.rmtree(first.plan.checkpoint)
            first.env.pop(ENV_SMALL_BATCH_ROWS)
            materializer_factory.wait_caught_up(materializer_factory.restart(first))
            assert self._differences(first.plan) == []
            assert materializer_factory.stop(first) == 0
        finally:
            self.forget(first.plan)

    def test_kill_9_after_the_view_wrote_then_restart(
        self, toolkit_stack: Any, topic_factory: Any, materializer_factory: Any, tmp_path: Path
    ) -> None:
        topic = topic_factory(f"{self.view}-contract-crash")
        self._produce(toolkit_stack, topic, FIRST + SECOND)
        marker = tmp_path / "view-wrote"
        run = materializer_factory.start(
            self.materializer,
            topic=topic,
            env={**self.driver_env(), ENV_FAILPOINT: f"after-{self.view}:{marker}"},
        )
        try:
            self._wait_for(marker, run)
            materializer_factory.crash(run)
            assert not (run.plan.checkpoint / "commits" / "0").exists()  # written, never committed
            materializer_factory.restart(run)  # the marker is there: the failpoint lets it pass
            materializer_factory.wait_caught_up(run)
            assert (run.plan.checkpoint / "commits" / "0").exists()
            assert self._differences(run.plan) == []
            assert materializer_factory.stop(run) == 0
        finally:
            self.forget(run.plan)

    # --- helpers ---------------------------------------------------------------------------------

    def _view_of(self, plan: JobPlan) -> View:
        found = [v for v in plan.views() if v.name == self.view]
        assert found, f"{plan.spec.name} keeps no view named {self.view!r}: {[v.name for v in plan.views()]}"
        return found[0]

    def _differences(
        self, plan: JobPlan, rows: Mapping[str, Mapping[str, str]] = EXPECTED
    ) -> list[Difference]:
        return self._view_of(plan).verify(Truth(kind="cdc", rows=rows))

    @staticmethod
    def _produce(stack: Any, topic: str, records: list[tuple[bytes, bytes]]) -> None:
        endpoints = stack.endpoints
        producer = make_producer(
            {"bootstrap.servers": endpoints.kafka_bootstrap_servers, "enable.idempotence": True},
            client_config=endpoints.kafka_client,
        )
        for key, value in records:
            producer.produce(topic, key=key, value=value)
        assert producer.flush(30) == 0, f"records not acknowledged by {endpoints.kafka_bootstrap_servers}"

    @staticmethod
    def _wait_for(marker: Path, run: Any) -> None:
        deadline = time.monotonic() + MARKER_WAIT_S
        while not marker.exists():
            assert run.process.poll() is None, f"the driver exited before the failpoint:\n{run.log_tail()}"
            assert time.monotonic() < deadline, f"the driver never reached the failpoint:\n{run.log_tail()}"
            time.sleep(0.2)
