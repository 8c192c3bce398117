"""Search view on OpenSearch: one document per entity, written with the bulk API, idempotent by
external versions (the alternative to the driver-local Tantivy index, `--search-backend opensearch`).

Document `_id` = entity; `_version` = the change's source position as a number (positions.py: a CDC
position is the LSN then one digit, an event's the stream version), written with
`version_type=external`: OpenSearch itself refuses a write whose version is not above the stored one.
Its `_source`: `entity`, `position` (the same number as fixed-width text), `deleted`, and the data
columns as text — the materializer's `search_fields` analysed (`text`), the others exact (`keyword`).
Commit order for a batch (per Spark partition on the executors for a large batch, in the driver for
a small one; the same function either way):
1. fold the changes to each entity's newest, and per column the newest change that carried it
   (the read model's fold, `postgres_table.batch_rows`: a column in `keep_fields`, an unchanged
   TOAST value, is not carried); a batch where no change left a column out (the common one) is
   folded and encoded straight from its Arrow columns (`newest_docs`), with the same result;
2. only for entities whose newest change did not carry every column: `mget` their stored documents
   (real-time, no refresh needed) and fill those columns from them, unless the batch carried the
   column at a position newer than the stored document's (`changes.keeps`);
3. bulk-index every entity's document at version = its position (opensearch_bulk.py: NDJSON encoded
   once, one request in flight while the next is encoded); a delete indexes a tombstone (`deleted`,
   position, no data), so an older upsert arriving later is refused and cannot resurrect it;
4. read the bulk replies: a version conflict is a replayed, duplicated or late change — refused by
   design, not an error; 429s are sent again with backoff; a document OpenSearch cannot hold (a
   mapping error) is returned as a reject (dead letters, with its offset); anything else fails the
   batch, which Spark runs again (every write above is safe to repeat).
No marker is needed: a re-run batch's writes all conflict. A crash mid-bulk leaves some documents
written and the batch uncommitted; the re-run writes the rest. Readers search the alias
(`<prefix>-<materializer>`), which points at the live generation's index; tombstones are filtered out.
Assumption: one job writes an index, and one entity's changes sit in one Spark partition (Kafka's key
partitioning), so step 2's fill is not raced by another writer of the same entity.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from materializers import failpoints
from materializers.decode.changes import keeps, newest_indices
from materializers.errors import MappingConflict, SearchBackendUnavailable
from materializers.truth import Difference, Truth, compare
from materializers.view import Reject, split_refused
from materializers.views.read_model import Row, batch_rows
from materializers.views.redis_cache import REJECT_DDL, REJECT_FIELDS, reject_schema
from materializers.views.search import opensearch_bulk

if TYPE_CHECKING:
    import pyarrow as pa
    from opensearchpy import OpenSearch
    from pyspark.sql import SparkSession

    from materializers.view import FrameBatch, TableBatch

MAX_VERSION = 2**63 - 1  # OpenSearch versions are Java longs
# A keyword longer than this is kept in _source but not indexed: Lucene refuses terms over 32 KiB.
KEYWORD_IGNORE_ABOVE = 8191
CHUNK = opensearch_bulk.CHUNK  # documents per bulk request
MGET_CHUNK = 1000  # ids per real-time `mget` of stored documents
META_FIELDS = {"entity": "keyword", "position": "keyword", "deleted": "boolean"}
COORDINATES = ("src_topic", "src_partition", "src_offset")


# ---------------------------------------------------------------- pure core


def alias_name(prefix: str, materializer: str) -> str:
    """The readers' alias of a materializer's search index (pure): `<prefix>-<name>`, lowercased and
    with what OpenSearch refuses in index names (`:`, `*`, `/`, spaces, ...) replaced by `-`."""
    return re.sub(r"[^a-z0-9._-]", "-", f"{prefix}-{materializer}".lower()).lstrip("-_.")


def version_of(position: str) -> int:
    """A position as OpenSearch's external version; ValueError when it does not fit a long."""
    version = int(position)
    if version > MAX_VERSION:
        raise ValueError(f"position {position} is beyond OpenSearch's largest version ({MAX_VERSION})")
    return version


def mappings(search_fields: tuple[str, ...], data_columns: tuple[str, ...]) -> dict[str, Any]:
    """The index mapping from the spec: search fields analysed, every other column exact."""
    props: dict[str, Any] = {name: {"type": kind} for name, kind in META_FIELDS.items()}
    for column in data_columns:
        props[column] = (
            {"type": "text"}
            if column in search_fields
            else {"type": "keyword", "ignore_above": KEYWORD_IGNORE_ABOVE}
        )
    # strict: a field the spec does not name is refused, not silently mapped by guessing its type
    return {"dynamic": "strict", "properties": props}


