"""Bulk writes of the OpenSearch search view: each document encoded to NDJSON once, sent in requests
of at most `CHUNK` documents and `CHUNK_BYTES`, with one request in flight while the next is encoded.

Why not opensearch-py's `helpers.streaming_bulk` (used before): it copies every action and encodes it
again through the client's serializer, then sends synchronously, so the Python worker and OpenSearch
took turns — profiled on the executors, a worker spent as long encoding as it waited for replies.
Here the next request is encoded while the current one is on the wire (socket I/O releases the GIL),
and requests are larger: each one costs OpenSearch a translog fsync and a round trip.

Guarantees, as before: reply items are matched to documents by their order in the request; a 429 (a
full write queue), of one item or of the whole request, is sent again after an exponential backoff
(1, 2, 4, 8, 16 s) and counts as a failure after that; every other outcome is returned to the caller.
`hold` runs after the first request is answered and before the second is sent (the failpoint of the
kill -9 mid-bulk test). Nothing is retried that OpenSearch answered otherwise: the caller decides.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from json.encoder import encode_basestring
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from opensearchpy import OpenSearch

# Documents per bulk request: OpenSearch indexes larger requests at a far higher rate per document,
# up to where one request's bytes (CHUNK_BYTES) would be the bound.
CHUNK = 5000
# Bytes per bulk request: well under OpenSearch's http.max_content_length (100 MB by default), which
# refuses a whole request (413) and so would fail every document in it.
CHUNK_BYTES = 10 * 2**20
RETRIES = 5
INITIAL_BACKOFF_S = 1.0
# The reply carries only what is read: 5,000 items' index names, ids, versions and shard counts are
# most of a reply's bytes otherwise.
REPLY_FIELDS = "errors,items.*.status,items.*.error"
_SOURCE = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), check_circular=False)

Doc = tuple[str, bytes]  # (entity, its two NDJSON lines)
Outcome = tuple[str, str, str | None]  # (entity, "stale" | "reject" | "fail", error)


def encode(index: str, entity: str, version: int, body: Mapping[str, Any]) -> bytes:
    """The two NDJSON lines that index `body` as document `entity` at external `version` (pure)."""
    meta = (
        f'{{"index":{{"_index":{encode_basestring(index)},"_id":{encode_basestring(entity)},'
        f'"version":{version},"version_type":"external"}}}}\n'
    )
    return (meta + _SOURCE.encode(body) + "\n").encode()


def chunks(docs: Iterable[Doc], size: int = CHUNK, max_bytes: int = CHUNK_BYTES) -> Iterator[list[Doc]]:
    """The documents in requests of at most `size` documents and `max_bytes` (pure, lazy: a request
    is encoded only when asked for). A document larger than `max_bytes` goes alone; OpenSearch
    answers for it."""
    chunk: list[Doc] = []
    held = 0
    for doc in docs:
        if chunk and (len(chunk) == size or held + len(doc[1]) > max_bytes):
            yield chunk
            chunk, held = [], 0
        chunk.append(doc)
        held += len(doc[1])
    if chunk:
        yield chunk


def outcome(item: Mapping[str, Any]) -> tuple[str, str | None]:
    """('ok' | 'stale' | 'retry' | 'reject' | 'fail', error) of one bulk reply item (pure). Stale: a
    version conflict, i.e. OpenSearch already holds this position or a newer one; retry: a 429."""
    result = next(iter(item.values()))
    status, error = int(result.get("status", 500)), result.get("error")
    if status < 300:
        return "ok", None
    reason = f"{error.get('type')}: {error.get('reason')}" if isinstance(error, dict) else str(error)
    if status == 409:
        return "stale", reason
    if status == 429:
        return "retry", reason
    return ("reject" if status == 400 else "fail"), reason


def write(
    client: OpenSearch, docs: Iterable[Doc], hold: Callable[[], None] = lambda: None, size: int = CHUNK
) -> list[Outcome]:
    """Send every document, `size` per request; return the outcome of each one that was not written
    (see the module docstring). A request that fails as a whole (but for a 429) raises the client's
    exception."""
    outcomes: list[Outcome] = []
    with ThreadPoolExecutor(1, thread_name_prefix="opensearch-bulk") as sender:
        pending: Future[list[Outcome]] | None = None
        for number, chunk in enumerate(chunks(docs, size)):  # encoding this chunk overlapped the last send
            if pending is not None:
                outcomes += pending.result()
                if number == 1:
                    hold()
            pending = sender.submit(send, client, chunk)
        if pending is not None:
            outcomes += pending.result()
    return outcomes


def send(client: OpenSearch, chunk: list[Doc]) -> list[Outcome]:
    """One request, its 429s sent again with backoff; the outcomes of the documents not written."""
    from opensearchpy.exceptions import TransportError

    found: list[Outcome] = []
    backoff = INITIAL_BACKOFF_S
    for attempt in range(RETRIES + 1):
        last = attempt == RETRIES
        try:
            reply = client.bulk(body=b"".join(lines for _entity, lines in chunk), filter_path=REPLY_FIELDS)
        except TransportError as exc:
            if exc.status_code != 429 or last:
                raise
            time.sleep(backoff)
            backoff *= 2
            continue
        if not reply.get("errors"):
            return found
        again: list[Doc] = []
        for doc, item in zip(chunk, reply["items"], strict=True):
            kind, error = outcome(item)
            if kind == "retry" and not last:
                again.append(doc)
            elif kind != "ok":
                found.append((doc[0], "fail" if kind == "retry" else kind, error))
        if not again:
            return found
        chunk = again
        time.sleep(backoff)
        backoff *= 2
    return found
