"""JVM artefacts from Maven Central, fetched once into a cache outside git and reused.

Layout under the cache (default ~/.cache/kafka-toolkit, override with TOOLKIT_CACHE):
  kafka-<v>/lib/*.jar                          broker + Connect worker + log4j binding (one classpath)
  debezium-<v>/plugins/debezium-connector-postgres/*.jar   Connect plugin.path entry
  toolkit-plugins-<hash>/plugins/kafka-toolkit-oversize-router/*.jar   the toolkit's own Connect
                                               plugin, built from connect-plugins/ (hash of its sources)
  apicurio-converter-<v>/plugins/apicurio-avro-converter/*.jar   Apicurio's Connect AvroConverter (Avro
                                               CDC records) with its dependencies, minus the Kafka jars,
                                               and the toolkit's schema resolver (connect-plugins/)
  apicurio-<v>/.../quarkus-run.jar             schema registry (Quarkus fast-jar)
  spark-<v>-delta-<v>/jars/*.jar               spark.jars: Kafka source, Avro, Delta (a Spark start needs no network)
  opensearch-<v>/lib/*.jar                     an OpenSearch node (server, HTTP transport, analysis, Painless)
  opensearch-launcher-<hash>/classes/          OpenSearchNode.class, compiled with javac from the source
                                               shipped in this package (hash of the source and the version)
Each directory is written under a temporary name and renamed when complete, so an interrupted fetch
never leaves a half-filled directory that looks usable.
"""

from __future__ import annotations

import hashlib
import importlib.util
import logging
import os
import re
import shutil
import subprocess
import tarfile
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from devstack.errors import ArtifactFetchFailed, PrerequisiteMissing
from devstack.pins import REPO_ROOT, Pins

log = logging.getLogger(__name__)

POM_TEMPLATE = """<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>kafka-toolkit.fetch</groupId><artifactId>{name}</artifactId><version>0</version>
  <packaging>pom</packaging>
  <dependencies>
{deps}
  </dependencies>
</project>
"""


def cache_root(environ: dict[str, str] | None = None) -> Path:
    env = os.environ if environ is None else environ
    return Path(env.get("TOOLKIT_CACHE") or Path.home() / ".cache" / "kafka-toolkit")


@dataclass(frozen=True, slots=True)
class Artifacts:
    """Where each fetched piece lives; paths exist only after `fetch_all`."""

    root: Path
    pins: Pins

    @property
    def kafka_lib(self) -> Path:
        return self.root / f"kafka-{self.pins.kafka}" / "lib"

    @property
    def debezium_plugins(self) -> Path:
        return self.root / f"debezium-{self.pins.debezium}" / "plugins"

    @property
    def toolkit_plugins(self) -> Path:
        return (
            self.root
            / f"toolkit-plugins-{_sources_digest(CONNECT_PLUGIN_SOURCES, self.pins.kafka)}"
            / "plugins"
        )

    @property
    def apicurio_converter_plugins(self) -> Path:
        return self.root / f"apicurio-converter-{self.pins.apicurio_converter}" / "plugins"

    @property
    def plugin_path(self) -> str:
        """Connect's plugin.path: Debezium's plugins, the toolkit's own and Apicurio's Avro converter."""
        return f"{self.debezium_plugins},{self.toolkit_plugins},{self.apicurio_converter_plugins}"

    @property
    def apicurio_dir(self) -> Path:
        return self.root / f"apicurio-{self.pins.apicurio}"

    @property
    def spark_jars_dir(self) -> Path:
        return self.root / f"spark-{self.pins.spark}-delta-{self.pins.delta}" / "jars"

    @property
    def opensearch_lib(self) -> Path:
        return self.root / f"opensearch-{self.pins.opensearch}" / "lib"

    @property
    def opensearch_launcher(self) -> Path:
        digest = _sources_digest(OPENSEARCH_LAUNCHER.parent, self.pins.opensearch, only=OPENSEARCH_LAUNCHER)
        return self.root / f"opensearch-launcher-{digest}" / "classes"

    def apicurio_jar(self) -> Path:
        found = sorted(self.apicurio_dir.rglob("quarkus-run.jar"))
        if not found:
            raise ArtifactFetchFailed(f"no quarkus-run.jar under {self.apicurio_dir}; run `make fetch` again")
        return found[0]


