"""EventStoreClient: send commands and await outcomes, with each refusal as its own exception;
pipelining, a safe retry, reads. Run against the local stack:

    set -a; source .stack/env; set +a; .venv/bin/python docs/examples/event_store_client.py
"""

from __future__ import annotations

from _stack import drop, running, unique

from eventstore import EventStore, SchemaViolation, StoreConfig, WrongExpectedVersion
from shop.order import ORDER, AddLine, CreateOrder, EmptyOrder, PlaceOrder

config = StoreConfig.from_env().with_overrides(name=unique("docs-client"), partitions=1)
try:
    with EventStore(config, ORDER) as store:
        store.init()
        with running(store.processor(instance_id="docs-1")), store.client() as client:
            created = client.execute(CreateOrder(order_id="9", customer_id="c-9"), expected_version=0)
            print("created: version", created.last_version)
            try:
                client.execute(PlaceOrder(order_id="9"), expected_version=0)  # stale: it is at 1
            except WrongExpectedVersion as exc:
                print(f"conflict: expected {exc.expected}, stream at {exc.actual}")
            try:
                client.execute(PlaceOrder(order_id="9"))
            except EmptyOrder as exc:  # the aggregate's DomainError, typed by its code
                print("refused:", exc.code)
            try:
                client.send(AddLine(order_id="9", sku="X", quantity="two", unit_price_cents=1))  # type: ignore[arg-type]
            except SchemaViolation:
                print("invalid: not sent")
            line = {sku: AddLine(order_id="9", sku=sku, quantity=1, unit_price_cents=100) for sku in "ABC"}
            pending = [client.send(command, command_id=f"add-{sku}") for sku, command in line.items()]
            print("pipelined: versions", sorted(o.last_version for o in client.wait(pending).values()))
            again = client.execute(line["A"], command_id="add-A")  # a retry: its first outcome
            print("retry of add-A: version", again.last_version)
            print("stream:", [e.version for e in client.read_stream("order-9")])
finally:
    drop(config.name)
