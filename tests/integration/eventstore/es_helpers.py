"""Helpers shared by the event store integration tests (imported by conftest and tests)."""

from __future__ import annotations

import os
from contextlib import AbstractContextManager
from typing import Any
from unittest.mock import patch

from eventstore import EventStore, StoreConfig
from shop.order import ORDER


def cli_env(config: StoreConfig) -> dict[str, str]:
    return {**os.environ, **config.as_env(), "EVENTSTORE_AGGREGATE": "shop.order:ORDER"}


def in_process_cli(config: StoreConfig) -> AbstractContextManager[dict[str, str]]:
    """The environment a CLI run in this process needs for `config`'s Kafka: its security settings
    (the CLI takes them from the environment only)."""
    return patch.dict(os.environ, config.kafka_client.as_env())


def contention_worker(args: tuple[StoreConfig, int, int, tuple[str, ...], int]) -> list[dict[str, Any]]:
    """One writer process: `n` commands with expected versions on shared streams; returns every outcome."""
    import random

    from shop import order as o

    config, worker, n, streams, seed = args
    rng = random.Random(seed)
    guess = dict.fromkeys(streams, 1)  # the test created every stream (version 1) beforehand
    mine: dict[str, list[str]] = {s: [] for s in streams}
    results = []
    with EventStore(config, ORDER).client(reply_partition=worker % config.partitions) as client:
        for i in range(n):
            stream = rng.choice(streams)
            order_id = stream.removeprefix("order-")
            remove = bool(mine[stream]) and rng.random() < 0.5
            sku = mine[stream][-1] if remove else f"w{worker}-{i}"
            command: Any = (
                o.RemoveLine(order_id=order_id, sku=sku)
                if remove
                else o.AddLine(order_id=order_id, sku=sku, quantity=1, unit_price_cents=1)
            )
            pending = client.send(command, expected_version=guess[stream], command_id=f"w{worker}-{i}")
            outcome = client.wait([pending], timeout=120)[pending.command_id]
            if outcome.status in ("ok", "conflict"):
                guess[stream] = outcome.last_version
            if outcome.status == "ok":
                mine[stream].remove(sku) if remove else mine[stream].append(sku)
            results.append(
                {
                    "command_id": outcome.command_id,
                    "stream": stream,
                    "status": outcome.status,
                    "first": outcome.first_version,
                    "last": outcome.last_version,
                    "expected": outcome.expected_version,
                    "sent_expected": guess[stream] if outcome.status == "ok" else None,
                }
            )
    return results
