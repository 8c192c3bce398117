"""The low-stock view keeps the contract every built-in view keeps (`materializers.testing.ViewContract`):
changes once in position order on both paths, a replay by a new checkpoint, kill -9 after it wrote."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from inventory.low_stock import LOW_STOCK
from materializers.testing import ViewContract

# Module level: each contract test's driver process imports it from here.
LOW_STOCK_CONTRACT = replace(LOW_STOCK, name="low_stock_contract")


class TestLowStockContract(ViewContract):
    materializer = LOW_STOCK_CONTRACT
    view = "low_stock"
    toast_column = None  # integers are never TOASTed

    def row(self, seed: str) -> dict[str, Any]:
        # Low at 3 or fewer: oak (the newest of entity 1) is, the late pine is not; the set holds {1}.
        return {"on_hand": len(seed), "reorder_point": 3}
