"""The toolkit's pytest plugin on the real stack: its fixtures as a user's tests get them, and the same
stack used as an `external` one from a separate pytest run."""

from __future__ import annotations

import json
import uuid
from dataclasses import replace
from typing import Any

import psycopg
import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic  # type: ignore[attr-defined]

from devstack.connectors import ConnectorFactory
from devstack.crash import wait_until
from devstack.session import StackHandle
from devstack.topics import TopicFactory
from kafkakit.errors import BadStartPosition
from materializers import BadMaterializer, SourceUnavailable
from materializers.runtime.status import read
from shop.products import PRODUCTS

pytestmark = pytest.mark.integration
pytest_plugins = ["pytester"]
# A materializer defined in a test module: the factory's driver process imports it from here.
PLUGIN_PRODUCTS = replace(PRODUCTS, name="plugin_products", builtin_views=("cache",))


def test_topic_factory_makes_unique_ready_topics_and_deletes_them(toolkit_stack: StackHandle) -> None:
    bootstrap = toolkit_stack.endpoints.kafka_bootstrap_servers
    admin = AdminClient({"bootstrap.servers": bootstrap})
    with TopicFactory(bootstrap) as topics:
        compacted = topics("plugin-test", partitions=3, config={"cleanup.policy": "compact"})
        other = topics("plugin-test")
        dlq = topics.created[0] + ".dlq"  # a topic a job derives from its input: deleted with it
        admin.create_topics([NewTopic(dlq, 1, 1)])[dlq].result(30)
        assert compacted != other and compacted.startswith("plugin-test-")
        listed = admin.list_topics(timeout=10).topics
        assert len(listed[compacted].partitions) == 3 and len(listed[other].partitions) == 1
        resource = ConfigResource("topic", compacted)
        config = admin.describe_configs([resource])[resource].result(30)
        assert config["cleanup.policy"].value == "compact"
    made = {compacted, other, dlq}
    wait_until(
        lambda: not made & set(admin.list_topics(timeout=10).topics), timeout_s=30, what="topics deleted"
    )


def test_connector_factory_captures_a_table_through_connects_own_address(
    toolkit_stack: StackHandle, connector_factory: ConnectorFactory
) -> None:
    table = f"public.plugin_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(toolkit_stack.pg_dsn, autocommit=True) as pg:
        pg.execute(f"CREATE TABLE {table} (id int PRIMARY KEY, v text)")  # type: ignore[arg-type]
        pg.execute(f"INSERT INTO {table} VALUES (1, 'snapshot')")  # type: ignore[arg-type]
        try:
            spec = connector_factory.spec([table])
            host_view = connector_factory.as_host_sees_it(spec).database
            if toolkit_stack.backend == "testcontainers":  # Connect reaches Postgres by its network alias
                assert (spec.database.hostname, spec.database.port) == ("postgres", 5432)
                assert spec.database.hostname != host_view.hostname
            elif toolkit_stack.backend.startswith("local"):  # one address for both
                assert spec.database == host_view
            connector_factory.start(spec)
            values = _read(toolkit_stack.kafka_bootstrap_servers, spec.topic_for(table), count=1)
            assert b'"snapshot"' in values[0]
        finally:
            connector_factory.cleanup()
            pg.execute(f"DROP TABLE IF EXISTS {table}")  # type: ignore[arg-type]


def _read(bootstrap: str, topic: str, *, count: int) -> list[bytes]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"plugin-{uuid.uuid4().hex}"})
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        found: list[bytes] = []
        for _ in range(120):
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None and msg.value() is not None:
                found.append(msg.value())
                if len(found) >= count:
                    return found
        raise AssertionError(f"{topic}: {len(found)} of {count} records")
    finally:
        consumer.close()


