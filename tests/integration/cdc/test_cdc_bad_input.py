"""Invalid specs are refused with the field named and nothing registered; FAILED tasks make `cdc status` fail;
Avro records the registry cannot resolve are named by position, and a registry the connector cannot reach
or a worker without the toolkit's schema resolver fails its task with the reason in `cdc status` and
`cdc health`."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from cdc_helpers import read_topic, spec_doc, unique, wait_until, write_spec
from confluent_kafka import TopicPartition

from cdc.cli import EXIT_FAILED, EXIT_REFUSED, EXIT_UNAVAILABLE, main
from cdc.connect_client import ConnectClient, ConnectorStatus
from cdc.connector_spec import SCHEMA_RESOLVER_CLASS, ConnectorSpec, DatabaseSpec, RegistrySpec
from cdc.errors import ConnectorConfigInvalid, ConnectorFailed, ConnectorNotFound, PreflightFailed
from cdc.preflight import run_preflight
from devstack.connectors import ConnectorFactory
from devstack.kafka_security import KafkaAccess
from kafkakit.replication import live_brokers

pytestmark = pytest.mark.integration


def test_unknown_table_is_refused_by_preflight_and_not_registered(
    stack: Any,
    connect: ConnectClient,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    cli_flags: list[str],
    preflight_flags: list[str],
) -> None:
    name = unique("bad-table").replace("_", "-")
    path = write_spec(tmp_path, spec_doc(stack, name, ["public.no_such_table_x"]))
    assert main(["apply", str(path), *cli_flags, *preflight_flags]) == EXIT_REFUSED
    err = capsys.readouterr().err
    assert "table.include.list" in err and "public.no_such_table_x does not exist" in err
    assert name not in connect.list_connectors()


def test_table_without_primary_key_is_refused_unless_key_columns_given(
    stack: Any, pg: psycopg.Connection[tuple[Any, ...]], tables: list[str], connectors: ConnectorFactory
) -> None:
    table = f"public.{unique('nopk')}"
    tables.append(f"table:{table}")
    pg.execute(f"CREATE TABLE {table} (code text NOT NULL, v int)")  # type: ignore[arg-type]
    with pytest.raises(PreflightFailed, match="has no primary key"):
        run_preflight(connectors.spec([table]), at=connectors.preflight_at)
    with pytest.raises(PreflightFailed, match=r"no column\(s\) \['nope'\]"):
        run_preflight(
            connectors.spec([table], message_key_columns=((table, ("nope",)),)), at=connectors.preflight_at
        )
    run_preflight(
        connectors.spec([table], message_key_columns=((table, ("code",)),)), at=connectors.preflight_at
    )


def test_wrong_credentials_are_named(
    stack: Any, connect: ConnectClient, connectors: ConnectorFactory
) -> None:
    # The local stack trusts every password, so a role that does not exist stands in for a wrong login.
    base = DatabaseSpec.from_dsn(stack.connect_view.pg_dsn)
    bad_db = DatabaseSpec(
        hostname=base.hostname, port=base.port, user="no_such_role_x", password="wrong", dbname=base.dbname
    )
    spec = connectors.spec(["public.cdc_heartbeat"], database=bad_db)
    with pytest.raises(PreflightFailed, match="no_such_role_x") as info:
        run_preflight(spec, at=connectors.preflight_at)
    assert info.value.problems[0][0].startswith("database.user")
    # Connect's own validate names the same problem, and apply registers nothing.
    with pytest.raises(ConnectorConfigInvalid) as invalid:
        connect.apply(spec.name, spec.to_config())
    fields = dict(invalid.value.field_errors)
    assert any("no_such_role_x" in msg for msg in fields.values())
    assert spec.name not in connect.list_connectors()


def test_misspelled_option_is_named_and_nothing_registered(
    stack: Any,
    connect: ConnectClient,
    connectors: ConnectorFactory,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    cli_flags: list[str],
    preflight_flags: list[str],
) -> None:
    spec = connectors.spec(["public.cdc_heartbeat"], extra={"snapshot.mod": "initial"})
    with pytest.raises(ConnectorConfigInvalid) as invalid:
        connect.apply(spec.name, spec.to_config())
    assert [f for f, _ in invalid.value.field_errors] == ["snapshot.mod"]
    assert spec.name not in connect.list_connectors()
    path = write_spec(
        tmp_path, spec_doc(stack, spec.name, ["public.cdc_heartbeat"], extra={"snapshot.mod": "x"})
    )
    assert main(["validate", str(path), "--json", *cli_flags, *preflight_flags]) == EXIT_REFUSED
    out = json.loads(capsys.readouterr().out)
    assert out["valid"] is False and out["errors"][0][0] == "snapshot.mod"


def test_failed_task_makes_status_exit_non_zero(
    pg: psycopg.Connection[tuple[Any, ...]],
    tables: list[str],
    connectors: ConnectorFactory,
    connect: ConnectClient,
    capsys: pytest.CaptureFixture[str],
    cli_flags: list[str],
) -> None:
    """A record the connector cannot process fails its task: here an SMT extracting a field that the
    change envelope does not have (Connect throws DataException; errors.tolerance=none fails the task).
    (Dropping a captured table also failed the task on Debezium 3.6.1, but not every time.)"""
    table = f"public.{unique('fail')}"
    tables.append(f"table:{table}")
    pg.execute(f"CREATE TABLE {table} (id serial PRIMARY KEY)")  # type: ignore[arg-type]
    broken = {
        "transforms": "pick",
        "transforms.pick.type": "org.apache.kafka.connect.transforms.ExtractField$Value",
        "transforms.pick.field": "no_such_field",
    }
    spec = connectors.start(connectors.spec([table], extra=broken), wait=False)

    def status_after_a_change() -> ConnectorStatus | None:
        pg.execute(f"INSERT INTO {table} DEFAULT VALUES")  # type: ignore[arg-type]
        try:
            return connect.status(spec.name)
        except ConnectorNotFound:  # Connect answers 404 until the new connector's status is stored
            return None

    status = wait_until(status_after_a_change, lambda s: s is not None and s.failed, timeout=60)
    assert status is not None and status.failure_trace and "Exception" in status.failure_trace
    with pytest.raises(ConnectorFailed, match="FAILED"):
        connect.wait_running(spec.name, timeout=5)
    capsys.readouterr()
    assert main(["status", spec.name, *cli_flags]) == EXIT_FAILED
    captured = capsys.readouterr()
    assert "FAILED" in captured.out and "failure trace" in captured.out
    assert main(["status", spec.name, "--json", *cli_flags]) == EXIT_FAILED
    doc = json.loads(capsys.readouterr().out)
    assert doc[0]["failed"] is True


def _table_with_a_row(pg: psycopg.Connection[tuple[Any, ...]], tables: list[str], prefix: str) -> str:
    table = f"public.{unique(prefix)}"
    tables.append(f"table:{table}")
    pg.execute(f"CREATE TABLE {table} (id int PRIMARY KEY, v text)")  # type: ignore[arg-type]
    pg.execute(f"INSERT INTO {table} VALUES (1, 'one')")  # type: ignore[arg-type]
    return table


@pytest.mark.parametrize("connector_format", ["avro"], indirect=True)
def test_avro_records_with_an_unknown_schema_id_or_bad_bytes_are_named_and_skippable(
    stack: Any,
    kafka: KafkaAccess,
    pg: psycopg.Connection[tuple[Any, ...]],
    tables: list[str],
    connectors: ConnectorFactory,
    capsys: pytest.CaptureFixture[str],
    cli_flags: list[str],
) -> None:
    table = _table_with_a_row(pg, tables, "badavro")
    spec = connectors.start(connectors.spec([table]))
    topic = spec.topic_for(table)
    [good] = read_topic(kafka, topic, until=lambda rs: len(rs) >= 1)
    assert good.key is not None and good.value is not None and good.value[0] == 0
    unknown_id = good.value[:1] + (2**31 - 7).to_bytes(4, "big") + good.value[5:]
    producer = kafka.producer()
    for value in (unknown_id, good.value[:12]):  # offsets 1 and 2
        producer.produce(topic, key=good.key, value=value)
    producer.flush(10)
    pg.execute(f"INSERT INTO {table} VALUES (2, 'two')")  # type: ignore[arg-type]  # offset 3
    read_topic(kafka, topic, until=lambda rs: len(rs) >= 4)

    flags = [*cli_flags, "--registry-url", stack.schema_registry_url]
    tail = ["tail", topic, "--from-beginning", "--idle-timeout", "3", *flags]
    capsys.readouterr()
    assert main(tail) == EXIT_REFUSED  # --on-error stop: the first bad record ends it, named
    stopped = capsys.readouterr()
    assert [json.loads(line)["after"]["id"] for line in stopped.out.splitlines()] == [1]
    assert f"{topic}[0]@1" in stopped.err and f"schema id {2**31 - 7} is unknown" in stopped.err
    assert main([*tail, "--on-error", "skip", "--json"]) == EXIT_REFUSED
    out = capsys.readouterr()
    assert [json.loads(line)["after"]["id"] for line in out.out.splitlines()] == [1, 2]
    skipped = [json.loads(line) for line in out.err.splitlines()]
    assert [s["skipped"] for s in skipped] == [
        {"topic": topic, "partition": 0, "offset": 1},
        {"topic": topic, "partition": 0, "offset": 2},
    ]
    assert "is unknown" in skipped[0]["error"] and "do not decode with writer schema" in skipped[1]["error"]
    # A registry that is away is no record's fault: tail stops as for any unreachable service.
    away = ["tail", topic, "--from-beginning", "--idle-timeout", "3", "--on-error", "skip"]
    assert main([*away, *cli_flags, "--registry-url", "http://127.0.0.1:9"]) == EXIT_UNAVAILABLE
    assert "did not answer" in capsys.readouterr().err


def _registry_away(spec: ConnectorSpec) -> dict[str, str]:
    """The shared registry keeps running: this connector is given a registry URL nothing answers at."""
    return replace(spec, registry=RegistrySpec(url="http://127.0.0.1:9")).to_config()


def _resolver_missing(spec: ConnectorSpec) -> dict[str, str]:
    """This worker has the toolkit's resolver: the connector names a class of its package the worker
    lacks, which the converter's plugin loader fails to find as it would the resolver itself."""
    config = spec.to_config()
    return {
        k: ("kafkatoolkit.registry.NotInstalled" if v == SCHEMA_RESOLVER_CLASS else v)
        for k, v in config.items()
    }


