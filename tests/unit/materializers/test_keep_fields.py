"""Kept fields (values the source did not send): which value a view holds after a batch (pure)."""

from __future__ import annotations

import pyarrow as pa
import pytest

from materializers.decode import positions
from materializers.decode.changes import keeps
from materializers.views.search.tantivy import SearchChange, document_fields, latest_changes
from materializers.views.warehouse.delta import merge_assignments

P = positions.encode


@pytest.mark.parametrize(
    ("carried_at", "held_at", "expected"),
    [
        (None, None, False),  # nothing held: the batch's value (null when not carried)
        (P(5), None, False),
        (None, P(5), True),  # not carried: keep the view's
        (P(5), P(5), True),  # carried at the view's own position: same value, keep
        (P(4), P(5), True),  # carried only by a late record: the view's is newer
        (P(6), P(5), False),
    ],
)
def test_keeps(carried_at: str | None, held_at: str | None, expected: bool) -> None:
    assert keeps(carried_at, held_at) is expected


def change(carried_at: dict[str, str], **fields: str | None) -> SearchChange:
    return SearchChange(entity="1", position=P(9), deleted=False, fields=fields, carried_at=carried_at)


TEXT = ("name", "description")


def test_document_fields_new_entity_takes_what_was_carried() -> None:
    assert document_fields(change({"name": P(9)}, name="lamp", description=None), None, TEXT) == {
        "name": "lamp"
    }


def test_document_fields_keeps_stored_values_not_carried_or_older() -> None:
    stored = {"key": ["1"], "position": [P(5)], "live": ["true"], "name": ["old"], "description": ["long"]}
    assert document_fields(change({"name": P(9)}, name="new", description=None), stored, TEXT) == {
        "name": "new",
        "description": "long",
    }
    late = change({"name": P(9), "description": P(3)}, name="new", description="stale")
    assert document_fields(late, stored, TEXT) == {"name": "new", "description": "long"}
    fresh = change({"name": P(9), "description": P(7)}, name="new", description="fresh")
    assert document_fields(fresh, stored, TEXT) == {"name": "new", "description": "fresh"}


def test_document_fields_carried_null_clears_and_tombstone_keeps_nothing() -> None:
    stored = {"key": ["1"], "position": [P(5)], "live": ["true"], "description": ["long"]}
    cleared = change({"name": P(9), "description": P(9)}, name="x", description=None)
    assert document_fields(cleared, stored, TEXT) == {"name": "x"}
    tombstone = {"key": ["1"], "position": [P(5)], "live": ["false"]}
    assert document_fields(change({"name": P(9)}, name="x"), tombstone, TEXT) == {"name": "x"}


def test_merge_assignments_keep_target_value_unless_carried_newer() -> None:
    found = merge_assignments(("description",))
    assert {k: found[k] for k in ("position", "deleted", "updated_at")} == {
        "position": "s.`position`",
        "deleted": "s.`deleted`",
        "updated_at": "s.`updated_at`",
    }
    assert found["description"] == (
        "CASE WHEN s.carried_at.`description` IS NULL OR s.carried_at.`description` <= t.position "
        "THEN t.`description` ELSE s.`description` END"
    )


def row(
    entity: str, at: int, op: str = "upsert", kept: tuple[str, ...] = (), **fields: str | None
) -> dict[str, object]:
    return {"entity": entity, "position": P(at), "op": op, "keep_fields": list(kept), **fields}


def changes(*rows: dict[str, object], text: tuple[str, ...] = TEXT) -> pa.Table:
    """Change rows as the driver holds them (the columns' types as Spark's toArrow gives them)."""
    schema = pa.schema(
        [("entity", pa.string()), ("position", pa.string()), ("op", pa.string()),
         ("keep_fields", pa.list_(pa.string())), *[(name, pa.string()) for name in text]]
    )  # fmt: skip
    return pa.Table.from_pylist(list(rows), schema=schema)


def test_latest_changes_takes_each_field_from_the_newest_change_that_carried_it() -> None:
    rows = changes(
        row("1", 7, name="b", description=None, kept=("description",)),  # TOAST kept: not carried
        row("1", 5, name="a", description="long"),
        row("2", 3, name="x", description="y"),
        row("1", 6, name="late", description="newer", kept=()),
    )
    found = {c.entity: c for c in latest_changes(rows, TEXT)}
    assert found["1"] == SearchChange(
        entity="1",
        position=P(7),
        deleted=False,
        fields={"name": "b", "description": "newer"},
        carried_at={"name": P(7), "description": P(6)},
    )
    assert found["2"].fields == {"name": "x", "description": "y"} and found["2"].position == P(3)


def test_latest_changes_a_delete_wins_and_carries_nulls_a_field_never_carried_is_absent() -> None:
    deleted = latest_changes(
        changes(row("1", 4, name="a"), row("1", 8, op="delete", name=None), text=("name",)), ("name",)
    )
    assert deleted == [
        SearchChange(
            entity="1", position=P(8), deleted=True, fields={"name": None}, carried_at={"name": P(8)}
        )
    ]
    kept = latest_changes(changes(row("1", 4, kept=("name",), name=None), text=("name",)), ("name",))
    assert kept[0].fields == {} and kept[0].carried_at == {}
