"""Example event-sourced materializer: Order events -> Redis current state + Delta fact table.

The fold is expressed as per-event patches of a Redis hash (fields: order_id, customer_id, status,
total_cents, reason, `line:<sku>` = "<quantity>x<unit_price_cents>"), applied strictly in stream-version
order. `patch` (Python) and `_patch_columns` (JVM) are the same mapping; `verify` folds the topic with
the Python one, so a drift between them shows up as differences.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from materializers import CHANGE_COLUMNS, EventDecoder, Materializer

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

    from materializers import WriterSchemas

WANTED = {
    "order_id": "string",
    "customer_id": "string",
    "sku": "string",
    "quantity": "int",
    "unit_price_cents": "long",
    "total_cents": "long",
    "reason": "string",
}
DATA_DDL = "event_type string, " + ", ".join(f"{n} {t}" for n, t in WANTED.items())
EVENT_TYPES = ("order.created", "order.line_added", "order.line_removed", "order.placed", "order.cancelled")


def patch(event_type: str, data: Mapping[str, Any]) -> tuple[dict[str, str], tuple[str, ...]]:
    """(fields to set, fields to delete) for one event; KeyError/ValueError for an unknown type."""
    match event_type:
        case "order.created":
            return {"order_id": data["order_id"], "customer_id": data["customer_id"], "status": "draft"}, ()
        case "order.line_added":
            return {f"line:{data['sku']}": f"{data['quantity']}x{data['unit_price_cents']}"}, ()
        case "order.line_removed":
            return {}, (f"line:{data['sku']}",)
        case "order.placed":
            return {"status": "placed", "total_cents": str(data["total_cents"])}, ()
        case "order.cancelled":
            return {"status": "cancelled", "reason": data["reason"]}, ()
    raise ValueError(f"unknown order event type {event_type!r}; known: {EVENT_TYPES}")


def fold(events: Iterable[tuple[str, Mapping[str, Any]]]) -> dict[str, str]:
    """The cache value an ordered sequence of (event_type, data) must produce."""
    state: dict[str, str] = {}
    for event_type, data in events:
        sets, dels = patch(event_type, data)
        state.update(sets)
        for name in dels:
            state.pop(name, None)
    return state


def _patch_columns() -> tuple[Column, Column]:
    from pyspark.sql import functions as F

    # An error row (a body that did not decode) has no fields: building its map keys from them would
    # fail the whole batch (a null map key), where the row belongs in the dead letters.
    et, m = F.when(F.col("error").isNull(), F.col("event_type")), F.create_map
    sets = (
        F.when(
            et == "order.created",
            m(
                F.lit("order_id"),
                F.col("order_id"),
                F.lit("customer_id"),
                F.col("customer_id"),
                F.lit("status"),
                F.lit("draft"),
            ),
        )
        .when(
            et == "order.line_added",
            m(
                F.concat(F.lit("line:"), F.col("sku")),
                F.concat_ws("x", F.col("quantity").cast("string"), F.col("unit_price_cents").cast("string")),
            ),
        )
        .when(
            et == "order.placed",
            m(F.lit("status"), F.lit("placed"), F.lit("total_cents"), F.col("total_cents").cast("string")),
        )
        .when(
            et == "order.cancelled", m(F.lit("status"), F.lit("cancelled"), F.lit("reason"), F.col("reason"))
        )
        .otherwise(F.create_map().cast("map<string,string>"))
    )
    dels = F.when(et == "order.line_removed", F.array(F.concat(F.lit("line:"), F.col("sku")))).otherwise(
        F.array().cast("array<string>")
    )
    return sets, dels


class OrderDecoder:
    """The orders materializer's decoder (a `Transform`): the events decoded, with their patches. One
    per job: the expressions are built once and reused for every batch."""

    def __init__(self) -> None:
        self.events = EventDecoder(WANTED, EVENT_TYPES)
        self._patches: list[Column] = []

    def __call__(self, df: DataFrame, schemas: WriterSchemas) -> DataFrame:
        from pyspark.sql import functions as F

        if not self._patches:
            sets, dels = _patch_columns()
            self._patches = [
                F.lit("patch").alias("op"),
                sets.alias("set_fields"),
                dels.alias("del_fields"),
                F.array().cast("array<string>").alias("keep_fields"),  # events always carry their fields
            ]
        decoded = self.events(df, schemas).select("*", *self._patches)
        return decoded.select(
            *CHANGE_COLUMNS, "src_key", "src_value", "error", "event_type", *WANTED, "schema_id"
        )


ORDERS = Materializer(
    name="orders",
    kind="events",
    default_topic="eventstore.order.events",
    default_table="",
    data_ddl=DATA_DDL,
    decoder=OrderDecoder,
    sequential=True,
    current_table=False,
    event_types=EVENT_TYPES,
    fold=fold,
)
