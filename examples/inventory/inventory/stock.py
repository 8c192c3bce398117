"""The Stock aggregate: one stream per SKU; stock is received and reserved, never below zero.

Uses only the toolkit's public API (`from eventstore import ...`). Commands and events are frozen
dataclasses with stable type strings; their Avro schemas are in `schemas/<type>.avsc`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from importlib.resources import files
from typing import ClassVar

from eventstore import Aggregate, DomainError


@dataclass(frozen=True, slots=True, kw_only=True)
class ReceiveStock:
    command_type: ClassVar[str] = "stock.receive"
    schema_version: ClassVar[int] = 1
    sku: str
    quantity: int


@dataclass(frozen=True, slots=True, kw_only=True)
class ReserveStock:
    command_type: ClassVar[str] = "stock.reserve"
    schema_version: ClassVar[int] = 1
    sku: str
    quantity: int
    order_id: str


@dataclass(frozen=True, slots=True, kw_only=True)
class StockReceived:
    event_type: ClassVar[str] = "stock.received"
    schema_version: ClassVar[int] = 1
    sku: str
    quantity: int


@dataclass(frozen=True, slots=True, kw_only=True)
class StockReserved:
    event_type: ClassVar[str] = "stock.reserved"
    schema_version: ClassVar[int] = 1
    sku: str
    quantity: int
    order_id: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Stock:
    state_type: ClassVar[str] = "stock.state"
    schema_version: ClassVar[int] = 1
    sku: str = ""
    on_hand: int = 0
    reserved: int = 0

    @property
    def available(self) -> int:
        return self.on_hand - self.reserved


class NotEnoughStock(DomainError):
    code: ClassVar[str] = "stock.not_enough"


class BadQuantity(DomainError):
    code: ClassVar[str] = "stock.bad_quantity"


Command = ReceiveStock | ReserveStock
Event = StockReceived | StockReserved


def decide(command: Command, state: Stock) -> Sequence[Event]:
    if command.quantity < 1:
        raise BadQuantity(f"{command.sku}: quantity must be at least 1, got {command.quantity}")
    match command:
        case ReceiveStock(sku=sku, quantity=quantity):
            return (StockReceived(sku=sku, quantity=quantity),)
        case ReserveStock(sku=sku, quantity=quantity, order_id=order_id):
            if quantity > state.available:
                raise NotEnoughStock(f"{sku}: {state.available} available, {quantity} asked by {order_id}")
            return (StockReserved(sku=sku, quantity=quantity, order_id=order_id),)
    raise TypeError(f"unknown stock command {command!r}")


def evolve(state: Stock, event: Event) -> Stock:
    match event:
        case StockReceived(sku=sku, quantity=quantity):
            return replace(state, sku=sku, on_hand=state.on_hand + quantity)
        case StockReserved(quantity=quantity):
            return replace(state, reserved=state.reserved + quantity)
    return state


STOCK: Aggregate[Stock] = Aggregate(
    name="stock",
    initial_state=Stock(),
    decide=decide,
    evolve=evolve,
    stream_id=lambda command: f"stock-{command.sku}",
    state_type=Stock,
    command_types=(ReceiveStock, ReserveStock),
    event_types=(StockReceived, StockReserved),
    schema_dir=files("inventory") / "schemas",
    domain_errors=(NotEnoughStock, BadQuantity),
)