@pytest.mark.parametrize("connector_format", ["avro"], indirect=True)
@pytest.mark.parametrize(
    ("break_", "why"),
    [
        (_registry_away, "registry at http://127.0.0.1:9/apis/registry/v2"),
        (_resolver_missing, "lacks the toolkit's Avro schema resolver"),
    ],
)
def test_an_avro_converter_that_cannot_work_fails_its_task_and_status_and_health_say_why(
    pg: psycopg.Connection[tuple[Any, ...]],
    tables: list[str],
    connectors: ConnectorFactory,
    connect: ConnectClient,
    capsys: pytest.CaptureFixture[str],
    cli_flags: list[str],
    break_: Callable[[ConnectorSpec], dict[str, str]],
    why: str,
) -> None:
    spec = connectors.spec([_table_with_a_row(pg, tables, "noconv")])
    config = break_(spec)
    assert config != spec.to_config()
    connectors.created.append(spec)  # dropped at the end with its slot and publication
    connect.apply(spec.name, config)

    def status() -> ConnectorStatus | None:
        try:
            return connect.status(spec.name)
        except ConnectorNotFound:  # Connect answers 404 until the new connector's status is stored
            return None

    wait_until(status, lambda s: s is not None and s.failed, timeout=90)
    capsys.readouterr()
    assert main(["status", spec.name, *cli_flags]) == EXIT_FAILED
    assert why in capsys.readouterr().out
    assert main(["health", spec.name, "--json", *cli_flags]) == EXIT_FAILED
    warnings = json.loads(capsys.readouterr().out)["warnings"]
    assert any("FAILED" in w and why in w for w in warnings)


