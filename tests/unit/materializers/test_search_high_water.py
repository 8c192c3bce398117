"""The search index's high-water mark: a change newer than every position the index holds is put
without looking its stored document up, and nothing else changes (on a real Tantivy index)."""

from __future__ import annotations

from pathlib import Path

import pytest
import tantivy

from materializers.decode import positions
from materializers.views.search.tantivy import (
    HIGH_KEY,
    SearchChange,
    SearchIndex,
    high_water,
    needs_stored,
)

TEXT = ("name", "note")
APP = "app-1"


def P(n: int) -> str:
    return positions.cdc(n, snapshot=False)


def put(entity: str, at: int, *, deleted: bool = False, **fields: str | None) -> SearchChange:
    """A change that carried exactly `fields` (a text field left out was not carried)."""
    return SearchChange(
        entity=entity,
        position=P(at),
        deleted=deleted,
        fields=fields,
        carried_at={name: P(at) for name in fields},
    )


def carried(entity: str, at: int, **carried_at: int) -> SearchChange:
    """A change at `at` whose fields the batch's changes carried at the positions `carried_at`."""
    return SearchChange(
        entity=entity,
        position=P(at),
        deleted=False,
        fields={name: f"v{n}" for name, n in carried_at.items()},
        carried_at={name: P(n) for name, n in carried_at.items()},
    )


@pytest.mark.parametrize(
    ("change", "high", "expected"),
    [
        (put("1", 9, name="a", note="b"), None, True),  # an index without the mark: always looked up
        (put("1", 9, name="a", note="b"), "", False),  # an empty index
        (put("1", 9, name="a", note="b"), P(8), False),
        (put("1", 9, name="a", note="b"), P(9), True),  # as new as what the index holds: compared
        (put("1", 9, name="a", note="b"), P(10), True),
        (put("1", 9, name="a"), P(8), True),  # `note` not carried: kept from the stored document
        (carried("1", 9, name=9, note=7), P(8), True),  # `note` carried by an older change: compared
        (carried("1", 9, name=9, note=8), P(8), True),
        (carried("1", 9, name=9, note=9), P(8), False),
        (put("1", 9, deleted=True), P(8), False),  # a tombstone keeps no text
    ],
)
def test_needs_stored(change: SearchChange, high: str | None, expected: bool) -> None:
    assert needs_stored(change, high, TEXT) is expected


def test_high_water_of_the_marker_an_empty_index_or_an_index_without_it() -> None:
    assert high_water({"position": [P(7)]}, 12) == P(7)
    assert high_water(None, 0) == ""
    assert high_water(None, 12) is None


def documents_of(index: SearchIndex, key: str) -> list[dict[str, list[str]]]:
    """Every document `key` has (a blind put must leave one)."""
    opened = index.index()
    opened.reload()
    searcher = opened.searcher()
    query = tantivy.Query.term_query(opened.schema, "key", key)
    return [searcher.doc(a).to_dict() for _s, a in searcher.search(query, 10).hits]


def test_blind_puts_replace_each_document_and_older_changes_still_lose(tmp_path: Path) -> None:
    index = SearchIndex(tmp_path / "search", TEXT)
    assert (
        index.apply_batch(APP, 0, [put("1", 1, name="one", note="n1"), put("2", 2, name="two", note="n2")])
        == 2
    )
    assert [d["position"] for d in documents_of(index, HIGH_KEY)] == [[P(2)]]
    # newer than the mark: put blind, the old documents deleted unseen
    assert index.apply_batch(APP, 1, [put("1", 3, name="uno", note="n3"), put("2", 4, deleted=True)]) == 2
    assert [d["position"] for d in documents_of(index, "1")] == [[P(3)]]
    assert [d["live"] for d in documents_of(index, "2")] == [["false"]]
    # a replay from older offsets: below the mark, looked up, and it changes nothing
    assert index.apply_batch(APP, 2, [put("1", 2, name="stale", note="x"), put("2", 3, name="back")]) == 0
    assert index.read("1") == {"name": "uno", "note": "n3"}
    assert index.read("2") is None
    assert [d["position"] for d in documents_of(index, HIGH_KEY)] == [[P(4)]]  # the mark never falls
    assert index.index().searcher().num_docs == 4  # two entities, the batch marker, the mark


def test_a_field_not_carried_is_kept_from_the_stored_document(tmp_path: Path) -> None:
    index = SearchIndex(tmp_path / "search", TEXT)
    index.apply_batch(APP, 0, [put("1", 1, name="one", note="kept")])
    assert index.apply_batch(APP, 1, [put("1", 5, name="uno")]) == 1  # `note` unchanged (TOAST)
    assert index.read("1") == {"name": "uno", "note": "kept"}


def test_an_index_without_the_mark_looks_every_change_up_and_gets_no_mark(tmp_path: Path) -> None:
    index = SearchIndex(tmp_path / "search", TEXT)
    index.apply_batch(APP, 0, [put("1", 5, name="five", note="n")])
    index.settle_merges()  # the last commit's writer holds the lock until its merges end
    writer = index.index().writer(15_000_000, 1)  # as an index written before the mark was kept
    writer.delete_documents_by_term("key", HIGH_KEY)
    writer.commit()
    writer.wait_merging_threads()
    assert index.apply_batch(APP, 1, [put("1", 4, name="four", note="n"), put("2", 6, name="six")]) == 1
    assert index.read("1") == {"name": "five", "note": "n"}
    assert index.read("2") == {"name": "six"}
    assert documents_of(index, HIGH_KEY) == []


def test_a_batch_of_no_change_keeps_the_mark(tmp_path: Path) -> None:
    index = SearchIndex(tmp_path / "search", TEXT)
    index.apply_batch(APP, 0, [put("1", 7, name="seven")])
    assert index.apply_batch(APP, 1, []) == 0
    assert [d["position"] for d in documents_of(index, HIGH_KEY)] == [[P(7)]]
    assert index.last_batch(APP) == 1


def test_a_field_carried_by_an_older_change_of_the_batch_loses_to_the_stored_one(tmp_path: Path) -> None:
    """A late record (older than the stored document) carried `note`; the batch's newest change,
    above the mark, did not: the stored `note` is newer and stays."""
    index = SearchIndex(tmp_path / "search", TEXT)
    index.apply_batch(APP, 0, [put("1", 5, name="five", note="stored")])
    late = SearchChange(
        entity="1",
        position=P(9),
        deleted=False,
        fields={"name": "nine", "note": "late"},
        carried_at={"name": P(9), "note": P(3)},
    )
    assert index.apply_batch(APP, 1, [late]) == 1
    assert index.read("1") == {"name": "nine", "note": "stored"}
