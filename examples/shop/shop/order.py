"""The Order aggregate: a complete decider example over plain typed dataclasses.

Invariants:
- an order is created once; every other command needs an existing order;
- lines are added and removed only while the order is a draft; a SKU appears at most once;
  quantity is 1..1000 and the unit price is non-negative (integer cents, never floats);
- at most MAX_LINES lines; placing needs at least one line; a cancelled order accepts nothing.
Events are Avro records whose schemas live in `shop/schemas/<event_type>.avsc` (package data).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from importlib.resources import files
from typing import ClassVar, Literal

from eventstore.aggregate import Aggregate
from eventstore.errors import DomainError

MAX_LINES = 50
MAX_QUANTITY = 1000

Status = Literal["none", "draft", "placed", "cancelled"]


# --- commands -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class CreateOrder:
    command_type: ClassVar[str] = "order.create"
    schema_version: ClassVar[int] = 1
    order_id: str
    customer_id: str


@dataclass(frozen=True, slots=True, kw_only=True)
class AddLine:
    command_type: ClassVar[str] = "order.add_line"
    schema_version: ClassVar[int] = 1
    order_id: str
    sku: str
    quantity: int
    unit_price_cents: int


@dataclass(frozen=True, slots=True, kw_only=True)
class RemoveLine:
    command_type: ClassVar[str] = "order.remove_line"
    schema_version: ClassVar[int] = 1
    order_id: str
    sku: str


@dataclass(frozen=True, slots=True, kw_only=True)
class PlaceOrder:
    command_type: ClassVar[str] = "order.place"
    schema_version: ClassVar[int] = 1
    order_id: str


@dataclass(frozen=True, slots=True, kw_only=True)
class CancelOrder:
    command_type: ClassVar[str] = "order.cancel"
    schema_version: ClassVar[int] = 1
    order_id: str
    reason: str


Command = CreateOrder | AddLine | RemoveLine | PlaceOrder | CancelOrder


# --- events ---------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class OrderCreated:
    event_type: ClassVar[str] = "order.created"
    schema_version: ClassVar[int] = 1
    order_id: str
    customer_id: str


@dataclass(frozen=True, slots=True, kw_only=True)
class LineAdded:
    event_type: ClassVar[str] = "order.line_added"
    schema_version: ClassVar[int] = 1
    order_id: str
    sku: str
    quantity: int
    unit_price_cents: int


@dataclass(frozen=True, slots=True, kw_only=True)
class LineRemoved:
    event_type: ClassVar[str] = "order.line_removed"
    schema_version: ClassVar[int] = 1
    order_id: str
    sku: str


@dataclass(frozen=True, slots=True, kw_only=True)
class OrderPlaced:
    event_type: ClassVar[str] = "order.placed"
    schema_version: ClassVar[int] = 1
    order_id: str
    total_cents: int


@dataclass(frozen=True, slots=True, kw_only=True)
class OrderCancelled:
    event_type: ClassVar[str] = "order.cancelled"
    schema_version: ClassVar[int] = 1
    order_id: str
    reason: str


Event = OrderCreated | LineAdded | LineRemoved | OrderPlaced | OrderCancelled


# --- state ----------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class Line:
    sku: str
    quantity: int
    unit_price_cents: int


@dataclass(frozen=True, slots=True, kw_only=True)
class OrderState:
    state_type: ClassVar[str] = "order.state"
    schema_version: ClassVar[int] = 1
    order_id: str = ""
    customer_id: str = ""
    status: str = "none"
    lines: tuple[Line, ...] = ()

    @property
    def total_cents(self) -> int:
        return sum(line.quantity * line.unit_price_cents for line in self.lines)


INITIAL = OrderState()


# --- domain errors (stable codes travel in replies) -----------------------------------------------


class OrderError(DomainError):
    code: ClassVar[str] = "order.error"


class OrderNotFound(OrderError):
    code: ClassVar[str] = "order.not_found"


class OrderAlreadyExists(OrderError):
    code: ClassVar[str] = "order.already_exists"


class OrderNotDraft(OrderError):
    code: ClassVar[str] = "order.not_draft"


class OrderAlreadyCancelled(OrderError):
    code: ClassVar[str] = "order.already_cancelled"


class DuplicateLine(OrderError):
    code: ClassVar[str] = "order.duplicate_line"


class LineNotFound(OrderError):
    code: ClassVar[str] = "order.line_not_found"


class InvalidLine(OrderError):
    code: ClassVar[str] = "order.invalid_line"


class EmptyOrder(OrderError):
    code: ClassVar[str] = "order.empty"


class TooManyLines(OrderError):
    code: ClassVar[str] = "order.too_many_lines"


DOMAIN_ERRORS: tuple[type[DomainError], ...] = (
    OrderError,
    OrderNotFound,
    OrderAlreadyExists,
    OrderNotDraft,
    OrderAlreadyCancelled,
    DuplicateLine,
    LineNotFound,
    InvalidLine,
    EmptyOrder,
    TooManyLines,
)


# --- decider --------------------------------------------------------------------------------------


def _require_draft(state: OrderState) -> None:
    if state.status == "none":
        raise OrderNotFound(f"order {state.order_id or '?'} does not exist; send order.create first")
    if state.status == "cancelled":
        raise OrderAlreadyCancelled(f"order {state.order_id} is cancelled; it accepts no more changes")
    if state.status != "draft":
        raise OrderNotDraft(f"order {state.order_id} is {state.status}; lines change only while draft")


def decide(command: Command, state: OrderState) -> Sequence[Event]:
    match command:
        case CreateOrder(order_id=order_id, customer_id=customer_id):
            if state.status != "none":
                raise OrderAlreadyExists(f"order {state.order_id} already exists; pick a new order id")
            return (OrderCreated(order_id=order_id, customer_id=customer_id),)
        case AddLine(order_id=order_id, sku=sku, quantity=quantity, unit_price_cents=price):
            _require_draft(state)
            if not 1 <= quantity <= MAX_QUANTITY or price < 0:
                raise InvalidLine(
                    f"line {sku}: quantity must be 1..{MAX_QUANTITY} and price >= 0 (got {quantity}, {price})"
                )
            if any(line.sku == sku for line in state.lines):
                raise DuplicateLine(f"order {order_id} already has SKU {sku}; remove it first to change it")
            if len(state.lines) >= MAX_LINES:
                raise TooManyLines(f"order {order_id} has {MAX_LINES} lines already; place it or remove one")
            return (LineAdded(order_id=order_id, sku=sku, quantity=quantity, unit_price_cents=price),)
        case RemoveLine(order_id=order_id, sku=sku):
            _require_draft(state)
            if not any(line.sku == sku for line in state.lines):
                raise LineNotFound(f"order {order_id} has no SKU {sku}; read the order to see its lines")
            return (LineRemoved(order_id=order_id, sku=sku),)
        case PlaceOrder(order_id=order_id):
            _require_draft(state)
            if not state.lines:
                raise EmptyOrder(f"order {order_id} has no lines; add at least one before placing it")
            return (OrderPlaced(order_id=order_id, total_cents=state.total_cents),)
        case CancelOrder(order_id=order_id, reason=reason):
            if state.status == "none":
                raise OrderNotFound(f"order {order_id} does not exist; nothing to cancel")
            if state.status == "cancelled":
                raise OrderAlreadyCancelled(f"order {order_id} is already cancelled")
            return (OrderCancelled(order_id=order_id, reason=reason),)
    raise TypeError(f"unknown order command {command!r}")


def evolve(state: OrderState, event: Event) -> OrderState:
    match event:
        case OrderCreated(order_id=order_id, customer_id=customer_id):
            return replace(state, order_id=order_id, customer_id=customer_id, status="draft")
        case LineAdded(sku=sku, quantity=quantity, unit_price_cents=price):
            line = Line(sku=sku, quantity=quantity, unit_price_cents=price)
            return replace(state, lines=(*state.lines, line))
        case LineRemoved(sku=sku):
            return replace(state, lines=tuple(line for line in state.lines if line.sku != sku))
        case OrderPlaced():
            return replace(state, status="placed")
        case OrderCancelled():
            return replace(state, status="cancelled")
    # Unknown events leave state untouched so old processors tolerate new, additive event types.
    return state


def stream_id(command: Command) -> str:
    return f"order-{command.order_id}"


ORDER: Aggregate[OrderState] = Aggregate(
    name="order",
    initial_state=INITIAL,
    decide=decide,
    evolve=evolve,
    stream_id=stream_id,
    state_type=OrderState,
    command_types=(CreateOrder, AddLine, RemoveLine, PlaceOrder, CancelOrder),
    event_types=(OrderCreated, LineAdded, LineRemoved, OrderPlaced, OrderCancelled),
    schema_dir=files("shop") / "schemas",
    domain_errors=DOMAIN_ERRORS,
)
