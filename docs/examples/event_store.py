"""EventStore: a store's topics, registry subjects and serde wired once; init, a processor, a
client, reads. Run against the local stack:

    set -a; source .stack/env; set +a; .venv/bin/python docs/examples/event_store.py
"""

from __future__ import annotations

from _stack import drop, running, unique

from eventstore import EventStore, StoreConfig
from shop.order import ORDER, AddLine, CreateOrder, PlaceOrder

# A store of its own per run: its name prefixes every topic and registry subject.
config = StoreConfig.from_env().with_overrides(name=unique("docs-store"), partitions=1)
try:
    with EventStore(config, ORDER) as store:
        report = store.init()  # topics + Avro schemas; repeatable
        print("topics:", ", ".join(f"{topic} {how}" for topic, how in report.topics))
        print("subjects registered:", len(report.schemas))
        with running(store.processor(instance_id="docs-1")), store.client() as client:
            client.execute(CreateOrder(order_id="42", customer_id="c-7"), expected_version=0)
            client.execute(AddLine(order_id="42", sku="A-1", quantity=2, unit_price_cents=250))
            placed = client.execute(PlaceOrder(order_id="42"), expected_version=2)
        print("placed: version", placed.last_version)
        print("events:", " ".join(f"{e.version}:{e.event_type}" for e in store.read("order-42")))
        loaded = store.load("order-42")  # latest snapshot + the events after it
        print(f"state: version {loaded.version}, {loaded.state.status}, total {loaded.state.total_cents}")
        print("init again:", sorted({how for _, how in store.init().topics}))
finally:
    drop(config.name)