def test_the_running_stack_serves_a_separate_run_as_an_external_stack(
    toolkit_stack: StackHandle, pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A user's own pytest run pointed at this stack by env: the fixtures work, fault injection is skipped."""
    for name, value in toolkit_stack.endpoints.as_env().items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("TOOLKIT_STACK", "external")
    pytester.makepyfile(
        """
        from confluent_kafka.admin import AdminClient

        def test_topics(toolkit_stack, topic_factory):
            assert toolkit_stack.backend == "external"
            name = topic_factory("user-test", partitions=2)
            admin = AdminClient({"bootstrap.servers": toolkit_stack.kafka_bootstrap_servers})
            assert len(admin.list_topics(name, timeout=10).topics[name].partitions) == 2

        def test_faults(stack_faults):
            raise AssertionError("an external stack cannot crash services: this test must be skipped")
        """
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, skipped=1)


def test_process_groups_and_stack_faults_are_fixtures(process_groups: Any, stack_faults: Any) -> None:
    """Present on a stack this session controls (a local one here); their behaviour: tests/unit/devstack."""
    assert process_groups.started == [] and stack_faults.crashed == []


def test_event_store_factory_runs_a_processor_a_test_can_crash_and_replace(
    event_store_factory: Any, process_groups: Any
) -> None:
    from shop.order import AddLine, CreateOrder

    store = event_store_factory("shop.order:ORDER")
    with store.client() as client:
        assert client.execute(CreateOrder(order_id="t-1", customer_id="c-1")).status == "ok"
        process_groups.crash(store.processors[0])  # kill -9: the next processor takes over
        event_store_factory.start_processor(store, "p1")
        added = client.execute(AddLine(order_id="t-1", sku="A", quantity=2, unit_price_cents=150))
        assert added.status == "ok" and added.last_version == 2
    assert [e.version for e in store.events.read("order-t-1")] == [1, 2]


def test_event_store_factory_refuses_an_aggregate_that_does_not_import(event_store_factory: Any) -> None:
    from kafkakit.errors import ConfigError

    with pytest.raises(ConfigError, match="write module:attribute"):
        event_store_factory("no_such_module:ORDER")
    assert event_store_factory.made == []  # nothing was created


def _products(bootstrap: str, topic: str, changes: list[tuple[int, int, str]]) -> None:
    """Debezium change records (id, LSN, name), as a connector without inline schemas writes them."""
    producer = Producer({"bootstrap.servers": bootstrap})
    for entity, lsn, name in changes:
        after = {"id": entity, "name": name, "description": None, "price": "1.50", "stock": lsn}
        source = {"lsn": lsn, "ts_ms": 1_764_000_000_000 + lsn}
        value = {"before": None, "after": after, "source": source, "op": "u", "ts_ms": source["ts_ms"]}
        producer.produce(topic, key=json.dumps({"id": entity}), value=json.dumps(value))
    assert producer.flush(30) == 0


def test_materializer_factory_runs_a_driver_a_test_can_crash_restart_and_stop(
    toolkit_stack: StackHandle, topic_factory: TopicFactory, materializer_factory: Any, process_groups: Any
) -> None:
    bootstrap = toolkit_stack.kafka_bootstrap_servers
    topic = topic_factory("plugin-mat")
    _products(bootstrap, topic, [(1, 100, "one"), (2, 110, "two"), (3, 120, "three")])
    run = materializer_factory.start(PLUGIN_PRODUCTS, topic=topic)
    assert run.reference == f"{__name__}:PLUGIN_PRODUCTS"
    done = materializer_factory.wait_caught_up(run)
    assert done.offsets == {topic: {"0": 3}}
    cache = run.plan.cache()
    assert {e: v["name"] for e, v in cache.entities().items()} == {"1": "one", "2": "two", "3": "three"}

    assert process_groups.crash(run.process) == -9  # the plugin's own kill -9 of the driver and its JVM
    _products(bootstrap, topic, [(1, 130, "ONE"), (4, 140, "four"), (2, 90, "older: ignored")])
    materializer_factory.restart(run)
    assert materializer_factory.wait_caught_up(run).offsets == {topic: {"0": 6}}
    names = {e: v["name"] for e, v in cache.entities().items()}
    assert names == {"1": "ONE", "2": "two", "3": "three", "4": "four"}

    assert materializer_factory.stop(run) == 0  # SIGTERM: the batch finished, a clean exit
    final = read(run.plan.job_dir)
    assert final is not None and final.state == "stopped"
    home, prefix = run.plan.config.home, run.plan.config.redis_prefix
    materializer_factory.close()  # what the fixture does after the test: its state is gone
    assert not home.exists() and not list(cache.client().scan_iter(match=f"{prefix}:*"))
    admin = AdminClient({"bootstrap.servers": bootstrap})
    wait_until(
        lambda: run.plan.dlq_topic not in admin.list_topics(timeout=10).topics,
        timeout_s=30,
        what="dead-letter topic deleted",
    )


def test_materializer_factory_refuses_what_does_not_load_before_starting_anything(
    topic_factory: TopicFactory, materializer_factory: Any, process_groups: Any
) -> None:
    with pytest.raises(BadMaterializer, match=r"cannot import module 'no_such_module'.*PYTHONPATH"):
        materializer_factory.start("no_such_module:VIEWS")
    with pytest.raises(BadMaterializer, match=r"define it at module level"):
        materializer_factory.start(replace(PLUGIN_PRODUCTS, name="made_here"))
    with pytest.raises(SourceUnavailable, match=r"does not exist"):
        materializer_factory.start(PLUGIN_PRODUCTS, topic=f"no-such-topic-{uuid.uuid4().hex[:8]}")
    with pytest.raises(BadStartPosition):
        materializer_factory.start(PLUGIN_PRODUCTS, topic=topic_factory("plugin-mat"), start="sideways")
    assert process_groups.started == [] and materializer_factory.made == []
