"""The toolkit's five services as Docker containers (testcontainers), for machines with a Docker engine,
and OpenSearch when the stack asks for it (STACK_OPENSEARCH=1, as the local stack).

The same images and tags as docker/compose.yaml — both follow [tool.toolkit.pins] in pyproject.toml —
and the settings of the local-process stack (docker/devstack/services.py), on one Docker network.
tests/unit/test_pins.py checks that this module, the compose file and the pins agree.

Guarantees: `start_container_stack` returns only after every service answered a real probe from the host:
Postgres `select 1`, a Kafka metadata request, Connect's `/connector-plugins` listing the Debezium
PostgresConnector, Redis PING, Apicurio's Confluent-compatible `/subjects`, OpenSearch's cluster health
green or yellow. If a service fails, the containers started so far and the network are removed and
`ServiceNotReady` carries that service's log tail. Host ports are picked free on this machine and bound
explicitly on 127.0.0.1 only (Redis, Kafka, Connect and Apicurio have no passwords, and OpenSearch runs
without its security plugin: as in compose, nothing is published to the network), so a container restarted after `kill()`
keeps its address and `endpoints` stay valid; data lives in the containers' volumes until `stop()`.
Postgres' superuser password is drawn anew for each stack (`new_pg_password`), given to the container
and carried by the DSNs the stack hands out (`endpoints.pg_dsn`, `pg_dsn_for_connect`): a well-known
postgres/postgres would let any local process in, and nothing needs to know it in advance.
Assumptions: the Docker engine is local (the free-port choice is made here, and its loopback is ours)
and testcontainers is installed (`pip install -e '.[dev]'`); import this module lazily from code that
must run without it.
"""

from __future__ import annotations

import base64
import io
import logging
import os
import secrets
import tarfile
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Self
from urllib.parse import quote

from docker.errors import DockerException
from psycopg.conninfo import conninfo_to_dict
from testcontainers.community.postgres import PostgresContainer
from testcontainers.community.redis import PingWaitStrategy, RedisContainer
from testcontainers.core.config import ConnectionMode, testcontainers_config
from testcontainers.core.container import DockerContainer
from testcontainers.core.docker_client import DockerClient
from testcontainers.core.network import Network
from testcontainers.core.wait_strategies import HttpWaitStrategy
from testcontainers.core.waiting_utils import WaitStrategy, WaitStrategyTarget

from devstack import images, opensearch, probes
from devstack.artifacts import (
    APICURIO_CONVERTER_FOLDER,
    Artifacts,
    cache_root,
    fetch_apicurio_converter,
    fetch_toolkit_plugins,
)
from devstack.config import StackConfig, free_port
from devstack.errors import ImagesNotBuilt, PrerequisiteMissing, ServiceNotReady, StackError
from devstack.pins import Pins
from kafkakit.errors import ConfigError
from kafkakit.settings import Endpoints
from materializers.runtime.status import alive

log = logging.getLogger(__name__)

# Network aliases and container ports: what a process *inside* the network (Connect) uses.
PG_ALIAS, PG_PORT = "postgres", 5432
KAFKA_ALIAS, KAFKA_NETWORK_PORT, KAFKA_HOST_LISTENER_PORT = "kafka", 9092, 19092
CONNECT_ALIAS, CONNECT_PORT = "connect", 8083
REDIS_ALIAS, REDIS_PORT = "redis", 6379
REGISTRY_ALIAS, REGISTRY_PORT = "apicurio", 8080
OPENSEARCH_ALIAS, OPENSEARCH_PORT = "opensearch", 9200
# Published ports bind here only: a port on 0.0.0.0 (Docker's default) reaches every network the host is on.
LOOPBACK = "127.0.0.1"
CCOMPAT_PATH = "/apis/ccompat/v7"

