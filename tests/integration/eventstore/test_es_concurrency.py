"""Optimistic concurrency with many writer PROCESSES on shared streams, and kill -9 of the processor."""

from __future__ import annotations

import multiprocessing
import os
import time
from collections import Counter
from typing import Any

import pytest
from es_helpers import contention_worker

from eventstore.client import EventStoreClient
from eventstore.config import StoreConfig
from eventstore.kafkaio import end_offsets, read_to_end, reader
from eventstore.serde import header_map
from shop import order as o

pytestmark = pytest.mark.integration

WORKERS = 8
COMMANDS = int(os.environ.get("EVENTSTORE_CONTENTION_COMMANDS", "200"))
STREAMS = tuple(f"order-s{i}" for i in range(10))


def test_many_writer_processes_keep_versions_gapless(
    store: StoreConfig, start_processor: Any, client: EventStoreClient[Any]
) -> None:
    start_processor("p0")
    start_processor("p1")
    for stream in STREAMS:
        client.execute(
            o.CreateOrder(order_id=stream.removeprefix("order-"), customer_id="c"), expected_version=0
        )
    started = time.monotonic()
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(WORKERS) as pool:
        args = [(store, w, COMMANDS, STREAMS, 1000 + w) for w in range(WORKERS)]
        results = [r for batch in pool.map(contention_worker, args) for r in batch]
    elapsed = time.monotonic() - started
    print(f"{WORKERS} processes x {COMMANDS} commands in {elapsed:.1f}s")

    # No command lost: every command got exactly one outcome.
    assert len(results) == WORKERS * COMMANDS
    assert len({r["command_id"] for r in results}) == WORKERS * COMMANDS
    statuses = Counter(r["status"] for r in results)
    assert statuses["conflict"] > 0 and statuses["ok"] > 0, statuses
    assert set(statuses) <= {"ok", "conflict", "rejected"}

    for stream in STREAMS:
        events = client.read_stream(stream)  # raises CorruptStream on any gap or duplicate
        assert [e.version for e in events] == list(range(1, len(events) + 1))
        by_version = {e.version: e.command_id for e in events}
        mine = [r for r in results if r["stream"] == stream]
        ok = [r for r in mine if r["status"] == "ok"]
        assert len(events) == 1 + sum(r["last"] - r["first"] + 1 for r in ok)
        for r in ok:  # each success owns exactly the versions it was told about
            assert all(by_version[v] == r["command_id"] for v in range(r["first"], r["last"] + 1))
        refused = {r["command_id"] for r in mine if r["status"] != "ok"}
        assert not refused & set(by_version.values())  # every conflict was reported, none appended
        for r in mine:
            if r["status"] == "conflict":
                assert r["expected"] != r["last"]


LINES = 150  # add + remove commands per stream


def test_kill_9_mid_transaction_never_exposes_partial_or_duplicate_events(
    store: StoreConfig, start_processor: Any, client: EventStoreClient[Any]
) -> None:
    proc = start_processor("crashy", batch_size=10)
    # Enough work that 4 kills still find a transaction open: with 60 lines per stream a warm processor
    # sometimes finished every command before the 4th kill (a flake under full-suite load).
    streams = [f"order-k{i}" for i in range(3)]
    for stream in streams:
        client.execute(o.CreateOrder(order_id=stream.removeprefix("order-"), customer_id="c"))
    pending = []
    for i in range(LINES):
        for stream in streams:
            oid = stream.removeprefix("order-")
            pending.append(
                client.send(
                    o.AddLine(order_id=oid, sku=f"s{i}", quantity=1, unit_price_cents=1),
                    command_id=f"{stream}-add-{i}",
                )
            )
            pending.append(
                client.send(o.RemoveLine(order_id=oid, sku=f"s{i}"), command_id=f"{stream}-rm-{i}")
            )
    probe = reader(store.bootstrap_servers, client_config=store.kafka_client)
    raw = reader(
        store.bootstrap_servers, client_config=store.kafka_client, **{"isolation.level": "read_uncommitted"}
    )
    kills = 0
    for _ in range(4):
        # Wait until a transaction is open WITH records in the log: for a read_committed consumer the
        # end offset is the last stable offset, for read_uncommitted the high watermark.
        deadline = time.monotonic() + 60
        while not any(
            end_offsets(raw, store.events_topic, p)[1] > end_offsets(probe, store.events_topic, p)[1]
            for p in range(store.partitions)
        ):
            assert time.monotonic() < deadline, "never caught the processor inside a transaction"
        proc.kill()  # SIGKILL mid-transaction: its records stay in the log, uncommitted
        proc.wait(10)
        kills += 1
        proc = start_processor("crashy", batch_size=10)
    # Retries of already-sent commands (same ids) after the crashes must not append again.
    retried = [
        client.send(
            o.AddLine(order_id="k0", sku=f"s{i}", quantity=1, unit_price_cents=1),
            command_id=f"order-k0-add-{i}",
        )
        for i in range(0, LINES, 7)
    ]
    outcomes = client.wait(pending + retried, timeout=180)
    assert all(outcomes[p.command_id].status == "ok" for p in pending)

    committed: list[Any] = []
    for p in range(store.partitions):
        committed.extend(read_to_end(probe, store.events_topic, p))
    probe.close()
    uncommitted = sum(len(list(read_to_end(raw, store.events_topic, p))) for p in range(store.partitions))
    raw.close()
    command_ids = [header_map(m.headers())["command-id"] for m in committed]
    duplicated = [c for c, n in Counter(command_ids).items() if n > 1]
    assert not duplicated
    assert len(committed) == len(streams) * (1 + 2 * LINES)
    for stream in streams:
        assert [e.version for e in client.read_stream(stream)] == list(range(1, 2 * LINES + 2))
    print(
        f"{kills} kills; {uncommitted - len(committed)} records of aborted transactions hidden from read_committed"
    )
    assert uncommitted > len(committed)  # the kills did leave aborted records behind