def conflicts(wanted: Mapping[str, Any], found: Mapping[str, Any]) -> list[str]:
    """`column: has X, needs Y` for each field an existing index maps differently (pure)."""
    have = found.get("properties", {})
    problems = []
    for name, spec in wanted["properties"].items():
        held = have.get(name, {}).get("type")
        if held is not None and held != spec["type"]:
            problems.append(f"{name}: mapped as {held}, needs {spec['type']}")
    return problems


def needs_stored(row: Row, columns: tuple[str, ...]) -> bool:
    """Whether a column must come from the stored document: the newest change did not carry it."""
    return not row.deleted and any(row.carried.get(c) != row.position for c in columns)


def sources(rows: Sequence[Mapping[str, Any]]) -> dict[str, tuple[str, int, int]]:
    """Each entity's newest change's Kafka coordinates (topic, partition, offset): where a reject
    of its document points (pure)."""
    newest = sorted(rows, key=lambda r: r["position"])
    return {r["entity"]: (r["src_topic"], r["src_partition"], r["src_offset"]) for r in newest}


def document(row: Row, stored: Mapping[str, Any] | None, columns: tuple[str, ...]) -> dict[str, Any]:
    """The `_source` to index (pure): a tombstone, or each column's newest value — the batch's where
    it carried one newer than `stored` (the stored `_source`, None if absent), else the stored one."""
    held_at = stored.get("position") if stored else None
    values = (
        (
            column,
            (stored or {}).get(column) if keeps(row.carried.get(column), held_at) else row.values.get(column),
        )
        for column in columns
    )
    return _body(row.key, row.position, row.deleted, values)


def _body(entity: str, position: str, deleted: bool, values: Iterable[tuple[str, Any]]) -> dict[str, Any]:
    """A tombstone, or the document with each column's value as text (a null is left out)."""
    body: dict[str, Any] = {"entity": entity, "position": position, "deleted": deleted}
    if not deleted:
        body.update((column, str(value)) for column, value in values if value is not None)
    return body


def whole_changes(columns: Mapping[str, Sequence[Any]]) -> bool:
    """Whether every change of a batch (in columns) carried every column: no TOAST placeholder."""
    return not any(columns["keep_fields"])  # null or empty: nothing kept


def newest_docs(
    index: str, columns: Mapping[str, Sequence[Any]], data_columns: tuple[str, ...]
) -> tuple[list[opensearch_bulk.Doc], list[tuple[str, str]]]:
    """(bulk actions, (entity, why) refused) of a `whole_changes` batch (pure): steps 1 and 3 of the
    module docstring straight from the batch's columns, each entity's newest change as it came (no
    stored document can hold a newer column). The general path's per-row records and per-column
    fold cost more than the encoding itself: from the columns, a backfill's Python work is about a
    third of it per change."""
    entities, positions, ops = columns["entity"], columns["position"], columns["op"]
    data = [columns[c] for c in data_columns]
    docs, refused = [], []
    for i in newest_indices(entities, positions, [None] * len(entities), ()).rows:
        entity, position = entities[i], positions[i]
        if not _fits(position):
            refused.append((entity, f"position {position} does not fit OpenSearch's version"))
            continue
        body = _body(
            entity, position, ops[i] == "delete", zip(data_columns, (d[i] for d in data), strict=True)
        )
        docs.append((entity, opensearch_bulk.encode(index, entity, version_of(position), body)))
    return docs, refused


def bulk_doc(index: str, row: Row, body: Mapping[str, Any]) -> opensearch_bulk.Doc:
    """One bulk action (pure): index the document at version = its position, refused unless newer."""
    return row.key, opensearch_bulk.encode(index, row.key, version_of(row.position), body)


@functools.lru_cache(maxsize=8)
def _client(url: str, timeout_s: float) -> OpenSearch:
    """One client (its connection pool) per address and process: a Python worker writes every batch's
    partitions, and the demo's probes read many times a second, each over a kept-alive connection."""
    from opensearchpy import OpenSearch

    return OpenSearch(hosts=[url], timeout=timeout_s, max_retries=2, retry_on_timeout=True)


# ---------------------------------------------------------------- the adapter