@pytest.mark.parametrize("connector_format", ["avro"], indirect=True)
def test_a_column_change_the_registry_rule_refuses_fails_the_task_and_status_names_the_column(
    stack: Any,
    kafka: KafkaAccess,
    pg: psycopg.Connection[tuple[Any, ...]],
    tables: list[str],
    connectors: ConnectorFactory,
    connect: ConnectClient,
    capsys: pytest.CaptureFixture[str],
    cli_flags: list[str],
) -> None:
    """An operator keeps the value subject BACKWARD compatible (consumers on the new schema read the
    old records); `v` going from text to integer breaks that, so the registry refuses the new schema,
    and no record after the change reaches the topic."""
    table = _table_with_a_row(pg, tables, "compat")
    spec = connectors.start(connectors.spec([table]))
    topic = spec.topic_for(table)
    read_topic(kafka, topic, until=lambda rs: len(rs) >= 1)
    base = stack.schema_registry_url.split("/apis/")[0]
    httpx.post(
        f"{base}/apis/registry/v3/groups/default/artifacts/{topic}-value/rules",
        json={"ruleType": "COMPATIBILITY", "config": "BACKWARD"},
        timeout=10,
    ).raise_for_status()
    pg.execute(f"ALTER TABLE {table} ALTER COLUMN v TYPE integer USING length(v)")  # type: ignore[arg-type]
    pg.execute(f"INSERT INTO {table} VALUES (2, 2)")  # type: ignore[arg-type]
    wait_until(lambda: connect.status(spec.name), lambda s: s.failed, timeout=90)
    capsys.readouterr()
    flags = [*cli_flags, "--registry-url", stack.schema_registry_url]
    assert main(["status", spec.name, "--json", *flags]) == EXIT_FAILED
    [doc] = json.loads(capsys.readouterr().out)
    assert "refused the table's new schema under the subject's compatibility rule" in doc["cause"]
    assert "the table changed: v TEXT -> INT4;" in doc["cause"]
    assert main(["health", spec.name, "--json", *flags]) == EXIT_FAILED
    warnings = json.loads(capsys.readouterr().out)["warnings"]
    assert any("FAILED" in w and "v TEXT -> INT4" in w for w in warnings)
    # the row written after the change is held back (Connect retries it after a restart), not lost
    # and not written under a schema the rule refused
    probe = kafka.consumer(**{"group.id": unique("ends")})
    try:
        assert probe.get_watermark_offsets(TopicPartition(topic, 0), timeout=10) == (0, 1)
    finally:
        probe.close()