def _dep(coord: str) -> str:
    group, artifact, version = coord.split(":")
    return (
        f"    <dependency><groupId>{group}</groupId><artifactId>{artifact}</artifactId>"
        f"<version>{version}</version></dependency>"
    )


def _mvn(args: list[str], cwd: Path) -> None:
    if shutil.which("mvn") is None:
        raise PrerequisiteMissing("Maven (mvn) is not installed; install it with `apt-get install -y maven`")
    proc = subprocess.run(["mvn", "-B", "-q", *args], cwd=cwd, capture_output=True, text=True)
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).splitlines()[-25:])
        raise ArtifactFetchFailed(
            f"mvn {' '.join(args)} failed (exit {proc.returncode}); is Maven Central reachable?\n{tail}"
        )


def _build_atomically(target: Path, build: Callable[[Path], None]) -> None:
    if target.is_dir():
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
    try:
        build(staging)
        staging.rename(target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _copy_dependencies(name: str, coords: Iterable[str], into: Path) -> None:
    with tempfile.TemporaryDirectory() as work:
        pom = Path(work) / "pom.xml"
        pom.write_text(POM_TEMPLATE.format(name=name, deps="\n".join(_dep(c) for c in coords)))
        _mvn(
            ["dependency:copy-dependencies", f"-DoutputDirectory={into}", "-DincludeScope=runtime"],
            Path(work),
        )


def _fetch_archive(coord: str, into: Path) -> None:
    """Download a tar.gz artefact (group:artifact:version:classifier) and unpack it into `into`."""
    group, artifact, version, classifier = coord.split(":")
    with tempfile.TemporaryDirectory() as work:
        _mvn(
            [
                "dependency:copy",
                f"-Dartifact={group}:{artifact}:{version}:tar.gz:{classifier}",
                f"-DoutputDirectory={work}",
            ],
            Path(work),
        )
        archive = next(Path(work).glob("*.tar.gz"))
        with tarfile.open(archive) as tar:
            tar.extractall(into, filter="data")


def fetch_kafka(arts: Artifacts) -> None:
    p = arts.pins
    coords = [
        f"org.apache.kafka:kafka_{p.scala}:{p.kafka}",
        f"org.apache.kafka:connect-runtime:{p.kafka}",
        # Kafka 4.x logs through SLF4J 1.7 and ships no binding: log4j2 provides it.
        f"org.apache.logging.log4j:log4j-slf4j-impl:{p.log4j}",
        f"org.apache.logging.log4j:log4j-core:{p.log4j}",
    ]
    _build_atomically(arts.kafka_lib.parent, lambda d: _copy_dependencies("kafka", coords, d / "lib"))


def fetch_debezium(arts: Artifacts) -> None:
    coord = f"io.debezium:debezium-connector-postgres:{arts.pins.debezium}:plugin"
    _build_atomically(arts.debezium_plugins.parent, lambda d: _fetch_archive(coord, d / "plugins"))


def _plugin_sources(folder: str) -> Path:
    """A Java plugin's sources in the checkout, else the copy an installed toolkit carries (package
    `devstack.<folder with underscores>`, mapped to the same folder by pyproject.toml)."""
    checkout = REPO_ROOT / "connect-plugins" / folder
    return checkout if checkout.is_dir() else Path(__file__).with_name(folder.replace("-", "_"))


CONNECT_PLUGIN_SOURCES = _plugin_sources("oversize-router")
SCHEMA_RESOLVER_SOURCES = _plugin_sources("schema-resolver")


def _sources_digest(root: Path, *salt: str, only: Path | None = None) -> str:
    """Names the build after what it is built from, so an edited source is built again, never reused."""
    digest = hashlib.sha256("\0".join(salt).encode())
    found = [only] if only else (p for p in root.rglob("*") if p.is_file() and "target" not in p.parts)
    for path in sorted(found):
        digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:12]


