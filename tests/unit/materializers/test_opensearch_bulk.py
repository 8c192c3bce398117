"""The OpenSearch view's bulk writer without a node: NDJSON as OpenSearch reads it, requests bounded
by count and bytes, 429s sent again, outcomes matched by order, and the mid-bulk hold in its place."""

from __future__ import annotations

import json
from typing import Any

import pytest

from materializers.views.search import opensearch_bulk
from materializers.views.search.opensearch_bulk import chunks, encode, write


def test_each_document_is_an_action_line_and_its_source_with_ids_escaped() -> None:
    lines = encode("idx", 'we"ird\n', 42, {"name": "Tēapot", "deleted": False})
    meta, source = (json.loads(line) for line in lines.decode().splitlines())
    assert lines.endswith(b"\n") and lines.count(b"\n") == 2
    assert meta == {"index": {"_index": "idx", "_id": 'we"ird\n', "version": 42, "version_type": "external"}}
    assert source == {"name": "Tēapot", "deleted": False}


def test_requests_are_bounded_by_documents_and_by_bytes() -> None:
    docs = [(str(i), b"x" * 10) for i in range(7)]
    assert [len(c) for c in chunks(docs, size=3, max_bytes=1000)] == [3, 3, 1]
    assert [len(c) for c in chunks(docs, size=100, max_bytes=25)] == [2, 2, 2, 1]
    assert [len(c) for c in chunks([("big", b"x" * 50), ("1", b"x")], size=9, max_bytes=25)] == [1, 1]
    assert list(chunks([])) == []


class FakeClient:
    """Answers each bulk request from a script of per-item statuses, and records what it was sent."""

    def __init__(self, script: list[list[int]], events: list[str]) -> None:
        self.script, self.events = script, events
        self.sent: list[list[str]] = []

    def bulk(self, *, body: bytes, filter_path: str) -> dict[str, Any]:
        ids = [json.loads(line)["index"]["_id"] for line in body.decode().splitlines()[::2]]
        self.sent.append(ids)
        self.events.append(f"sent {len(ids)}")
        statuses = self.script.pop(0)
        items = [
            {"index": {"status": s, **({"error": {"type": "t", "reason": "r"}} if s >= 300 else {})}}
            for s in statuses
        ]
        return {"errors": any(s >= 300 for s in statuses), "items": items}


def docs(n: int) -> list[opensearch_bulk.Doc]:
    return [(str(i), encode("idx", str(i), i, {"n": i})) for i in range(n)]


def test_outcomes_are_matched_by_order_and_429s_are_sent_again(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("materializers.views.search.opensearch_bulk.time.sleep", lambda _s: None)
    client = FakeClient([[201, 409, 429, 400], [201], [201, 201]], [])
    found = write(client, docs(6), size=4)  # type: ignore[arg-type]
    assert client.sent == [["0", "1", "2", "3"], ["2"], ["4", "5"]]  # only the 429 went again
    assert found == [("1", "stale", "t: r"), ("3", "reject", "t: r")]


def test_a_429_that_outlasts_the_retries_is_a_failure(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("materializers.views.search.opensearch_bulk.time.sleep", lambda _s: None)
    client = FakeClient([[429]] * (opensearch_bulk.RETRIES + 1), [])
    assert write(client, docs(1)) == [("0", "fail", "t: r")]  # type: ignore[arg-type]
    assert len(client.sent) == opensearch_bulk.RETRIES + 1


def test_the_hold_comes_after_the_first_reply_and_before_the_second_request() -> None:
    events: list[str] = []
    client = FakeClient([[201, 201], [201, 201], [201]], events)
    write(client, docs(5), hold=lambda: events.append("hold"), size=2)  # type: ignore[arg-type]
    assert events == ["sent 2", "hold", "sent 2", "sent 1"]
