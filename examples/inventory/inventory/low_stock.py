"""Low stock: the SKUs at or below their reorder point, kept in a Redis set from the change stream of
the project's `stock_levels` table (captured by Debezium), through the toolkit's `View` protocol.

Table (`TABLE_DDL`): one row per SKU, `id` (the SKU) its primary key, `on_hand` and `reorder_point`.
Redis, under the run's prefix (`ViewContext.redis_prefix`, so every run and test has its own keys):
`<prefix>#low_stock`, a set of SKUs; `<prefix>#low_stock:at`, a hash SKU -> position (the change's
LSN, a fixed-width string) of the newest change applied.

Commit order per batch (in the driver; a crash anywhere re-runs the whole batch):
1. fold the batch to each SKU's newest change (`newest`, pure);
2. read the positions held for those SKUs, WATCHing the hash;
3. keep only changes newer than what is held (`unapplied`, pure): a replayed batch finds every
   position held already and writes nothing; a delete keeps its position, so an older change read
   late cannot bring the SKU back;
4. MULTI: the new positions, SADD the low SKUs, SREM the others and the deleted ones; EXEC. Atomic: a
   crash before EXEC leaves Redis as it was; a write by another driver in between (WATCH) makes the
   batch start again at 2.
Assumption: positions compare as strings (the toolkit's CDC positions are fixed-width).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import redis

from materializers import (
    DebeziumDecoder,
    Difference,
    DriverView,
    Materializer,
    Reject,
    TableBatch,
    Truth,
    ViewUnavailable,
    compare,
)

if TYPE_CHECKING:
    from materializers import ViewContext

TABLE_DDL = "id text PRIMARY KEY, on_hand integer NOT NULL, reorder_point integer NOT NULL"
DATA_DDL = "on_hand int, reorder_point int"  # the data columns as the decoder types them
COLUMNS = ("on_hand", "reorder_point")


@dataclass(frozen=True, slots=True)
class Change:
    """A SKU's newest change in a batch: low or not, or deleted (`low` None)."""

    sku: str
    position: str
    low: bool | None


def is_low(row: Mapping[str, Any]) -> bool:
    return int(row["on_hand"]) <= int(row["reorder_point"])


def newest(rows: Iterable[Mapping[str, Any]]) -> dict[str, Change]:
    """Each SKU's newest change among `rows` (changes: entity, position, op and the data columns)."""
    found: dict[str, Change] = {}
    for row in rows:
        held = found.get(row["entity"])
        if held is None or row["position"] > held.position:
            low = None if row["op"] == "delete" else is_low(row)
            found[row["entity"]] = Change(row["entity"], row["position"], low)
    return found


def unapplied(changes: Mapping[str, Change], held: Mapping[str, str | None]) -> list[Change]:
    """The changes newer than the position held for their SKU (None: nothing held yet)."""
    return [c for sku, c in changes.items() if (held.get(sku) or "") < c.position]


class LowStock(DriverView):
    """The low-stock set, written from the driver (see the module docstring for the commit order)."""

    name = "low_stock"

    def __init__(self, redis_url: str, prefix: str) -> None:
        self.redis_url = redis_url
        self.set_key, self.positions_key = f"{prefix}#low_stock", f"{prefix}#low_stock:at"
        self._client: redis.Redis | None = None

    @classmethod
    def for_plan(cls, plan: ViewContext) -> LowStock:
        """The view of one run: its Redis, its prefix (a factory the materializer names)."""
        return cls(plan.config.endpoints.redis_url, plan.redis_prefix)

    @property
    def client(self) -> redis.Redis:
        if self._client is None:
            self._client = redis.Redis.from_url(self.redis_url, decode_responses=True)
        return self._client

    def columns(self) -> tuple[str, ...]:
        return ("entity", "position", "op", *COLUMNS)

    def check(self) -> None:
        try:
            self.client.ping()
        except redis.RedisError as exc:
            raise ViewUnavailable(
                f"low_stock: Redis at {self.redis_url} does not answer ({exc}); check REDIS_URL"
            ) from exc

    def apply_table(self, batch: TableBatch) -> Sequence[Reject]:
        changes = newest(batch.table.select(list(self.columns())).to_pylist())
        if changes:
            self.client.transaction(lambda pipe: self._write(pipe, changes), self.positions_key)
        return ()

    def _write(self, pipe: Any, changes: Mapping[str, Change]) -> None:
        """Steps 2-4: called again by `transaction` when the WATCHed hash changed before EXEC."""
        skus = list(changes)
        held = dict(zip(skus, pipe.hmget(self.positions_key, skus), strict=True))
        fresh = unapplied(changes, held)
        pipe.multi()
        if not fresh:
            return
        pipe.hset(self.positions_key, mapping={c.sku: c.position for c in fresh})
        if low := [c.sku for c in fresh if c.low]:
            pipe.sadd(self.set_key, *low)
        if not_low := [c.sku for c in fresh if not c.low]:
            pipe.srem(self.set_key, *not_low)

    def members(self) -> set[str]:
        """The SKUs at or below their reorder point."""
        return {m.decode() if isinstance(m, bytes) else m for m in self.client.smembers(self.set_key)}

    def verify(self, truth: Truth) -> list[Difference]:
        """The set against the table's rows: exactly the SKUs whose row is low."""
        expected = {sku: {"low": "yes"} for sku, row in truth.rows.items() if is_low(row)}
        return compare(self.name, expected, {sku: {"low": "yes"} for sku in self.members()})


def decoder() -> DebeziumDecoder:
    return DebeziumDecoder(data_columns=COLUMNS, data_ddl=DATA_DDL, key_column="id")


LOW_STOCK = Materializer(
    name="low_stock",
    kind="cdc",
    default_topic="inventory.public.stock_levels",
    default_table="public.stock_levels",
    data_ddl=DATA_DDL,
    decoder=decoder,
    sequential=False,
    builtin_views=(),  # only its own view: no cache, search index or warehouse
    views=(LowStock.for_plan,),
)
