"""Testing views and pipelines: the contract every view keeps, and what a test reads of a job.

`ViewContract` is the contract suite the built-in views pass (the Redis cache, Tantivy, OpenSearch,
the Delta warehouse, the Postgres read model), shipped as a pytest test class for your own view to
subclass, as pyeventsourcing ships its recorder test cases:

    from materializers.testing import ViewContract

    LOW_STOCK_CONTRACT = replace(LOW_STOCK, name="low_stock_contract")  # module level: drivers import it

    class TestLowStock(ViewContract):
        materializer = LOW_STOCK_CONTRACT
        view = "low_stock"
        toast_column = None

        def row(self, seed):  # a row of the materializer's table for each seed word
            return {"on_hand": len(seed), "reorder_point": 3}

Its tests run real `materializers start` drivers on the toolkit's pytest plugin's stack
(`toolkit_stack`, `topic_factory`, `materializer_factory`) over Debezium JSON change records keyed by
an integer `id` (by default of `contract_materializer`'s table, `CONTRACT_COLUMNS`), and ask the view
itself whether it holds what the source says (`View.verify`). A view keeps the contract when:
- a change applies once, in position order, whichever path carries the batch (the executors' or the
  driver's): a late change never wins, a duplicate changes nothing, a delete removes the entity and
  keeps it removed, an unchanged TOAST value keeps the value the view holds;
- a replay of the whole topic by a new checkpoint into the same view changes nothing;
- a driver killed (kill -9) right after the view wrote a batch and before the checkpoint committed
  it leaves a view that the restarted driver's re-run of that batch makes exact;
- its `verify` finds a difference where there is one: against an empty source it must report what
  it holds (a verify that always agrees proves nothing).

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


def _as_text(row: Mapping[str, Any]) -> dict[str, str]:
    return {k: str(v) for k, v in row.items() if v is not None}


class ViewContract:
    """The contract suite for one view (see the module doc). Set `materializer` (a CDC materializer
    over Debezium records, defined at module level so the driver process can import it: for a view
    over any columns `contract_materializer` makes one) and `view` (the view's name). A view that
    needs columns of its own gives its own materializer and overrides `row` (and `toast_column`:
    the column sent once as an unchanged TOAST value, None for none). Override `driver_env` for
    settings the drivers need and `forget` when the view keeps state outside the run's home, Redis
    prefix and topics (an index or a table named for the materializer)."""

    materializer: ClassVar[Materializer]
    view: ClassVar[str]
    toast_column: ClassVar[str | None] = "description"  # sent once as an unchanged TOAST value

    def row(self, seed: str) -> dict[str, Any]:
        """A full row of the materializer's data columns, different for each seed word; every view
        under test must hold something for it. The default fits `contract_materializer`'s table."""
        return {"name": seed, "description": f"{seed} desc", "price": "1.00", "stock": len(seed)}

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
        # The executors' path first: no batch is applied whole in the driver.
        first = materializer_factory.start(
            self.materializer, topic=topic, env={**self.driver_env(), ENV_SMALL_BATCH_ROWS: "0"}
        )
        try:
            for batch in self._batches():  # each its own micro-batch: late ones meet held state
                self._produce(toolkit_stack, topic, batch)
                materializer_factory.wait_caught_up(first)
            self._assert_exact(first.plan)
            assert self._differences(first.plan, {}), f"{self.view}: verify agreed with an empty source"
            assert materializer_factory.stop(first) == 0, f"{self.view}: the driver did not stop cleanly"

            # The whole topic again by a new checkpoint writing the same view, on the driver's path:
            # nothing batch-keyed can help, only positions.
            shutil.rmtree(first.plan.checkpoint)
            first.env.pop(ENV_SMALL_BATCH_ROWS)
            materializer_factory.wait_caught_up(materializer_factory.restart(first))
            self._assert_exact(first.plan)
            assert materializer_factory.stop(first) == 0, f"{self.view}: the driver did not stop cleanly"
        finally:
            self.forget(first.plan)

    def test_kill_9_after_the_view_wrote_then_restart(
        self, toolkit_stack: Any, topic_factory: Any, materializer_factory: Any, tmp_path: Path
    ) -> None:
        topic = topic_factory(f"{self.view}-contract-crash")
        self._produce(toolkit_stack, topic, [change for batch in self._batches() for change in batch])
        marker = tmp_path / "view-wrote"
        run = materializer_factory.start(
            self.materializer,
            topic=topic,
            env={**self.driver_env(), ENV_FAILPOINT: f"after-{self.view}:{marker}"},
        )
        try:
            self._wait_for(marker, run)
            materializer_factory.crash(run)
            committed_first = (run.plan.checkpoint / "commits" / "0").exists()
            assert not committed_first, f"{self.view}: the batch committed before the kill"
            materializer_factory.restart(run)  # the marker is there: the failpoint lets it pass
            materializer_factory.wait_caught_up(run)
            assert (run.plan.checkpoint / "commits" / "0").exists(), (
                f"{self.view}: the re-run never committed"
            )
            self._assert_exact(run.plan)
            assert materializer_factory.stop(run) == 0, f"{self.view}: the driver did not stop cleanly"
        finally:
            self.forget(run.plan)

    # --- helpers ---------------------------------------------------------------------------------

    def _view_of(self, plan: JobPlan) -> View:
        found = [v for v in plan.views() if v.name == self.view]
        assert found, f"{plan.spec.name} keeps no view named {self.view!r}: {[v.name for v in plan.views()]}"
        return found[0]

    def _assert_exact(self, plan: JobPlan) -> None:
        found = self._differences(plan, self._expected())
        assert not found, f"{self.view} differs from the source: " + "; ".join(map(str, found))

    def _differences(self, plan: JobPlan, rows: Mapping[str, Mapping[str, str]]) -> list[Difference]:
        return self._view_of(plan).verify(Truth(kind="cdc", rows=rows))

    def _batches(self) -> list[list[tuple[bytes, bytes]]]:
        kept = (self.toast_column,) if self.toast_column else ()
        return [
            [
                debezium_change(1, 300, "c", self.row("walnut")),
                debezium_change(2, 100, "c", self.row("linen")),
                debezium_change(3, 600, "c", self.row("copper")),
            ],
            [
                debezium_change(2, 500, "d", None),
                debezium_change(1, 400, "u", self.row("oak"), unavailable=kept),  # the held value stays
            ],
            [
                debezium_change(1, 200, "u", self.row("pine")),  # late: never wins
                debezium_change(1, 300, "c", self.row("walnut")),  # a duplicate, late too
                debezium_change(2, 50, "c", self.row("resurrected")),  # older than the delete
            ],
        ]

    def _expected(self) -> dict[str, dict[str, str]]:
        """What the source says after `_batches`, every column as text."""
        oak = self.row("oak")
        if self.toast_column:
            oak[self.toast_column] = self.row("walnut")[self.toast_column]
        return {"1": _as_text(oak), "3": _as_text(self.row("copper"))}

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
