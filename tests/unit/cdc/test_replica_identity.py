"""What a table's REPLICA IDENTITY lets a consumer take back (pure)."""

from __future__ import annotations

import pytest

from cdc.replica_identity import full_identity_problem


def test_full_is_fine() -> None:
    assert full_identity_problem("public.orders", "f") is None


@pytest.mark.parametrize(("identity", "named"), [("d", "DEFAULT"), ("n", "NOTHING"), ("i", "USING INDEX")])
def test_less_than_full_says_how_to_set_it(identity: str, named: str) -> None:
    problem = full_identity_problem("public.orders", identity)
    assert problem is not None
    assert f"REPLICA IDENTITY {named}" in problem
    assert "ALTER TABLE public.orders REPLICA IDENTITY FULL" in problem


def test_missing_table() -> None:
    assert full_identity_problem("public.gone", None) == (
        "table public.gone does not exist in Postgres; create it or fix the view's source.table"
    )
