"""The decider alone: pure functions, no stack."""

from __future__ import annotations

import pytest

from inventory.stock import NotEnoughStock, ReceiveStock, ReserveStock, Stock, StockReserved, decide, evolve


def test_reserving_more_than_is_available_is_refused() -> None:
    state = Stock()
    for event in decide(ReceiveStock(sku="A", quantity=3), state):
        state = evolve(state, event)
    assert decide(ReserveStock(sku="A", quantity=2, order_id="o-1"), state) == (
        StockReserved(sku="A", quantity=2, order_id="o-1"),
    )
    with pytest.raises(NotEnoughStock, match="3 available, 4 asked"):
        decide(ReserveStock(sku="A", quantity=4, order_id="o-2"), state)
