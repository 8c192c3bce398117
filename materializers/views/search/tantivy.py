"""Search view: an embedded Tantivy index, upserted by entity key, one commit per micro-batch.

Commit order for a batch (driver):
1. if the index's batch marker for this job's app id is >= the batch id, the batch was already
   committed (a re-run after a crash between this commit and Spark's checkpoint): skip it;
2. for each entity (latest change of the batch only), look up the stored position and keep the
   change only if it is newer (a replay from older offsets changes nothing). A change newer than the
   index's high-water mark (the highest position it holds) is newer than its stored document
   without a look-up (`needs_stored`): a live batch's look-ups were its largest Python step;
3. delete-by-term the entity's stored document, if it has one, and add the new one — a live doc, or
   a tombstone doc (`live`="false", position kept) for a delete, so a late older record cannot
   resurrect it. A text field the batch did not carry (an unchanged value the source did not send,
   see changes.py), or carried only at a position not newer than the stored document's, keeps the
   stored document's value (`document_fields`);
4. replace the batch marker and high-water documents, then ONE commit: documents and markers become
   visible atomically.
The merges a commit starts finish behind the next batch (`settle_merges`): the writer that
committed waits for them in a thread of its own, and the next batch's writer is created only once
they are done (Tantivy allows one writer per index). Waited for in the batch, they added a little
to every batch and much more to every seventh or eighth: the tail of the live stream's commit→view
latency.
Tantivy is single-writer and local: on a cluster the index lives on the driver (the batch is collected
there), so it scales with what the driver can hold per batch; a shared index would need a search
server (OpenSearch — not runnable here) or one writer partition.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import tantivy

from materializers.decode.changes import keeps, newest_of
from materializers.errors import ViewUnavailable
from materializers.views.background import Background

if TYPE_CHECKING:
    import pyarrow as pa

MARKER_PREFIX = "__batch__:"
HIGH_KEY = "__high__"  # the high-water marker: the highest position any applied change held
HEAP_BYTES = 50_000_000
LOOKUP_SLICE = 4096  # entities whose stored documents one query fetches


@dataclass(frozen=True, slots=True, kw_only=True)
class SearchChange:
    """An entity's newest change of a batch; `fields` holds the newest value each field was carried
    with and `carried_at` the position of that change (a field absent from it was not carried)."""

    entity: str
    position: str
    deleted: bool
    fields: Mapping[str, str | None]
    carried_at: Mapping[str, str]


def latest_changes(changes: pa.Table, text_fields: tuple[str, ...]) -> list[SearchChange]:
    """Each entity's newest change among a batch's change rows (pure; see `changes.newest_of`): the
    position and op of its newest change, and per field the value of the newest change that carried
    it (did not name it in `keep_fields`). Folded in Arrow, then only those rows' values made Python
    objects: every row as a dict (`to_pylist`) and a Python fold cost several times as much on a
    backfill's batch (about the same on a live batch of a few thousand)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    found = newest_of(changes["entity"], changes["position"], changes["keep_fields"], text_fields)
    newest = pa.array(found.rows, pa.int64())
    entities = changes["entity"].take(newest).to_pylist()
    positions = changes["position"].take(newest).to_pylist()
    deleted = pc.equal(changes["op"].take(newest), "delete").to_pylist()
    carried = []  # per field: its carrier row (None: not carried), value and position, per entity
    for name in text_fields:
        rows = pa.array(found.carriers[name], pa.int64())
        values, at = changes[name].take(rows).to_pylist(), changes["position"].take(rows).to_pylist()
        carried.append((name, found.carriers[name], values, at))
    out = []
    for n, entity in enumerate(entities):
        fields, carried_at = {}, {}
        for name, carriers, values, at in carried:
            if carriers[n] is not None:
                fields[name], carried_at[name] = values[n], at[n]
        out.append(
            SearchChange(
                entity=entity, position=positions[n], deleted=deleted[n], fields=fields, carried_at=carried_at
            )
        )
    return out


def needs_stored(change: SearchChange, high: str | None, text_fields: tuple[str, ...]) -> bool:
    """Whether applying `change` needs its entity's stored document (pure): to compare positions,
    unless the change is newer than every position the index holds (`high`, None: not known), and
    for a text field the change did not carry, or carried from an earlier change of the batch at a
    position not above `high` (the stored value may be newer: `document_fields`)."""
    if high is None or change.position <= high:
        return True
    if change.deleted:
        return False
    return any(change.carried_at.get(name, high) <= high for name in text_fields)