def _maven_package(sources: Path, version_flag: str, into: Path) -> list[Path]:
    """`mvn package` a copy of `sources` (-D`version_flag`); its jars, copied into `into`."""
    with tempfile.TemporaryDirectory() as work:
        source = Path(work) / "src"
        shutil.copytree(sources, source, ignore=shutil.ignore_patterns("target"))
        _mvn([f"-D{version_flag}", "-DskipTests", "package"], source)
        into.mkdir(parents=True, exist_ok=True)
        return [Path(shutil.copy2(jar, into / jar.name)) for jar in (source / "target").glob("*.jar")]


def fetch_toolkit_plugins(arts: Artifacts) -> None:
    """Build the toolkit's Connect plugin (OversizeRouter) with Maven, against the pinned Kafka."""

    def build(staging: Path) -> None:
        _maven_package(
            CONNECT_PLUGIN_SOURCES,
            f"kafka.version={arts.pins.kafka}",
            staging / "plugins" / "kafka-toolkit-oversize-router",
        )

    _build_atomically(arts.toolkit_plugins.parent, build)


APICURIO_CONVERTER_FOLDER = "apicurio-avro-converter"
# Connect brings its own Kafka API jars; a second copy in a plugin folder would shadow them with
# another version inside the plugin's class loader.
_PROVIDED_BY_CONNECT = frozenset({"kafka-clients", "connect-api", "connect-json", "connect-transforms"})


def fetch_apicurio_converter(arts: Artifacts) -> None:
    """Apicurio's Kafka Connect AvroConverter and its dependencies: a plugin folder of its own."""
    coord = f"io.apicurio:apicurio-registry-utils-converter:{arts.pins.apicurio_converter}"

    def build(staging: Path) -> None:
        into = staging / "plugins" / APICURIO_CONVERTER_FOLDER
        _copy_dependencies("apicurio-converter", [coord], into)
        for jar in into.glob("*.jar"):
            if jar_base_name(jar.name) in _PROVIDED_BY_CONNECT:
                jar.unlink()

    _build_atomically(arts.apicurio_converter_plugins.parent, build)
    install_schema_resolver(arts)


SCHEMA_RESOLVER_JAR = "kafka-toolkit-schema-resolver"


def install_schema_resolver(arts: Artifacts) -> None:
    """Build the toolkit's schema resolver into the converter's folder: the converter loads it by
    name through that folder's class loader. The jar is named after its sources, so a folder that
    holds another build gets this one instead."""
    folder = arts.apicurio_converter_plugins / APICURIO_CONVERTER_FOLDER
    digest = _sources_digest(SCHEMA_RESOLVER_SOURCES, arts.pins.apicurio_converter)
    wanted = folder / f"{SCHEMA_RESOLVER_JAR}-{digest}.jar"
    if wanted.is_file():
        return
    with tempfile.TemporaryDirectory() as work:
        (built,) = _maven_package(
            SCHEMA_RESOLVER_SOURCES, f"apicurio.version={arts.pins.apicurio_converter}", Path(work)
        )
        staged = folder / f".{wanted.name}.tmp"  # Connect reads *.jar only
        shutil.copy2(built, staged)
    for old in folder.glob(f"{SCHEMA_RESOLVER_JAR}-*.jar"):
        old.unlink()
    staged.rename(wanted)


def fetch_apicurio(arts: Artifacts) -> None:
    coord = f"io.apicurio:apicurio-registry-app:{arts.pins.apicurio}:all"
    _build_atomically(arts.apicurio_dir, lambda d: _fetch_archive(coord, d))


_VERSIONED_JAR = re.compile(r"^(?P<base>.+?)-\d+\.[\w.\-]*\.jar$")


def jar_base_name(filename: str) -> str:
    """`jackson-core-2.13.5.jar` -> `jackson-core` (what identifies an artefact across versions)."""
    match = _VERSIONED_JAR.match(filename)
    return match["base"] if match else filename.removesuffix(".jar")


def _pyspark_jar_bases() -> set[str]:
    spec = importlib.util.find_spec("pyspark")
    if spec is None or not spec.submodule_search_locations:
        raise PrerequisiteMissing("pyspark is not installed in this Python; run `make venv`")
    jars = Path(next(iter(spec.submodule_search_locations))) / "jars"
    return {jar_base_name(j.name) for j in jars.glob("*.jar")}


