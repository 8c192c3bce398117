"""The driver side of test_search_kill_commit, run as a child process the test can SIGKILL: applies
the search view's batches from the index's next one up to `last`, the way the view does (change rows
folded by `latest_changes`, then `SearchIndex.apply_batch`: one writer, one commit per batch).

    python search_kill_child.py <index dir> <last batch id>

Prints the index's last batch. Every batch's rows are a function of its id, so a run restarted after
a kill re-runs the killed batch with exactly the changes (and the opstamps) of the killed run.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pyarrow as pa

from materializers.decode import positions
from materializers.views.search.tantivy import SearchIndex, latest_changes

APP_ID = "kill-commit"
TEXT_FIELDS = ("name", "note")
ENTITIES = 12


def batch_rows(batch_id: int) -> list[dict[str, Any]]:
    """Batch 0 creates every entity; each later one changes two thirds of them, deletes some (a
    tombstone; a later batch brings the entity back) and carries `note` only every 4th batch (else
    the view keeps the stored one). An entity's newest row is preceded by an older one of the batch."""
    rows: list[dict[str, Any]] = []
    for i in range(ENTITIES):
        if batch_id > 0 and (i + batch_id) % 3 == 0:
            continue
        at = batch_id * 1000 + 10 * i
        deleted = batch_id > 0 and (i + batch_id) % 5 == 0
        carries_note = batch_id % 4 == 0
        rows.append(
            {
                "entity": f"e{i}",
                "position": positions.encode(at),
                "op": "update",
                "keep_fields": [] if carries_note else ["note"],
                "name": f"older-b{batch_id}-e{i}",
                "note": f"older-b{batch_id}-e{i}" if carries_note else None,
            }
        )
        rows.append(
            {
                "entity": f"e{i}",
                "position": positions.encode(at + 1),
                "op": "delete" if deleted else "update",
                "keep_fields": [] if deleted or carries_note else ["note"],
                "name": None if deleted else f"b{batch_id}-e{i}",
                "note": f"note-b{batch_id}-e{i}" if carries_note and not deleted else None,
            }
        )
    return rows


def batch_table(batch_id: int) -> pa.Table:
    """`batch_rows` as the driver holds a batch: Arrow, typed as Spark's toArrow gives it."""
    text = [(name, pa.string()) for name in TEXT_FIELDS]
    schema = pa.schema([("entity", pa.string()), ("position", pa.string()), ("op", pa.string()),
                        ("keep_fields", pa.list_(pa.string())), *text])  # fmt: skip
    return pa.Table.from_pylist(batch_rows(batch_id), schema=schema)


def expected_documents(last: int) -> dict[str, dict[str, str]]:
    """The live documents after batches 0..last, each applied once (a model of the view, pure)."""
    held: dict[str, dict[str, str] | None] = {}
    for batch_id in range(last + 1):
        newest: dict[str, dict[str, Any]] = {}
        for row in batch_rows(batch_id):
            newest[row["entity"]] = row  # rows come oldest first per entity
        for entity, row in newest.items():
            if row["op"] == "delete":
                held[entity] = None
                continue
            doc = {"name": row["name"]}
            stored = held.get(entity)
            note = stored.get("note") if "note" in row["keep_fields"] and stored else row["note"]
            if note is not None:
                doc["note"] = note
            held[entity] = doc
    return {entity: doc for entity, doc in held.items() if doc is not None}


def main(argv: list[str]) -> None:
    path, last = Path(argv[1]), int(argv[2])
    index = SearchIndex(path=path, text_fields=TEXT_FIELDS)
    batch_id = index.last_batch(APP_ID) + 1
    while batch_id <= last:
        index.apply_batch(APP_ID, batch_id, latest_changes(batch_table(batch_id), TEXT_FIELDS))
        batch_id += 1
    print(index.last_batch(APP_ID), flush=True)


if __name__ == "__main__":
    main(sys.argv)
