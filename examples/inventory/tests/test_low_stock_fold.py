"""The low-stock view's pure core: a batch folded to each SKU's newest change, and only changes newer
than what the view holds applied (a replayed batch changes nothing, a delete is not undone)."""

from __future__ import annotations

from inventory.low_stock import Change, newest, unapplied


def change(sku: str, position: str, op: str = "upsert", on_hand: int = 0, reorder_point: int = 0) -> dict:
    return {"entity": sku, "position": position, "op": op, "on_hand": on_hand, "reorder_point": reorder_point}


def test_the_newest_change_per_sku_wins_and_only_newer_changes_apply() -> None:
    batch = [
        change("A", "0002", on_hand=1, reorder_point=5),
        change("B", "0003", on_hand=9, reorder_point=5),
        change("A", "0001", on_hand=9, reorder_point=5),  # older, read later: loses
        change("C", "0004", op="delete", on_hand=None, reorder_point=None),  # type: ignore[arg-type]
    ]
    folded = newest(batch)
    assert folded == {
        "A": Change("A", "0002", True),
        "B": Change("B", "0003", False),
        "C": Change("C", "0004", None),
    }
    assert unapplied(folded, {}) == list(folded.values())
    assert unapplied(folded, {"A": "0002", "B": "0001", "C": "0005"}) == [Change("B", "0003", False)]
    assert unapplied(folded, {sku: c.position for sku, c in folded.items()}) == []  # a replay: nothing
