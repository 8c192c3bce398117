"""The Stock aggregate on the real stack, through the toolkit's pytest plugin (no conftest needed)."""

from __future__ import annotations

from typing import Any

import pytest

from inventory.stock import NotEnoughStock, ReceiveStock, ReserveStock


def test_stock_is_reserved_once_and_never_oversold(event_store_factory: Any, process_groups: Any) -> None:
    store = event_store_factory("inventory.stock:STOCK")
    with store.client() as client:
        assert client.execute(ReceiveStock(sku="A", quantity=5)).status == "ok"
        first = client.execute(ReserveStock(sku="A", quantity=4, order_id="o-1"), command_id="reserve-o-1")
        assert first.status == "ok" and first.last_version == 2
        # The processor dies; a new one takes over the stream from its events.
        process_groups.crash(store.processors[0])
        event_store_factory.start_processor(store, "p1")
        retried = client.execute(ReserveStock(sku="A", quantity=4, order_id="o-1"), command_id="reserve-o-1")
        assert retried == first  # a retry with the same command id gets the first outcome back
        with pytest.raises(NotEnoughStock, match="1 available, 2 asked"):  # the decider's error, typed
            client.execute(ReserveStock(sku="A", quantity=2, order_id="o-2"))
    assert [e.event_type for e in store.events.read("stock-A")] == ["stock.received", "stock.reserved"]
    assert store.events.load("stock-A").state.available == 1