def _drop_jars_spark_has(jars_dir: Path) -> None:
    """Keep only what pyspark lacks: a second, older copy of e.g. jackson on spark.jars breaks Spark."""
    provided = _pyspark_jar_bases()
    for jar in jars_dir.glob("*.jar"):
        if jar_base_name(jar.name) in provided:
            jar.unlink()


def fetch_spark(arts: Artifacts) -> None:
    p = arts.pins
    coords = [
        f"org.apache.spark:spark-sql-kafka-0-10_{p.scala}:{p.spark}",
        f"org.apache.spark:spark-avro_{p.scala}:{p.spark}",
        f"io.delta:delta-spark_{p.scala}:{p.delta}",
    ]

    def build(staging: Path) -> None:
        _copy_dependencies("spark", coords, staging / "jars")
        _drop_jars_spark_has(staging / "jars")

    _build_atomically(arts.spark_jars_dir.parent, build)


# Shipped as package data: an installed toolkit compiles the same launcher.
OPENSEARCH_LAUNCHER = Path(__file__).with_name("OpenSearchNode.java")
OPENSEARCH_PLUGINS = ("transport-netty4-client", "analysis-common", "lang-painless")


def fetch_opensearch(arts: Artifacts) -> None:
    """OpenSearch's server jar and the three modules a node needs here, plus log4j-core (the server
    brings only log4j-api), in the version of the log4j-api it resolves."""
    v = arts.pins.opensearch
    coords = [
        f"org.opensearch:opensearch:{v}",
        *(f"org.opensearch.plugin:{plugin}:{v}" for plugin in OPENSEARCH_PLUGINS),
        f"org.apache.logging.log4j:log4j-core:{arts.pins.log4j}",
    ]
    _build_atomically(
        arts.opensearch_lib.parent, lambda d: _copy_dependencies("opensearch", coords, d / "lib")
    )


def javac_binary() -> str:
    """A javac of JDK 17+ (JAVA_HOME, then PATH); the launcher is compiled for Java 17."""
    home = os.environ.get("JAVA_HOME")
    candidates = [str(Path(home) / "bin" / "javac")] if home else []
    candidates.append(shutil.which("javac") or "")
    for javac in candidates:
        if javac and Path(javac).exists():
            return javac
    raise PrerequisiteMissing(
        "the OpenSearch launcher is compiled at fetch time and no javac was found (JAVA_HOME, PATH); "
        "install a JDK with `apt-get install -y openjdk-17-jdk-headless`"
    )


def fetch_opensearch_launcher(arts: Artifacts) -> None:
    """Compile OpenSearchNode.java against the fetched jars into the cache (needs `fetch_opensearch`)."""

    def build(staging: Path) -> None:
        classpath = f"{arts.opensearch_lib}/*"
        cmd = [javac_binary(), "--release", "17", "-cp", classpath, "-d", str(staging / "classes")]
        proc = subprocess.run([*cmd, str(OPENSEARCH_LAUNCHER)], capture_output=True, text=True)
        if proc.returncode != 0:
            raise ArtifactFetchFailed(
                f"javac could not compile {OPENSEARCH_LAUNCHER} (exit {proc.returncode}); a JDK 17+ is "
                f"needed, and {arts.opensearch_lib} must hold OpenSearch {arts.pins.opensearch}:\n"
                + (proc.stdout + proc.stderr)[-3000:]
            )

    _build_atomically(arts.opensearch_launcher.parent, build)


def fetch_all(arts: Artifacts | None = None) -> Artifacts:
    arts = arts or Artifacts(cache_root(), Pins.load())
    steps = (
        fetch_kafka,
        fetch_debezium,
        fetch_toolkit_plugins,
        fetch_apicurio_converter,
        fetch_apicurio,
        fetch_spark,
        fetch_opensearch,
        fetch_opensearch_launcher,
    )
    for step in steps:
        log.info("fetching %s", step.__name__.removeprefix("fetch_"))
        step(arts)
    return arts