# Logical decoding for Debezium; durability traded for speed (a throw-away database whose WAL is still
# written, so slots behave as in production). Same flags as the local stack and docker/compose.yaml:
# synchronous_commit stays on (services.py says why).
PG_COMMAND = (
    "postgres -c wal_level=logical -c max_replication_slots=20 -c max_wal_senders=20"
    " -c max_connections=200 -c shared_buffers=128MB"
    " -c fsync=off -c full_page_writes=off"
)
# No persistence, like the local stack: Redis holds only rebuildable read models.
REDIS_COMMAND = ["redis-server", "--save", "", "--appendonly", "no"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Images:
    """The image each service runs: built here (`devstack images build`, the default) or the official
    ones a registry serves (TOOLKIT_IMAGES=official). Both read the same variables."""

    postgres: str
    kafka: str
    connect: str
    redis: str
    registry: str
    opensearch: str  # started only when the stack asks for it (StackConfig.optional)
    # Built images carry Connect's plugins and need no registry; official ones get the plugins mounted.
    built: bool = True

    @classmethod
    def official(cls, pins: Pins) -> Images:
        """The upstream images of the pinned versions (where a registry answers)."""
        return cls(
            postgres=f"postgres:{pins.postgres}",
            kafka=f"apache/kafka:{pins.kafka}",
            # Debezium publishes its images on quay.io; the tag is the release name (3.6.1.Final).
            connect=f"quay.io/debezium/connect:{pins.debezium}",
            redis=f"redis:{pins.redis}",
            registry=f"apicurio/apicurio-registry:{pins.apicurio}",
            opensearch=f"opensearchproject/opensearch:{pins.opensearch}",
            built=False,
        )

    @classmethod
    def built_here(cls, planned: Mapping[str, images.PlannedImage]) -> Images:
        tag = {name: planned[name].tag for name in images.SERVICE_IMAGES}
        return cls(
            postgres=tag["postgres"], kafka=tag["kafka"], connect=tag["connect"], redis=tag["redis"],
            registry=tag["registry"], opensearch=tag["opensearch"],
        )  # fmt: skip

    def tags(self, optional: frozenset[str] = frozenset()) -> list[str]:
        core = [self.postgres, self.redis, self.registry, self.kafka, self.connect]
        return core + ([self.opensearch] if "opensearch" in optional else [])


def choose_images(
    client: Any, pins: Pins, optional: frozenset[str], environ: Mapping[str, str] | None = None
) -> Images:
    """TOOLKIT_IMAGES=official: the upstream images; otherwise the ones built here, all of which must be
    on the engine at their current tags (a stale image has another tag and counts as missing)."""
    env = os.environ if environ is None else environ
    source = env.get("TOOLKIT_IMAGES", "").strip() or "built"
    if source not in images.IMAGE_SOURCES:
        raise ConfigError(
            f"TOOLKIT_IMAGES={source!r} is not an image source; use built (default) or official"
        )
    if source == "official":
        return Images.official(pins)
    planned = images.plan(Artifacts(cache_root(), pins), images.Base.from_machine(env))
    wanted = [n for n in images.SERVICE_IMAGES if n != "opensearch" or "opensearch" in optional]
    absent = images.missing(client, planned, wanted)
    if absent:
        raise ImagesNotBuilt(
            f"the container stack's images are not on this Docker engine: {', '.join(absent)} (new or changed "
            "inputs); run `devstack images build` (or `make test-containers`), or TOOLKIT_STACK=local"
        )
    return Images.built_here(planned)


def kafka_env() -> dict[str, str]:
    """Broker settings shared with docker/compose.yaml (advertised listeners and cluster id are per start)."""
    return {
        "KAFKA_NODE_ID": "1",
        "KAFKA_PROCESS_ROLES": "broker,controller",
        "KAFKA_CONTROLLER_QUORUM_VOTERS": "1@localhost:9093",
        "KAFKA_CONTROLLER_LISTENER_NAMES": "CONTROLLER",
        "KAFKA_LISTENERS": f"HOST://:{KAFKA_HOST_LISTENER_PORT},DOCKER://:{KAFKA_NETWORK_PORT},CONTROLLER://:9093",
        "KAFKA_LISTENER_SECURITY_PROTOCOL_MAP": "HOST:PLAINTEXT,DOCKER:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "KAFKA_INTER_BROKER_LISTENER_NAME": "DOCKER",
        # Topics are created on purpose with the right cleanup policy; an auto-created one gets neither.
        "KAFKA_AUTO_CREATE_TOPICS_ENABLE": "false",
        "KAFKA_NUM_PARTITIONS": "3",
        # One broker: internal topics with more replicas would never come online (no groups, no transactions).
        "KAFKA_DEFAULT_REPLICATION_FACTOR": "1",
        "KAFKA_MIN_INSYNC_REPLICAS": "1",
        "KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR": "1",
        "KAFKA_OFFSETS_TOPIC_NUM_PARTITIONS": "10",
        "KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR": "1",
        "KAFKA_TRANSACTION_STATE_LOG_MIN_ISR": "1",
        "KAFKA_TRANSACTION_STATE_LOG_NUM_PARTITIONS": "10",
        "KAFKA_SHARE_COORDINATOR_STATE_TOPIC_REPLICATION_FACTOR": "1",
        "KAFKA_SHARE_COORDINATOR_STATE_TOPIC_MIN_ISR": "1",
        "KAFKA_GROUP_INITIAL_REBALANCE_DELAY_MS": "0",
        "KAFKA_LOG_CLEANER_MIN_COMPACTION_LAG_MS": "0",
        "KAFKA_LOG_DIRS": "/var/lib/kafka/data",
        "KAFKA_HEAP_OPTS": "-Xms256m -Xmx512m",
    }


def connect_env() -> dict[str, str]:
    """Worker settings for the Debezium Connect image, identical to docker/compose.yaml's."""
    return {
        "BOOTSTRAP_SERVERS": f"{KAFKA_ALIAS}:{KAFKA_NETWORK_PORT}",
        "GROUP_ID": "toolkit-connect",
        "CONFIG_STORAGE_TOPIC": "_connect-configs",
        "OFFSET_STORAGE_TOPIC": "_connect-offsets",
        "STATUS_STORAGE_TOPIC": "_connect-status",
        "CONNECT_CONFIG_STORAGE_REPLICATION_FACTOR": "1",
        "CONNECT_OFFSET_STORAGE_REPLICATION_FACTOR": "1",
        "CONNECT_STATUS_STORAGE_REPLICATION_FACTOR": "1",
        "KEY_CONVERTER": "org.apache.kafka.connect.json.JsonConverter",
        "VALUE_CONVERTER": "org.apache.kafka.connect.json.JsonConverter",
        "CONNECT_KEY_CONVERTER_SCHEMAS_ENABLE": "true",
        "CONNECT_VALUE_CONVERTER_SCHEMAS_ENABLE": "true",
        "CONNECT_TOPIC_CREATION_ENABLE": "true",
        # After a crash Debezium re-sends at most ~1 s of changes; a restarted single worker gets its
        # connectors back at once instead of after the default 5 minutes.
        "OFFSET_FLUSH_INTERVAL_MS": "1000",
        "CONNECT_SCHEDULED_REBALANCE_MAX_DELAY_MS": "0",
        # The entrypoint binds REST to the container IP by default; bind all so localhost answers too.
        "REST_HOST_NAME": "0.0.0.0",
        "REST_PORT": str(CONNECT_PORT),
        "ADVERTISED_HOST_NAME": CONNECT_ALIAS,
        "ADVERTISED_PORT": str(CONNECT_PORT),
        "HEAP_OPTS": "-Xms1g -Xmx1g",
    }


def registry_env() -> dict[str, str]:
    """Apicurio settings (Quarkus maps APICURIO_X_Y to apicurio.x.y), identical to docker/compose.yaml's."""
    return {
        # H2 on disk, not the in-memory default: Kafka's records keep their schema ids across a registry
        # restart, so the registry must keep the schemas.
        "APICURIO_STORAGE_KIND": "sql",
        "APICURIO_DATASOURCE_URL": "jdbc:h2:file:/tmp/apicurio-registry",
        "APICURIO_REST_DELETION_ARTIFACT_ENABLED": "true",
        "APICURIO_REST_DELETION_ARTIFACT_VERSION_ENABLED": "true",
    }


def opensearch_env() -> dict[str, str]:
    """Node settings for the official image, identical to docker/compose.yaml's opensearch service."""
    return {
        # One node elects itself; bootstrap checks (meant for production hosts) do not apply.
        "discovery.type": "single-node",
        # No security plugin and no demo certificates: plain HTTP like the local node; safe only because
        # the port is published on the loopback alone.
        "DISABLE_SECURITY_PLUGIN": "true",
        "DISABLE_INSTALL_DEMO_CONFIG": "true",
        "OPENSEARCH_JAVA_OPTS": "-Xms512m -Xmx512m",
        # Where `fs` snapshot repositories may live (the materializers' snapshots register one there).
        "path.repo": "/usr/share/opensearch/snapshots",
    }


def publish(container: DockerContainer, port: int, host_port: int) -> None:
    """Publish the container's `port` at 127.0.0.1:`host_port`. testcontainers' `with_bind_ports` takes a
    port only, which Docker binds on every interface; docker-py's run() takes (address, port) too."""
    ports: dict[str, Any] = container.ports
    ports[str(port)] = (LOOPBACK, host_port)


def docker_engine_available(timeout_s: float = 2.0) -> bool:
    """True when a Docker engine answers a ping within `timeout_s` (DOCKER_HOST or the default socket)."""
    try:
        # docker.from_env underneath asks the engine for its API version: an absent engine fails here.
        client = DockerClient(timeout=timeout_s).client
    except (DockerException, OSError):
        return False
    try:
        return bool(client.ping())
    except (DockerException, OSError):
        return False
    finally:
        client.close()


class HostProbe(WaitStrategy):
    """Ready when `probe()` (run on the host, against the mapped port) returns True; no log grepping."""

    def __init__(self, what: str, probe: Callable[[], bool]) -> None:
        super().__init__()
        self._what = what
        self._probe = probe

    def wait_until_ready(self, container: WaitStrategyTarget) -> None:
        exited: list[str] = []

        def check() -> bool:
            if self._probe():
                return True
            if ended := _exit_state(container):  # no use waiting out the timeout for a dead container
                exited.append(ended)
                raise StopIteration
            return False

        if self._poll(check):
            return
        if exited:
            raise RuntimeError(f"the container {exited[0]} before {self._what} answered")
        raise TimeoutError(f"{self._what} did not answer within {self._startup_timeout:.0f} s")


def _exit_state(container: WaitStrategyTarget) -> str | None:
    """'exited with code N' when the container stopped, else None."""
    try:
        wrapped = container.get_wrapped_container()
        wrapped.reload()
    except (DockerException, AttributeError):
        return None
    if wrapped.status not in ("exited", "dead"):
        return None
    return f"exited with code {wrapped.attrs.get('State', {}).get('ExitCode')}"


def _tar(files: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o644
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


class ApacheKafkaContainer(DockerContainer):
    """apache/kafka in KRaft mode, reachable from the host and from the network (kafka:9092).

    testcontainers' KafkaContainer drives Confluent's cp-kafka scripts and rejects tags below 7.0, so it
    cannot run apache/kafka. The host listener must advertise the host-side address, known for sure only
    once the container exists: the command waits for an env file written after start (as testcontainers-
    java does). The file stays in the container, so a restart after a kill comes back the same way.
    """

    _ENV_FILE, _READY_FLAG = "tc-env.sh", "tc-ready"

    def __init__(self, image: str, host_port: int, ready: WaitStrategy) -> None:
        super().__init__(image)
        self._ready = ready
        wait_then_run = (
            f"while [ ! -f /tmp/{self._READY_FLAG} ]; do sleep 0.1; done; "
            f". /tmp/{self._ENV_FILE} && exec /etc/kafka/docker/run"
        )
        self.with_command(["bash", "-c", wait_then_run]).with_envs(**kafka_env())
        # Random per start, in Kafka's Uuid text form (URL-safe base64 of 16 bytes); never hard-coded.
        self.with_env("CLUSTER_ID", base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("="))
        publish(self, KAFKA_HOST_LISTENER_PORT, host_port)

    def get_bootstrap_server(self) -> str:
        return f"{self.get_container_host_ip()}:{self.get_exposed_port(KAFKA_HOST_LISTENER_PORT)}"

    def start(self) -> Self:
        super().start()
        advertised = f"HOST://{self.get_bootstrap_server()},DOCKER://{KAFKA_ALIAS}:{KAFKA_NETWORK_PORT}"
        env_file = f"export KAFKA_ADVERTISED_LISTENERS='{advertised}'\n".encode()
        # One archive, env file first: the flag appears only once the env file is complete.
        self.get_wrapped_container().put_archive(
            "/tmp", _tar({self._ENV_FILE: env_file, self._READY_FLAG: b""})
        )
        self._ready.wait_until_ready(self)
        return self


@dataclass(frozen=True, slots=True)
class RunningService:
    name: str  # the local stack's service names: postgres, redis, kafka, registry, connect, opensearch
    container: DockerContainer
    ready: WaitStrategy


@contextmanager
def _readiness(service: RunningService) -> Iterator[None]:
    try:
        yield
    except (TimeoutError, RuntimeError, DockerException) as exc:
        raise ServiceNotReady(
            f"{service.name} ({_describe(service.container)}) did not become ready: {exc}\n"
            f"--- last log lines ---\n{_log_tail(service.container)}"
        ) from exc


def _describe(container: DockerContainer) -> str:
    """'container NAME, image IMAGE', or the image alone before the container exists."""
    try:
        return f"container {container.get_wrapped_container().name}, image {container.image}"
    except (DockerException, AttributeError):
        return f"image {container.image}"


def _log_tail(container: DockerContainer, lines: int = 40) -> str:
    try:
        stdout, stderr = container.get_logs()
    except (DockerException, RuntimeError):
        return "(no logs: the container was not created)"
    return "\n".join((stdout + stderr).decode(errors="replace").splitlines()[-lines:])


@dataclass(frozen=True, slots=True)
class ContainerStack:
    """A running container stack: host `endpoints`, fault injection (`kill`, `restart`) and `stop()`.

    A Debezium connector runs *inside* the connect container, so its `database.hostname` /
    `database.port` must be `pg_host_for_connect` / `pg_port_for_connect` (Postgres' network alias and
    container port), not the host and port in `endpoints.pg_dsn`, and an Avro connector's `registry.url`
    must be `registry_url_for_connect`. Connect reaches Kafka at `kafka_bootstrap_for_connect`.
    `pg_dsn_for_connect` is the whole DSN as Connect sees it (the host's credentials and database).
    """

    endpoints: Endpoints
    pg_host_for_connect: str
    pg_port_for_connect: int
    kafka_bootstrap_for_connect: str
    registry_url_for_connect: str
    services: tuple[RunningService, ...]  # in start order: Connect after Kafka
    network: Network
    opensearch_url: str | None = None  # None: OpenSearch was not asked for

    @property
    def pg_dsn_for_connect(self) -> str:
        # A URL like the host's own pg_dsn (testcontainers' postgresql://user:password@host:port/db).
        parts = conninfo_to_dict(self.endpoints.pg_dsn)
        login = quote(str(parts.get("user", "postgres")), safe="")
        if parts.get("password"):
            login += ":" + quote(str(parts["password"]), safe="")
        dbname = quote(str(parts.get("dbname", "postgres")), safe="")
        return f"postgresql://{login}@{self.pg_host_for_connect}:{self.pg_port_for_connect}/{dbname}"

    def kill(self, name: str) -> None:
        """kill -9 one service's container, as a crash would; `restart()` brings it back."""
        by_name = {s.name: s for s in self.services}
        if name not in by_name:
            raise StackError(f"no service {name!r} in the container stack; choose one of {sorted(by_name)}")
        by_name[name].container.get_wrapped_container().kill()

    def stopped(self) -> list[str]:
        """Each service whose container is not running, by name with its state and exit code."""
        down = []
        for service in self.services:
            wrapped = service.container.get_wrapped_container()
            try:
                wrapped.reload()
            except DockerException:
                down.append(f"{service.name} (container {wrapped.name}: removed)")
                continue
            if wrapped.status != "running":
                code = wrapped.attrs.get("State", {}).get("ExitCode")
                down.append(f"{service.name} (container {wrapped.name}: {wrapped.status}, exit code {code})")
        return down

    def restart(self) -> None:
        """Start again every container that is not running and wait until each answers its probe."""
        for service in self.services:
            wrapped = service.container.get_wrapped_container()
            wrapped.reload()
            if wrapped.status != "running":
                with _readiness(service):
                    wrapped.start()
                    service.ready.wait_until_ready(service.container)

    def stop(self) -> None:
        _remove([s.container for s in self.services], self.network)

    def __enter__(self) -> ContainerStack:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


def _remove(containers: Sequence[DockerContainer], network: Network) -> None:
    for container in reversed(containers):
        try:
            container.stop()
        except DockerException as exc:
            log.warning("could not remove container %s: %s", container.image, exc)
    try:
        network.remove()
    except DockerException as exc:
        log.warning("could not remove network %s: %s", network.name, exc)


def _http_url(container: DockerContainer, port: int) -> str:
    return f"http://{container.get_container_host_ip()}:{container.get_exposed_port(port)}"


# Debezium's image loads every folder under /kafka/connect as a plugin.
TOOLKIT_PLUGIN_MOUNT = "/kafka/connect/kafka-toolkit-oversize-router"
AVRO_CONVERTER_MOUNT = f"/kafka/connect/{APICURIO_CONVERTER_FOLDER}"


def connect_plugins(pins: Pins) -> dict[str, str]:
    """Host folder -> mount point of the plugins the image lacks: the toolkit's OversizeRouter and
    Apicurio's Avro converter (`format: avro`), built or fetched into the artefact cache."""
    arts = Artifacts(cache_root(), pins)
    fetch_toolkit_plugins(arts)
    fetch_apicurio_converter(arts)
    return {
        str(arts.toolkit_plugins / "kafka-toolkit-oversize-router"): TOOLKIT_PLUGIN_MOUNT,
        str(arts.apicurio_converter_plugins / APICURIO_CONVERTER_FOLDER): AVRO_CONVERTER_MOUNT,
    }


def new_pg_password() -> str:
    """A Postgres password for one container stack: random, URL-safe (it goes into DSNs unescaped)."""
    return secrets.token_urlsafe(18)


def _define(
    refs: Images,
    network: Network,
    timeout: int,
    plugins: Mapping[str, str],
    optional: frozenset[str] = frozenset(),
    *,
    pg_password: str,
    labels: Mapping[str, str] | None = None,
) -> tuple[list[RunningService], Callable[[], Endpoints]]:
    """The five containers and the `optional` ones asked for (configured, not started) with their
    probes, and the five's host endpoints. `pg_password`: the Postgres superuser's; `labels` go on
    every container (`prune` finds a killed session's by them)."""

    def on_network(container: DockerContainer, alias: str, port: int) -> DockerContainer:
        # An explicit host port survives a restart; an ephemeral one would be re-drawn by Docker.
        publish(container, port, free_port())
        return container.with_network(network).with_network_aliases(alias)

    pg = PostgresContainer(
        refs.postgres, username="postgres", password=pg_password, dbname="postgres", driver=None
    )
    pg_ready = HostProbe(
        "Postgres select 1", lambda: probes.postgres(pg.get_connection_url(driver=None), 3.0)
    )
    redis = RedisContainer(refs.redis).with_command(REDIS_COMMAND)
    registry = DockerContainer(refs.registry).with_envs(**registry_env())
    connect = DockerContainer(refs.connect).with_envs(**connect_env())
    for host_folder, mount in plugins.items():
        connect = connect.with_volume_mapping(host_folder, mount, "ro")
    kafka_ready = HostProbe("Kafka metadata request", lambda: probes.kafka(kafka.get_bootstrap_server(), 3.0))
    kafka = ApacheKafkaContainer(refs.kafka, free_port(), kafka_ready.with_startup_timeout(timeout))
    kafka.with_network(network).with_network_aliases(KAFKA_ALIAS)
    services = [
        RunningService("postgres", on_network(pg.with_command(PG_COMMAND), PG_ALIAS, PG_PORT), pg_ready),
        RunningService("redis", on_network(redis, REDIS_ALIAS, REDIS_PORT), PingWaitStrategy()),
        RunningService(
            "registry",
            on_network(registry, REGISTRY_ALIAS, REGISTRY_PORT),
            HttpWaitStrategy(REGISTRY_PORT, f"{CCOMPAT_PATH}/subjects"),
        ),
        RunningService("kafka", kafka, kafka_ready),
        RunningService(
            "connect",
            on_network(connect, CONNECT_ALIAS, CONNECT_PORT),
            HttpWaitStrategy(CONNECT_PORT, "/connector-plugins").for_response_predicate(
                lambda body: probes.POSTGRES_CONNECTOR in body
            ),
        ),
    ]
    if "opensearch" in optional:
        node = DockerContainer(refs.opensearch).with_envs(**opensearch_env())
        node_ready = HostProbe(
            "OpenSearch cluster health green or yellow",
            lambda: opensearch.healthy(_http_url(node, OPENSEARCH_PORT), 3.0),
        )
        services.append(
            RunningService("opensearch", on_network(node, OPENSEARCH_ALIAS, OPENSEARCH_PORT), node_ready)
        )
    stack_id = (labels or {}).get(STACK_LABEL, uuid.uuid4().hex[:8])
    for service in services:
        # Named after the stack and the service, so a log or an error names the container a user can inspect.
        service.container.with_name(f"{images.REPOSITORY}-{stack_id}-{service.name}")
        service.container.with_kwargs(labels=dict(labels or {}))
        service.ready.with_startup_timeout(timeout)
        if service.container is not kafka:  # Kafka waits itself, once its listeners are released
            service.container.waiting_for(service.ready)

    def endpoints() -> Endpoints:  # valid once every container runs
        return Endpoints(
            kafka_bootstrap_servers=kafka.get_bootstrap_server(),
            kafka_connect_url=_http_url(connect, CONNECT_PORT),
            pg_dsn=pg.get_connection_url(driver=None),
            redis_url=f"redis://{redis.get_container_host_ip()}:{redis.get_exposed_port(REDIS_PORT)}/0",
            schema_registry_url=_http_url(registry, REGISTRY_PORT) + CCOMPAT_PATH,
        )

    return services, endpoints


def opensearch_url(services: Sequence[RunningService]) -> str | None:
    """OpenSearch's host address, once its container runs (None: not asked for)."""
    found = [s.container for s in services if s.name == "opensearch"]
    return _http_url(found[0], OPENSEARCH_PORT) if found else None


OWNER_LABEL = f"{images.LABEL}.owner-pid"
STACK_LABEL = f"{images.LABEL}.stack-id"


def stack_labels(owner_pid: int | None = None) -> dict[str, str]:
    """Labels of one stack's containers and network: the toolkit's, the stack's id and the process that
    owns them (`prune` leaves a living owner's stack alone)."""
    return {
        images.LABEL: "stack",
        STACK_LABEL: uuid.uuid4().hex[:8],
        OWNER_LABEL: str(owner_pid or os.getpid()),
    }


def prune(client: Any, *, alive: Callable[[int], bool] = alive) -> list[str]:
    """Remove the containers and networks of stacks whose owning process is gone (a killed test session
    or demo): what Ryuk does elsewhere; Ryuk's image cannot be pulled without a registry. A running
    session's stack is left alone. Returns what was removed."""

    def orphaned(labels: Mapping[str, str]) -> bool:
        pid = int(labels.get(OWNER_LABEL) or 0)
        return not (pid and alive(pid))

    owned = {"label": [f"{images.LABEL}=stack"]}
    removed = []
    for container in client.containers.list(all=True, filters=owned):
        if orphaned(container.labels):
            container.remove(force=True, v=True)
            removed.append(f"container {container.name}")
    for network in client.networks.list(filters=owned):
        if orphaned(network.attrs.get("Labels") or {}):
            network.remove()
            removed.append(f"network {network.name}")
    return removed


def start_container_stack(
    *, pins: Pins | None = None, ready_timeout_s: float = 180.0, optional: frozenset[str] | None = None
) -> ContainerStack:
    """Start Postgres, Redis, Apicurio, Kafka and Connect on one network, and the `optional` services
    (None: the stack's, STACK_OPENSEARCH=1 adds OpenSearch); return once all answer."""
    if not docker_engine_available():
        raise PrerequisiteMissing(
            "no Docker engine answers (DOCKER_HOST or /var/run/docker.sock); start Docker, "
            "or run the services as local processes with `make up`"
        )
    pins = pins or Pins.load()
    wanted = StackConfig.from_env().optional if optional is None else optional
    client = DockerClient().client
    refs = choose_images(client, pins, wanted)
    if refs.built:
        # Ryuk (testcontainers' reaper) is an image from a registry; built stacks are removed by `stop()`,
        # or by `devstack containers prune` after a killed session.
        testcontainers_config.ryuk_disabled = True
    # Ports are published on the loopback only; testcontainers would otherwise address them at the bridge's
    # gateway when it believes it runs inside a container. TC_HOST / TESTCONTAINERS_CONNECTION_MODE win.
    testcontainers_config.tc_host_override = testcontainers_config.tc_host_override or LOOPBACK
    testcontainers_config.connection_mode_override = (
        testcontainers_config.connection_mode_override or ConnectionMode.docker_host
    )
    labels = stack_labels()
    network = Network(docker_network_kw={"labels": labels}).create()
    services, endpoints_of = _define(
        refs,
        network,
        int(ready_timeout_s),
        {} if refs.built else connect_plugins(pins),
        wanted,
        pg_password=new_pg_password(),
        labels=labels,
    )
    started: list[DockerContainer] = []
    try:
        for service in services:
            started.append(service.container)  # before start: a half-started container is removed too
            with _readiness(service):
                service.container.start()
        endpoints = endpoints_of()
        node_url = opensearch_url(services)
    except BaseException:
        _remove(started, network)
        raise
    return ContainerStack(
        endpoints=endpoints,
        pg_host_for_connect=PG_ALIAS,
        pg_port_for_connect=PG_PORT,
        kafka_bootstrap_for_connect=f"{KAFKA_ALIAS}:{KAFKA_NETWORK_PORT}",
        registry_url_for_connect=f"http://{REGISTRY_ALIAS}:{REGISTRY_PORT}",
        services=tuple(services),
        network=network,
        opensearch_url=node_url,
    )
