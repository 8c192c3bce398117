from __future__ import annotations

import pytest

from shop import order as o

CREATE = o.CreateOrder(order_id="42", customer_id="c1")


def run(*commands: object) -> o.OrderState:
    state = o.INITIAL
    for command in commands:
        state = o.ORDER.fold(state, o.decide(command, state))  # type: ignore[arg-type]
    return state


def add(sku: str, quantity: int = 1, price: int = 100) -> o.AddLine:
    return o.AddLine(order_id="42", sku=sku, quantity=quantity, unit_price_cents=price)


def test_happy_path_builds_a_placed_order_with_total() -> None:
    state = run(CREATE, add("a", 2, 150), add("b"), o.RemoveLine(order_id="42", sku="b"))
    assert state.status == "draft" and [line.sku for line in state.lines] == ["a"]
    events = o.decide(o.PlaceOrder(order_id="42"), state)
    assert events == (o.OrderPlaced(order_id="42", total_cents=300),)


@pytest.mark.parametrize(
    ("history", "command", "error"),
    [
        ((), add("a"), o.OrderNotFound),
        ((CREATE,), CREATE, o.OrderAlreadyExists),
        ((CREATE, add("a")), add("a"), o.DuplicateLine),
        ((CREATE,), add("a", 0), o.InvalidLine),
        ((CREATE,), add("a", 1, -1), o.InvalidLine),
        ((CREATE,), o.RemoveLine(order_id="42", sku="zz"), o.LineNotFound),
        ((CREATE,), o.PlaceOrder(order_id="42"), o.EmptyOrder),
        ((CREATE, add("a"), o.PlaceOrder(order_id="42")), add("b"), o.OrderNotDraft),
        ((CREATE, o.CancelOrder(order_id="42", reason="x")), add("b"), o.OrderAlreadyCancelled),
        (
            (CREATE, o.CancelOrder(order_id="42", reason="x")),
            o.CancelOrder(order_id="42", reason="y"),
            o.OrderAlreadyCancelled,
        ),
        ((), o.CancelOrder(order_id="42", reason="x"), o.OrderNotFound),
    ],
)
def test_invariants_raise_typed_domain_errors(
    history: tuple[object, ...], command: object, error: type[Exception]
) -> None:
    state = run(*history)
    with pytest.raises(error):
        o.decide(command, state)  # type: ignore[arg-type]


def test_too_many_lines() -> None:
    state = run(CREATE, *(add(f"s{i}") for i in range(o.MAX_LINES)))
    with pytest.raises(o.TooManyLines):
        o.decide(add("one-more"), state)


def test_placed_order_can_be_cancelled() -> None:
    state = run(CREATE, add("a"), o.PlaceOrder(order_id="42"), o.CancelOrder(order_id="42", reason="late"))
    assert state.status == "cancelled"


def test_domain_error_codes_are_unique_and_resolvable() -> None:
    codes = [e.code for e in o.DOMAIN_ERRORS]
    assert len(codes) == len(set(codes))
    assert o.ORDER.domain_error("order.empty") is o.EmptyOrder


def test_records_are_frozen_slotted_kw_only() -> None:
    for cls in (*o.ORDER.command_types, *o.ORDER.event_types, o.OrderState):
        params = cls.__dataclass_params__  # type: ignore[attr-defined]
        assert params.frozen and hasattr(cls, "__slots__") and cls.__dataclass_fields__