def high_water(stored: Mapping[str, Sequence[str]] | None, documents: int) -> str | None:
    """The highest position any change applied to the index held (pure): the high-water marker
    document's, "" for an index of no `documents`, None for an index written before the marker was
    kept (its changes are looked up one by one until it is rebuilt)."""
    if stored is not None:
        return stored["position"][0]
    return "" if documents == 0 else None


def _batch_of(marker: Mapping[str, Sequence[str]] | None) -> int:
    """The batch id a batch marker document holds; -1 without one."""
    return int(marker["position"][0]) if marker else -1


def document_fields(
    change: SearchChange, stored: Mapping[str, Sequence[str]] | None, text_fields: tuple[str, ...]
) -> dict[str, str]:
    """The text fields of the change's live document (pure): the change's value where it carried one
    newer than the stored document (`stored`: Tantivy's doc dict, None if absent), else the stored one."""
    held_at = stored["position"][0] if stored else None
    found: dict[str, str] = {}
    for name in text_fields:
        if keeps(change.carried_at.get(name), held_at):
            values = (stored or {}).get(name) or ()
            value = values[0] if values else None
        else:
            value = change.fields.get(name)
        if value is not None:
            found[name] = value
    return found


@dataclass(slots=True)
class SearchIndex:
    path: Path
    text_fields: tuple[str, ...]
    _index: Any = None
    # the last commit's writer, waiting for its merges
    _merges: Background = field(default_factory=lambda: Background("search-merges"), init=False, repr=False)

    def _schema(self) -> Any:
        builder = tantivy.SchemaBuilder()
        builder.add_text_field("key", stored=True, tokenizer_name="raw")
        builder.add_text_field("position", stored=True, tokenizer_name="raw")
        builder.add_text_field("live", stored=True, tokenizer_name="raw")
        for name in self.text_fields:
            builder.add_text_field(name, stored=True)
        return builder.build()

    def index(self) -> Any:
        if self._index is None:
            try:
                self.path.mkdir(parents=True, exist_ok=True)
                self._index = tantivy.Index(self._schema(), path=str(self.path), reuse=True)
            except (OSError, ValueError) as exc:
                raise ViewUnavailable(
                    f"cannot open the search index at {self.path} ({exc}); check the directory is writable "
                    "and not built with other fields (rebuild it into a new directory)"
                ) from exc
        return self._index

    def _stored(self, searcher: Any, key: str) -> dict[str, Any] | None:
        return self._stored_of(searcher, [key]).get(key)

    def _stored_of(self, searcher: Any, keys: Sequence[str]) -> dict[str, dict[str, Any]]:
        """The stored documents of `keys` (those it has), found by one query instead of one per key."""
        query = tantivy.Query.term_set_query(self.index().schema, "key", list(keys))
        found: dict[str, dict[str, Any]] = {}
        for _score, address in searcher.search(query, len(keys)).hits:
            doc = searcher.doc(address).to_dict()
            found[doc["key"][0]] = doc
        return found

    def last_batch(self, app_id: str) -> int:
        index = self.index()
        index.reload()
        return _batch_of(self._stored(index.searcher(), MARKER_PREFIX + app_id))

    def apply_batch(self, app_id: str, batch_id: int, changes: Iterable[SearchChange]) -> int:
        """Apply one micro-batch (at most one change per entity); return how many documents changed."""
        index = self.index()
        index.reload()
        searcher, marker = index.searcher(), MARKER_PREFIX + app_id
        marks = self._stored_of(searcher, [marker, HIGH_KEY])
        if batch_id <= _batch_of(marks.get(marker)):
            return 0
        high = high_water(marks.get(HIGH_KEY), searcher.num_docs)
        todo = list(changes)
        # Blind: a change newer than every stored position is put without looking its document up
        # (its old one, if any, is deleted unseen). Not for a large batch into a filled index:
        # a queued delete per new document doubled a backfill batch's peak memory.
        blind = high is not None and (high == "" or len(todo) <= LOOKUP_SLICE)
        self.settle_merges()
        writer = index.writer(HEAP_BYTES, 1)
        # A driver killed mid-commit leaves files no commit references; the re-run of its batch
        # (same opstamps, same names) would fail on them with FileAlreadyExists. Tantivy removes
        # unreferenced files only after its own commits and merges: remove them first.
        writer.garbage_collect_files()
        changed, unseen = 0, high != ""  # an empty index holds no document to delete
        try:
            # Looked up a slice at a time: a backfill batch's stored documents at once would be
            # hundreds of MB of Python dicts.
            for start in range(0, len(todo), LOOKUP_SLICE):
                part = todo[start : start + LOOKUP_SLICE]
                wanted = {c.entity for c in part if not blind or needs_stored(c, high, self.text_fields)}
                stored = self._stored_of(searcher, list(wanted)) if wanted else {}
                for change in part:
                    found, looked = stored.get(change.entity), change.entity in wanted
                    changed += self._put(writer, change, found, unseen=unseen and not looked)
            self._mark(writer, marker, str(batch_id))
            if high is not None:
                self._mark(writer, HIGH_KEY, max([high, *(c.position for c in todo)]))
            writer.commit()
        except BaseException:
            writer.rollback()
            writer.wait_merging_threads()
            raise
        self._merges.start(writer.wait_merging_threads)  # settled first: it always starts
        index.reload()
        return changed

    @staticmethod
    def _mark(writer: Any, key: str, position: str) -> None:
        """Replace the marker document `key` (batch marker, high-water mark) in the writer's commit."""
        writer.delete_documents_by_term("key", key)
        writer.add_document(tantivy.Document(key=key, position=position, live="marker"))

    def settle_merges(self) -> None:
        """Wait for the merges of the last commit, if they are still running; raise what they raised.
        Until then their writer holds the index's lock: another writer (in this process or another)
        is refused with LockBusy."""
        self._merges.settle()

    def _put(
        self, writer: Any, change: SearchChange, stored: Mapping[str, Sequence[str]] | None, *, unseen: bool
    ) -> bool:
        """Queue the entity's new document unless the stored one is as new; whether it did. `unseen`:
        the stored document was not looked up (`needs_stored`), so it is deleted if there is one."""
        # A new entity has nothing to delete: a queued delete per new document doubled a backfill
        # batch's peak memory.
        if stored is not None:
            if change.position <= stored["position"][0]:
                return False
            writer.delete_documents_by_term("key", change.entity)
        elif unseen:
            writer.delete_documents_by_term("key", change.entity)
        doc = {
            "key": change.entity,
            "position": change.position,
            "live": "false" if change.deleted else "true",
        }
        if not change.deleted:
            doc.update(document_fields(change, stored, self.text_fields))
        writer.add_document(tantivy.Document(**doc))
        return True

    # --- reads ---------------------------------------------------------------------------------

    def live_documents(self) -> dict[str, dict[str, str]]:
        index = self.index()
        index.reload()
        searcher = index.searcher()
        query = tantivy.Query.term_query(index.schema, "live", "true")
        total = max(searcher.num_docs, 1)
        found: dict[str, dict[str, str]] = {}
        for _score, address in searcher.search(query, total).hits:
            doc = searcher.doc(address).to_dict()
            found[doc["key"][0]] = self._text(doc)
        return found

    def read(self, key: str) -> dict[str, str] | None:
        """The stored text fields of the entity's live document; None when absent or deleted."""
        index = self.index()
        index.reload()
        doc = self._stored(index.searcher(), key)
        if doc is None or doc["live"] != ["true"]:
            return None
        return self._text(doc)

    def _text(self, doc: Mapping[str, Sequence[str]]) -> dict[str, str]:
        return {k: v[0] for k, v in doc.items() if k in self.text_fields}

    def search(self, text: str, limit: int = 10) -> list[str]:
        index = self.index()
        index.reload()
        query = index.parse_query(text, list(self.text_fields))
        live = tantivy.Query.term_query(index.schema, "live", "true")
        both = tantivy.Query.boolean_query([(tantivy.Occur.Must, query), (tantivy.Occur.Must, live)])
        searcher = index.searcher()
        return [searcher.doc(a).to_dict()["key"][0] for _s, a in searcher.search(both, limit).hits]
