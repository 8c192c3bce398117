"""CommandProcessor: decides and appends in Kafka transactions; a restart with the same instance id
takes its partitions back and rebuilds its cache from snapshots, and a retried command id appends
nothing. Run against the local stack:

    set -a; source .stack/env; set +a; .venv/bin/python docs/examples/command_processor.py
"""

from __future__ import annotations

from _stack import drop, running, unique

from eventstore import EventStore, StoreConfig
from shop.order import ORDER, AddLine, CreateOrder

config = StoreConfig.from_env().with_overrides(name=unique("docs-proc"), partitions=2, snapshot_every=5)
try:
    with EventStore(config, ORDER) as store:
        store.init()
        first = store.processor(instance_id="docs-1", batch_size=100, settle_heap=False)
        with running(first), store.client() as client:
            client.execute(CreateOrder(order_id="7", customer_id="c-1"), expected_version=0)
            lines = [AddLine(order_id="7", sku=f"S-{i}", quantity=1, unit_price_cents=100) for i in range(12)]
            pending = [client.send(line, command_id=f"line-{i}") for i, line in enumerate(lines)]  # pipelined
            low, *_, high = sorted(o.last_version for o in client.wait(pending).values())
        t = first.timings
        print(f"first: {t.commands} commands in {t.batches} transactions, versions {low}..{high}")

        # The same instance id again, as after a crash: it fences the old one's transactions.
        second = store.processor(instance_id="docs-1")
        with running(second), store.client() as client:
            retried = client.execute(lines[0], command_id="line-0")  # a client's retry after a timeout
            print("retried line-0: version", retried.last_version, "(its first outcome)")
            print("stream version:", client.load("order-7").version)
        snapshots = sum(r.snapshots_read for r in second.rebuilds)
        decoded = sum(r.events_decoded for r in second.rebuilds)
        print(f"rebuild: {snapshots} snapshots read, {decoded} events decoded")
finally:
    drop(config.name)
