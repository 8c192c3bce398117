"""The cluster topology's settings, as the services get them (no process started)."""

from __future__ import annotations

from pathlib import Path

import pytest

from devstack.artifacts import Artifacts
from devstack.config import CLUSTER, SINGLE, StackConfig, choose_ports
from devstack.errors import StackError
from devstack.pins import Pins
from devstack.services import Context, connect_properties, kafka_properties, services
from materializers.config import RunConfig


def _context(tmp_path: Path, topology_name: str) -> Context:
    config = StackConfig.from_env({"STACK_DIR": str(tmp_path), "STACK_TOPOLOGY": topology_name})
    return Context(config, choose_ports(config, running=set()), Artifacts(tmp_path / "cache", Pins.load()))


def test_the_cluster_runs_three_kraft_nodes_two_connect_workers_and_a_spark_master_with_two_workers() -> None:
    names = [s.name for s in services(CLUSTER)]
    assert [n for n in names if n.startswith("kafka")] == ["kafka", "kafka-2", "kafka-3"]
    assert [n for n in names if n.startswith("connect")] == ["connect", "connect-2"]
    assert [n for n in names if n.startswith("spark")] == ["spark-master", "spark-worker", "spark-worker-2"]
    connect = next(s for s in services(CLUSTER) if s.name == "connect-2")
    assert connect.after == ("kafka", "kafka-2", "kafka-3")
    single = [s.name for s in services(SINGLE)]
    assert single == ["postgres", "redis", "kafka", "registry", "connect", "opensearch"]


def test_each_cluster_node_is_broker_and_controller_of_one_quorum_with_rf3_and_min_insync_2(
    tmp_path: Path,
) -> None:
    ctx = _context(tmp_path, "cluster")
    nodes = [kafka_properties(ctx, node) for node in (1, 2, 3)]
    assert [n["node.id"] for n in nodes] == [1, 2, 3]
    assert len({n["controller.quorum.voters"] for n in nodes}) == 1  # one quorum
    assert str(nodes[0]["controller.quorum.voters"]).count("@127.0.0.1:") == 3
    assert len({n["listeners"] for n in nodes}) == 3 and len({str(n["log.dirs"]) for n in nodes}) == 3
    for node in nodes:
        assert node["default.replication.factor"] == 3
        assert node["min.insync.replicas"] == 2
        assert node["transaction.state.log.replication.factor"] == 3
        assert node["transaction.state.log.min.isr"] == 2
        assert node["unclean.leader.election.enable"] == "false"
    workers = [connect_properties(ctx, w) for w in (1, 2)]
    assert workers[0]["group.id"] == workers[1]["group.id"]
    assert workers[0]["listeners"] != workers[1]["listeners"]
    assert {w["offset.storage.replication.factor"] for w in workers} == {3}
    assert str(workers[0]["bootstrap.servers"]).count(",") == 2


def test_the_single_node_keeps_rf1_and_its_old_data_dir(tmp_path: Path) -> None:
    ctx = _context(tmp_path, "single")
    node = kafka_properties(ctx)
    assert node["default.replication.factor"] == 1 and node["min.insync.replicas"] == 1
    assert Path(str(node["log.dirs"])) == tmp_path / "kafka" / "data"
    assert "SPARK_MASTER_URL" not in ctx.endpoints()


def test_the_cluster_env_names_every_broker_the_spark_master_and_the_workers_python(tmp_path: Path) -> None:
    env = _context(tmp_path, "cluster").endpoints()
    assert len(env["KAFKA_BOOTSTRAP_SERVERS"].split(",")) == 3
    assert env["SPARK_MASTER_URL"].startswith("spark://127.0.0.1:")
    assert env["PYSPARK_PYTHON"] == str(tmp_path / "worker-venv" / "bin" / "python")
    # ... and the materializers run there when nothing more specific is set
    run = RunConfig.from_env({"SPARK_MASTER_URL": env["SPARK_MASTER_URL"]})
    assert run.master == env["SPARK_MASTER_URL"]
    assert RunConfig.from_env(
        {"SPARK_MASTER_URL": "spark://a:1", "MATERIALIZERS_MASTER": "local[1]"}
    ).master == ("local[1]")
    assert RunConfig.from_env({}).master == "local[*]"


def test_an_unknown_topology_is_refused_naming_the_setting_and_the_choices() -> None:
    with pytest.raises(
        StackError, match=r"unknown stack topology 'grid' \(STACK_TOPOLOGY or --topology\).*single"
    ):
        StackConfig.from_env({"STACK_TOPOLOGY": "grid"})


def test_the_cluster_keeps_its_own_state_dir_unless_one_is_given(tmp_path: Path) -> None:
    assert StackConfig.from_env({}).with_topology("cluster").state_dir.name == ".stack-cluster"
    assert StackConfig.from_env({"STACK_TOPOLOGY": "cluster"}).state_dir.name == ".stack-cluster"
    given = StackConfig.from_env({"STACK_DIR": str(tmp_path)}).with_topology("cluster")
    assert given.state_dir == tmp_path and given.topology == CLUSTER