@dataclass(frozen=True, slots=True, kw_only=True)
class OpenSearchIndex:
    """One generation's index (`index`) behind the readers' alias (`alias`). `replicas` None: as
    many as the cluster can place, at most one (0 on a single node)."""

    url: str
    alias: str
    index: str
    search_fields: tuple[str, ...]
    data_columns: tuple[str, ...]
    replicas: int | None = None
    timeout_s: float = 30.0
    failpoint: str = ""  # tests: "search-mid-bulk:<marker>" holds the writer after its first request

    def client(self) -> OpenSearch:
        return _client(self.url, self.timeout_s)

    def _unavailable(self, exc: Exception) -> SearchBackendUnavailable:
        return SearchBackendUnavailable(
            f"OpenSearch at {self.url} does not answer for index {self.index!r} ({type(exc).__name__}: "
            f"{str(exc)[:300]}); start it (`STACK_OPENSEARCH=1 devstack up`) or point OPENSEARCH_URL / "
            "--opensearch-url at it, or use --search-backend tantivy"
        )

    def check(self) -> None:
        """Fail fast, before anything is written: the cluster answers and an existing index fits."""
        from opensearchpy.exceptions import OpenSearchException

        try:
            client = self.client()
            client.cluster.health()
            exists = client.indices.exists(index=self.index)
            found = client.indices.get_mapping(index=self.index)[self.index]["mappings"] if exists else {}
        except OpenSearchException as exc:
            raise self._unavailable(exc) from exc
        problems = conflicts(mappings(self.search_fields, self.data_columns), found)
        if problems:
            raise MappingConflict(
                f"index {self.index!r} at {self.url} cannot hold the materializer's columns ("
                + "; ".join(problems)
                + "); delete the index or rebuild into a new one (`materializers rebuild`)"
            )

    def ensure(self) -> None:
        """Create the index (mapping from the spec) and, if no index has the alias yet, point it here."""
        from opensearchpy.exceptions import OpenSearchException, RequestError

        self.check()
        try:
            client = self.client()
            if not client.indices.exists(index=self.index):
                body = {"settings": {"number_of_replicas": self._replicas(client)}}
                try:
                    client.indices.create(
                        index=self.index,
                        body={**body, "mappings": mappings(self.search_fields, self.data_columns)},
                    )
                except RequestError as exc:  # created meanwhile by another process: fine
                    if exc.error != "resource_already_exists_exception":
                        raise
            if not client.indices.exists_alias(name=self.alias):
                client.indices.put_alias(index=self.index, name=self.alias)
        except OpenSearchException as exc:
            raise self._unavailable(exc) from exc

    def switch_alias(self) -> None:
        """Point the readers' alias at this index, off every other, in ONE `_aliases` request: a
        reader sees the old index or the new one, never none (OpenSearch applies it atomically).
        The index is refreshed first, so the switch never shows a rebuilt index half-searchable."""
        from opensearchpy.exceptions import OpenSearchException

        try:
            client = self.client()
            client.indices.refresh(index=self.index)  # readers must find the rebuilt documents at once
            held = (
                client.indices.get_alias(name=self.alias)
                if client.indices.exists_alias(name=self.alias)
                else {}
            )
            others = [name for name in held if name != self.index]
            moves = [{"remove": {"index": name, "alias": self.alias}} for name in others]
            body = {"actions": [*moves, {"add": {"index": self.index, "alias": self.alias}}]}
            client.indices.update_aliases(body=body)
        except OpenSearchException as exc:
            raise self._unavailable(exc) from exc

    def drop(self) -> None:
        """Delete this generation's index (a retired generation: the alias no longer points here)."""
        self.client().indices.delete(index=self.index, ignore_unavailable=True)

    def _replicas(self, client: OpenSearch) -> int:
        if self.replicas is not None:
            return self.replicas
        nodes = int(client.cluster.health()["number_of_data_nodes"])
        return min(1, nodes - 1)  # one copy elsewhere where there is an elsewhere

    # --- writes --------------------------------------------------------------------------------

    def apply_columns(self, columns: Mapping[str, Sequence[Any]]) -> list[Reject]:
        """`apply_rows` for a batch in columns (Arrow's `to_pydict`): a `whole_changes` batch, the
        common one, is folded and encoded straight from its columns."""
        if not whole_changes(columns):
            return self.apply_rows(_rows(columns))
        docs, refused = newest_docs(self.index, columns, self.data_columns)
        refused += self._bulk(self.client(), docs)
        return self._rejects(refused, lambda: _rows(columns))

    def apply_rows(self, rows: Sequence[dict[str, Any]]) -> list[Reject]:
        """Steps 1-4 of the module docstring for the change rows of one partition or batch."""
        folded = batch_rows(rows, self.data_columns)
        unfit = [r for r in folded if not _fits(r.position)]
        docs = [r for r in folded if _fits(r.position)]
        client = self.client()
        stored = self._stored(client, [d.key for d in docs if needs_stored(d, self.data_columns)])
        # a generator: each request is encoded while the one before is on the wire
        lines = (bulk_doc(self.index, d, document(d, stored.get(d.key), self.data_columns)) for d in docs)
        refused = [(r.key, f"position {r.position} does not fit OpenSearch's version") for r in unfit]
        refused += self._bulk(client, lines)
        return self._rejects(refused, lambda: rows)

    @staticmethod
    def _rejects(
        refused: list[tuple[str, str]], rows: Callable[[], Sequence[Mapping[str, Any]]]
    ) -> list[Reject]:
        if not refused:
            return []
        where = sources(rows())  # only now: sorting every row for its coordinates cost as much as a fold
        return [(*where[entity], error) for entity, error in refused]

    def _stored(self, client: OpenSearch, entities: list[str]) -> dict[str, dict[str, Any]]:
        if not entities:
            return {}
        from opensearchpy.exceptions import OpenSearchException

        found: dict[str, dict[str, Any]] = {}
        try:
            for at in range(0, len(entities), MGET_CHUNK):  # a backfill partition may hold many TOAST rows
                reply = client.mget(index=self.index, body={"ids": entities[at : at + MGET_CHUNK]})
                found.update((d["_id"], d["_source"]) for d in reply["docs"] if d.get("found"))
        except OpenSearchException as exc:
            raise self._unavailable(exc) from exc
        return found

    def _bulk(self, client: OpenSearch, docs: Iterable[opensearch_bulk.Doc]) -> list[tuple[str, str]]:
        """(entity, error) of each document OpenSearch refused to hold; a failed write fails the batch."""
        from opensearchpy.exceptions import OpenSearchException

        def hold() -> None:
            failpoints.hold(self.failpoint, "search-mid-bulk", f"{CHUNK} documents written")

        try:
            outcomes = opensearch_bulk.write(client, docs, hold)
        except OpenSearchException as exc:
            raise self._unavailable(exc) from exc
        failures = [f"{entity}: {error}" for entity, kind, error in outcomes if kind == "fail"]
        if failures:
            raise SearchBackendUnavailable(
                f"OpenSearch at {self.url} failed {len(failures)} write(s) to {self.index!r}, e.g. "
                f"{failures[0]}; the batch is not committed and runs again (check the cluster's health "
                "and disk watermarks)"
            )
        return [
            (entity, f"OpenSearch refused the document: {error}")
            for entity, kind, error in outcomes
            if kind == "reject"
        ]

    def apply_arrow(self, batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        """`apply_rows` for `DataFrame.mapInArrow` on the executors: Arrow in, reject batches out; a
        decoder's error rows (the one-pass path) are rejected with their error, unapplied.

        Each Arrow batch Spark hands over (`spark.sql.execution.arrow.maxRecordsPerBatch`, 10,000
        rows by default) is written before the next is read, not the whole partition at once: the
        JVM decodes the next batch meanwhile, and a backfill's partition (250,000 rows in a 2M
        bench batch) is never held in Python whole. The end state is the same: an entity seen in
        two of them is written twice, the newer version winning in OpenSearch, and a column the
        later change did not carry is filled from the document the earlier one wrote (read in real
        time, after its bulk was acknowledged)."""
        import pyarrow as pa

        rejects: list[Reject] = []
        for batch in batches:
            refused, batch = split_refused(batch)
            rejects += refused
            rejects += self.apply_columns(batch.to_pydict()) if batch.num_rows else []
        yield pa.RecordBatch.from_pylist(
            [dict(zip(REJECT_FIELDS, r, strict=True)) for r in rejects], schema=reject_schema()
        )

    # --- reads (search, verify, tests) ---------------------------------------------------------

    def refresh(self) -> None:
        """Make this index's acknowledged writes searchable now (else within its refresh interval)."""
        from opensearchpy.exceptions import OpenSearchException

        try:
            self.client().indices.refresh(index=self.index)
        except OpenSearchException as exc:
            raise self._unavailable(exc) from exc

    def search(self, text: str, limit: int = 10) -> list[str]:
        """Keys of the live documents matching `text` in the search fields, best first (via the alias)."""
        query = {
            "bool": {
                "must": {"simple_query_string": {"query": text, "fields": list(self.search_fields)}},
                "filter": {"term": {"deleted": False}},
            }
        }
        reply = self.client().search(index=self.alias, body={"query": query, "size": limit, "_source": False})
        return [hit["_id"] for hit in reply["hits"]["hits"]]

    def read(self, entity: str) -> dict[str, str] | None:
        """The entity's stored columns; None when absent or a tombstone (real-time, no refresh)."""
        reply = self.client().mget(index=self.index, body={"ids": [entity]})["docs"][0]
        if not reply.get("found") or reply["_source"].get("deleted"):
            return None
        return {k: v for k, v in reply["_source"].items() if k in self.data_columns}

    def searchable(self, entities: Sequence[str]) -> dict[str, dict[str, str]]:
        """The live documents of `entities` that a search through the alias finds now, with their
        columns: written AND refreshed (`read` is real-time and so shows a write before any search
        can find it); what commit->searchable latency is measured with."""
        if not entities:
            return {}
        query = {"bool": {"filter": [{"terms": {"entity": list(entities)}}, {"term": {"deleted": False}}]}}
        reply = self.client().search(index=self.alias, body={"query": query, "size": len(entities)})
        hits = reply["hits"]["hits"]
        return {h["_id"]: {k: v for k, v in h["_source"].items() if k in self.data_columns} for h in hits}

    def live_documents(self) -> dict[str, dict[str, str]]:
        """Every live document's columns, of this generation's index (what `verify` compares)."""
        from opensearchpy import helpers

        self.refresh()
        hits = helpers.scan(self.client(), index=self.index, query={"query": {"term": {"deleted": False}}})
        return {h["_id"]: {k: v for k, v in h["_source"].items() if k in self.data_columns} for h in hits}


def _rows(columns: Mapping[str, Sequence[Any]]) -> list[dict[str, Any]]:
    return [dict(zip(columns, row, strict=True)) for row in zip(*columns.values(), strict=True)]


def _fits(position: str) -> bool:
    try:
        version_of(position)
    except ValueError:
        return False
    return True


# ---------------------------------------------------------------- the view


@dataclass(frozen=True, slots=True)
class OpenSearchView:
    """The search view on OpenSearch (see the module docstring); named `search` like the Tantivy one,
    so `--views search` and the failpoint `after-search` mean the same on either backend."""

    index: OpenSearchIndex
    name: str = "search"
    parallel: bool = True  # its work runs in OpenSearch and on the executors
    single_pass: bool = True  # `apply_arrow` rejects a decoder's error rows itself

    def columns(self) -> tuple[str, ...]:
        return ("entity", "position", "op", "keep_fields", *self.index.data_columns, *COORDINATES)

    def check(self) -> None:
        self.index.check()

    def prepare(self, spark: SparkSession) -> None:
        self.index.ensure()

    def in_driver(self, rows: int) -> bool:
        return True

    def collects(self, rows: int) -> bool:
        return False  # written from the executors, where Spark read the records

    def apply_table(self, batch: TableBatch) -> list[Reject]:
        rejects = self.index.apply_columns(batch.table.select(list(self.columns())).to_pydict())
        self.index.refresh()
        return rejects

    def apply_frame(self, batch: FrameBatch) -> list[Reject]:
        """Each partition bulk-writes its own changes from its executor, all at once; only the
        rejects (few) come back to the driver. Then one refresh: a batch's documents are
        searchable when it commits, not up to a refresh interval (OpenSearch's default: 1 s) later;
        one request per micro-batch, fewer than the interval's own during a backfill."""
        changes = batch.changes
        columns = [*self.columns(), *(["error"] if "error" in changes.columns else [])]
        found = changes.select(*columns).mapInArrow(self.index.apply_arrow, REJECT_DDL).collect()
        self.index.refresh()
        return [(r["topic"], r["partition"], r["offset"], r["error"]) for r in found]

    def compact(self, spark: SparkSession, rows: int | None) -> None:
        return None  # OpenSearch merges segments itself

    def verify(self, truth: Truth) -> list[Difference]:
        """The live documents' columns against the source (the columns the source has for each row)."""
        columns = set(self.index.data_columns)
        expected = {e: {k: v for k, v in row.items() if k in columns} for e, row in truth.rows.items()}
        return compare(self.name, expected, self.index.live_documents())