def test_preflight_logs_in_with_the_connectors_tls_mode_and_names_it_when_refused(
    pg: psycopg.Connection[tuple[Any, ...]], tables: list[str], connectors: ConnectorFactory
) -> None:
    """The local Postgres has no TLS: `database.sslmode=require` must fail pre-flight (libpq's default
    `prefer` would log in without TLS, sending the replication password in clear), naming the setting."""
    table = _table_with_a_row(pg, tables, "tls")
    with pytest.raises(PreflightFailed) as info:
        run_preflight(
            connectors.spec([table], extra={"database.sslmode": "require"}), at=connectors.preflight_at
        )
    [(field, message)] = info.value.problems
    assert field.startswith("database.sslmode") and "does not support SSL" in message
    run_preflight(
        connectors.spec([table], extra={"database.sslmode": "disable"}), at=connectors.preflight_at
    )  # asked for: logs in


def test_a_replication_factor_beyond_the_live_brokers_is_refused_before_anything_is_registered(
    stack: Any,
    kafka: KafkaAccess,
    connect: ConnectClient,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    cli_flags: list[str],
    preflight_flags: list[str],
) -> None:
    brokers = live_brokers(kafka.bootstrap_servers, client_config=kafka.client_config)
    name = unique("rf").replace("_", "-")
    doc = spec_doc(stack, name, ["public.cdc_heartbeat"], topics={"replication_factor": brokers + 1})
    path = write_spec(tmp_path, doc)
    assert main(["apply", str(path), *cli_flags, *preflight_flags]) == EXIT_REFUSED
    err = capsys.readouterr().err
    assert f"topics.replication_factor={brokers + 1}" in err and f"the {brokers} broker(s) alive" in err
    assert name not in connect.list_connectors()
    assert main(["validate", str(path), "--json", *cli_flags, *preflight_flags]) == EXIT_REFUSED
    out = json.loads(capsys.readouterr().out)
    assert [f for f, _ in out["errors"] if f == "topics.replication_factor"] == ["topics.replication_factor"]


def test_a_spec_host_this_machine_cannot_reach_names_preflight_at(connectors: ConnectorFactory) -> None:
    """The spec names Postgres as Connect reaches it; from here that name may not resolve (compose)."""
    spec = connectors.spec(["public.cdc_heartbeat"])
    elsewhere = replace(spec, database=replace(spec.database, hostname="postgres.invalid"))
    with pytest.raises(PreflightFailed) as info:
        run_preflight(elsewhere)
    [(field, message)] = info.value.problems
    assert field == "database.hostname/database.port" and "--preflight-at HOST:PORT" in message
    here = DatabaseSpec.from_dsn(connectors.pg_dsn)
    run_preflight(elsewhere, at=f"{here.hostname}:{here.port}")  # the same server, reached from here
