"""A SparkSession with the Kafka source, Avro and Delta, sized by its master.

Where the Kafka source, Avro and Delta jars come from, first that applies (`locate_jars`):
1. `MATERIALIZERS_SPARK_JARS`: jar files and/or folders of jars, comma-separated (a cluster's own copy,
   or the folder `devstack fetch` fills);
2. the toolkit's jar cache for the installed pyspark and delta-spark versions
   (`$TOOLKIT_CACHE` or ~/.cache/kafka-toolkit, `spark-<pyspark>-delta-<delta>/jars`: what `devstack fetch`
   writes), when it is there;
3. otherwise Spark resolves their Maven coordinates itself (`spark.jars.packages`, through Ivy: Maven
   Central, or the repositories your `spark.jars.repositories` / `spark.jars.ivySettings` name).
Nothing is read from a source tree and nothing of the dev stack is imported: an installed wheel on a
Spark host finds its jars the same way.

Partitions follow the master: Spark's own `spark.default.parallelism` (the cores of `local[N]`, or of
the cluster's executors) also sets the shuffle and Delta snapshot partitions, unless your Spark
configuration (`spark-defaults.conf` under SPARK_CONF_DIR, or `spark.*` settings) sets them. So does
the heap: a local driver's follows the host (`local_heap`), unless `spark.driver.memory` is set. The
state store of stateful queries is RocksDB with changelog checkpointing, not counting its rows
(`STATE_STORE`), and a checkpoint's files are written by Spark's FileSystem-based manager
(`CHECKPOINT_FILES`), unless that configuration says otherwise. The driver's Python collects its
batches into Arrow's jemalloc pool (`driver_memory.choose_arrow_pool`), unless
`ARROW_DEFAULT_MEMORY_POOL` names another.

A driver restarted after a crash is not serving views while its JVM loads Spark's, Delta's and Kafka's
classes: on 2 busy cores, seconds for the session and again for its first job. The JVM's class-data
sharing (an AppCDS archive of those classes, mapped rather than loaded) cuts both by about a third.
The archive is written by the first JVM that exits normally (`-XX:ArchiveClassesAtExit`) and read by
every later one (`-XX:SharedArchiveFile`). It is named after
what it was made from (the jars, pyspark, the java binary), so a changed installation makes a new
one; an archive the JVM cannot use is ignored (`-Xshare:auto`), never fatal. Where:
`MATERIALIZERS_JVM_CACHE` (default ~/.cache/kafka-toolkit/jvm; `off` disables it).
Spark's launcher puts its conf folder (SPARK_CONF_DIR, else SPARK_HOME/conf) on the driver's class path
ahead of Spark's jars, and the JVM neither writes nor maps an archive where a folder with files in it
comes before the jars the archived classes came from: on a host with a Spark install (its conf/ ships
templates) or a SPARK_CONF_DIR, no driver ever used one, and every session loaded its classes. So Spark's
jars (`spark_jar_glob`) go first, with the toolkit's (`spark.driver.defaultExtraClassPath`); the conf
folder's files are still on the class path, after them: a file of the same name at a jar's root would
now be found first, and none of pyspark 4.2's or the toolkit's jars holds one a conf folder takes
(log4j2.*, log4j.properties, hive-, core-, hdfs-, yarn-site.xml, metrics.properties, fairscheduler.xml).

A local driver takes the jar files on its JVM's class path (after any `spark.driver.extraClassPath`
of yours: `spark.driver.defaultExtraClassPath`, beside Spark's own entry), not as `spark.jars`: its
executors are its own threads, so nothing needs shipping, and the JVM archives only
the classes of its own class path. With `spark.jars` each start copied the jars into the executor's
work folder, and the Kafka source's, Kafka's and Avro's classes, which a restarted driver's first
batch loads, were never archived. A cluster's driver keeps `spark.jars` (its executors fetch them).
`devstack fetch` writes the archive ahead (`warm_class_archive`), with those jars' classes loaded.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import socket
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from kafkakit.java_client import parse_properties
from materializers.config import is_local
from materializers.errors import MaterializerError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

CONF = {
    "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.streaming.stopGracefullyOnShutdown": "true",
    # pyspark records the Python call site of every `functions` call for error messages: ~4 py4j
    # round trips each (session, conf, set, clear), about half the time building a decode took.
    # Spark's own messages still name the failing expression.
    "spark.python.sql.dataFrameDebugging.enabled": "false",
}
# Spark's defaults (200 shuffle partitions, 50 Delta snapshot partitions) schedule mostly empty tasks
# for a materializer's small batches; the master's parallelism is what the work can use.
SIZED_BY_PARALLELISM = ("spark.sql.shuffle.partitions", "spark.databricks.delta.snapshotPartitions")
# Stateful queries (aggregate views) keep their state in RocksDB, off the JVM heap, uploading each batch's
# changes as a changelog. The default HDFS-backed store keeps the whole state on the heap, and at a million
# groups that is more than a driver with Spark's default 1 GiB heap holds; RocksDB costs some time per
# batch, and a slower batch beats a driver that dies. A query records its store in its checkpoint and keeps
# it: older checkpoints stay on HDFS.
STATE_STORE = {
    "spark.sql.streaming.stateStore.providerClass": (
        "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
    ),
    "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true",
    # Counting the store's rows costs a RocksDB get before every put and delete: at a million groups that
    # was a large share of the state operator's update time. The price is Spark's numRowsTotal progress
    # metric, reported as 0; nothing here reads it (`spark.read.format("statestore")` counts a checkpoint's
    # rows exactly).
    "spark.sql.streaming.stateStore.rocksdb.trackTotalNumberOfRows": "false",
}
# Spark 4.2 asks, for every field of every nested record a task builds (SpecificInternalRow: an Avro
# record's `after` and `source`, per change), whether its Types Framework is on; unset, the answer
# reads the environment (SPARK_TESTING) each time, a visible share of a Debezium Avro decode's CPU.
# Set, it is a lookup in the task's properties. `false` is Spark's default
# outside its own test suite.
TYPES_FRAMEWORK = {"spark.sql.types.framework.enabled": "false"}
# A query's whole-stage code is one method per stage, and the JVM does not compile a method past 8,000 bytes
# of bytecode (DontCompileHugeMethods): it runs interpreted. A Debezium Avro decode is one stage (framing,
# from_avro, the change's columns), ~8,000 bytes for the bench's four-column products table and more per
# column, and interpreted it decodes markedly slower. The driver's JVM compiles such methods (every task's,
# in local mode); a cluster's executors keep their own JVM flags, so there Spark ends a stage's code at the
# JVM's limit instead (each operator's own generated code, compiled), unless configured.
COMPILE_HUGE_METHODS = "-XX:-DontCompileHugeMethods"
CLUSTER_CODEGEN = {"spark.sql.codegen.hugeMethodLimit": "8000"}
# The JVM collects when its class metadata first passes MetaspaceSize (~21 MB by default) and again
# as it grows: a driver loads ~38 MB of Spark, Kafka, Avro and Delta classes, so every driver paid
# two such collections in its first batches, full ones under the parallel collector (both cores
# stopped). 128 MB is a threshold, not a reservation, and above what a driver loads: those
# collections are gone, and a backfill pauses less.
METASPACE_THRESHOLD = "-XX:MetaspaceSize=128m"
# Spark generates no whole-stage code for an operator with more than `maxFields` fields, nested ones
# counted, in its input or output (100 by default). A Debezium Avro decode carries a document per
# writer schema version of the topic (nested and flat, ~3 fields per column read, plus ~8), so a
# 10-column table past its third ALTER TABLE, or a 30-column one at once, fell off it: its decode ran
# interpreted, markedly slower for backfills and live batches alike. Generated code too large to
# compile still falls back (spark.sql.codegen.fallback), as it does at 100.
CODEGEN_FIELDS = {"spark.sql.codegen.maxFields": "1000"}
# A query's checkpoint (a local path: `--checkpoint`, under the materializers' home) is written twice
# per micro-batch (offsets, then commits). Spark's default manager goes through Hadoop's FileContext,
# whose local file system without Hadoop's native library forks `readlink` 8 times and `chmod` twice
# per file: 20 processes per batch, which made writing the checkpoint a large share of a small
# batch's time, more under load. Spark's FileSystem-based manager
# renames with java.io (an atomic rename(2) on a local disk); left are the two `chmod`s of each file
# and its checksum. Like every checkpoint, one query writes it at a time.
CHECKPOINT_FILES = {
    "spark.sql.streaming.checkpointFileManagerClass": (
        "org.apache.spark.sql.execution.streaming.checkpointing.FileSystemBasedCheckpointFileManager"
    ),
}
# A task's result past 1 MiB (Spark's spark.task.maxDirectResultSize), or past the RPC message bound
# (spark.rpc.message.maxSize, 128 MiB), goes through the block manager: stored as a serialized block, then
# fetched by the driver over its block transfer service, a loopback connection to itself in local mode. A
# driver batch is sized to half of spark.driver.maxResultSize (`runtime/batch_size`), so a task's Arrow result
# reaches that share of it, far past both bounds for a backfill's batches, and the block manager's store and
# fetch took a few times as long as a direct result. Local masters take every result up to the most both
# bounds accept (2047 MiB) directly: the driver's executors are its own threads, the message is passed in
# memory, and a direct result is one copy fewer than a block's. A cluster's executors keep the defaults:
# there a direct result is an RPC message on the driver's one endpoint, beside heartbeats and task status.
LOCAL_CONTEXT = {"spark.task.maxDirectResultSize": "2047m", "spark.rpc.message.maxSize": "2047"}
# Spark's launcher gives a driver 1 GiB of heap (`spark.driver.memory`) whatever the host has. On a
# local master that JVM is the whole application, tasks included, and a warehouse backfill's driver
# batches are sized by its heap (`runtime/batch_size`): in 1 GiB a backfill is cut into many small batches,
# each MERGE rewriting the current table, where a larger heap takes a few large ones and finishes
# sooner, for more resident memory in the JVM and the driver's Python. So a local driver's
# heap follows the host as a JVM's own default does: a quarter of the memory the host, or the
# container (cgroup) it runs in, has; never less than Spark's 1 GiB. It is a default the launcher
# reads last (SPARK_DRIVER_MEMORY): `spark.driver.memory` in
# spark-defaults.conf or a --conf, --driver-memory, or the variable itself win. A cluster's driver
# keeps Spark's: its batches stay small (larger ones run on the executors).
ENV_DRIVER_MEMORY = "SPARK_DRIVER_MEMORY"
LOCAL_HEAP_SHARE = 4  # the JVM's own default (MaxRAMPercentage=25)
SPARK_DRIVER_HEAP_MIB = 1024
ENV_SPARK_JARS = "MATERIALIZERS_SPARK_JARS"
# The driver class path Spark's launcher appends to the user's (`spark.driver.extraClassPath`), and
# its own value for it (SparkLauncher.DRIVER_DEFAULT_EXTRA_CLASS_PATH_VALUE), kept first.
DEFAULT_CLASS_PATH = "spark.driver.defaultExtraClassPath"
SPARK_DEFAULT_CLASS_PATH = "hive-jackson/*"
SCALA = "2.13"  # the only Scala pyspark 4 is built for
KAFKA_SOURCE = "spark-sql-kafka-0-10"


@dataclass(frozen=True, slots=True)
class SparkJars:
    """Jar files for `spark.jars`, or Maven coordinates for `spark.jars.packages` (see the module doc)."""

    files: tuple[str, ...] = ()
    packages: tuple[str, ...] = ()

    def on_class_path(self, master: str) -> bool:
        """Whether a driver on `master` takes the jar files on its JVM's class path (see the module doc)."""
        return bool(self.files) and is_local(master)

    def archive(self, master: str) -> Path | None:
        """The class archive of a driver on `master` taking these jars (`class_archive`)."""
        return class_archive(self.files or self.packages, on_class_path=self.on_class_path(master))

    def conf(self, master: str, spark_jars: str) -> dict[str, str]:
        """The session's settings that bring these jars; `spark_jars`: Spark's own jars as its
        launcher names them (`spark_jar_glob`), put ahead of the conf folder (see the module doc)."""
        # Spark's launcher puts this after `spark.driver.extraClassPath`, which stays the user's
        ours = self.files if self.on_class_path(master) else ()
        entries = (SPARK_DEFAULT_CLASS_PATH, *ours, spark_jars)
        conf = {DEFAULT_CLASS_PATH: os.pathsep.join(e for e in entries if e)}
        if ours:
            return conf
        if self.files:
            return {**conf, "spark.jars": ",".join(self.files)}
        return {**conf, "spark.jars.packages": ",".join(self.packages)}


def packages() -> tuple[str, ...]:
    """The Maven coordinates matching the installed pyspark and delta-spark."""
    from importlib.metadata import version

    spark = version("pyspark")
    return (
        f"org.apache.spark:{KAFKA_SOURCE}_{SCALA}:{spark}",
        f"org.apache.spark:spark-avro_{SCALA}:{spark}",
        f"io.delta:delta-spark_{SCALA}:{version('delta-spark')}",
    )


def spark_jar_glob(environ: Mapping[str, str]) -> str:
    """Spark's own jars as its launcher puts them on the driver's class path: SPARK_HOME's, else
    those of the installed pyspark (its `find_spark_home` looks there first)."""
    import pyspark

    return os.path.join(environ.get("SPARK_HOME") or os.path.dirname(pyspark.__file__), "jars", "*")


def toolkit_cache(environ: Mapping[str, str]) -> Path:
    return Path(environ.get("TOOLKIT_CACHE") or Path.home() / ".cache" / "kafka-toolkit")


def locate_jars(environ: Mapping[str, str] | None = None) -> SparkJars:
    """Where this driver's Kafka source, Avro and Delta come from; MaterializerError for a setting
    that names something missing."""
    from importlib.metadata import version

    env = os.environ if environ is None else environ
    given = env.get(ENV_SPARK_JARS, "").strip()
    if given:
        return SparkJars(files=_named_jars(given))
    cached = toolkit_cache(env) / f"spark-{version('pyspark')}-delta-{version('delta-spark')}" / "jars"
    found = tuple(str(p) for p in sorted(cached.glob("*.jar")))
    if any(KAFKA_SOURCE in Path(j).name for j in found):
        return SparkJars(files=found)
    return SparkJars(packages=packages())


def _named_jars(given: str) -> tuple[str, ...]:
    files: list[str] = []
    for entry in (e.strip() for e in given.split(",") if e.strip()):
        path = Path(entry)
        if path.is_dir():
            files += [str(p) for p in sorted(path.glob("*.jar"))]
        elif path.is_file() and path.suffix == ".jar":
            files.append(str(path))
        else:
            raise MaterializerError(
                f"{ENV_SPARK_JARS} names {entry!r}, which is neither a .jar file nor a folder here; give the "
                "jar files or folders of the Kafka source, Avro and Delta (`devstack fetch` fills one), or "
                "unset it to let Spark fetch " + ", ".join(packages())
            )
    if not any(KAFKA_SOURCE in Path(f).name for f in files):
        raise MaterializerError(
            f"{ENV_SPARK_JARS}={given!r} holds no {KAFKA_SOURCE} jar, so Spark has no Kafka source; add the "
            f"folder with {', '.join(packages())} and their dependencies, or unset it"
        )
    return tuple(files)


ENV_JVM_CACHE = "MATERIALIZERS_JVM_CACHE"
# What the archive's class path looks like (part of its name): an archive written before Spark's jars
# came ahead of its conf folder does not match the class path of a driver now, and the JVM ignores it.
CLASS_PATH_LAYOUT = "Spark's jars before its conf folder"


def java_binary(environ: Mapping[str, str]) -> str:
    """The `java` Spark's launcher runs: JAVA_HOME's where set, else the one on PATH."""
    home = environ.get("JAVA_HOME")
    java = shutil.which("java", path=os.path.join(home, "bin")) if home else None
    return java or shutil.which("java") or "java"


def class_archive(
    jar_paths: Sequence[str], environ: Mapping[str, str] | None = None, *, on_class_path: bool = False
) -> Path | None:
    """Where this installation's class archive lives (None: disabled), named after what it holds
    (`jar_paths`: the jar files, or the Maven coordinates Spark resolves; `on_class_path`: the files
    are on the JVM's class path, which a JVM checks before it maps an archive)."""
    env = os.environ if environ is None else environ
    where = env.get(ENV_JVM_CACHE, "")
    if where == "off":
        return None
    import pyspark

    how = "class path" if on_class_path else "spark.jars"
    made_of = [
        *sorted(jar_paths),
        how,
        CLASS_PATH_LAYOUT,
        pyspark.__version__,
        os.path.realpath(java_binary(env)),
    ]
    key = hashlib.sha256("\0".join(made_of).encode()).hexdigest()[:16]
    root = Path(where) if where else toolkit_cache(env) / "jvm"
    return root / f"spark-driver-{key}.jsa"


# A JVM writes its archive when it exits, and two may exit at once: each writes a file of its own,
# promoted to the archive's name by a later start once it has not changed for this long.
_SETTLED_S = 60.0
_QUIET = "-Xlog:cds=off -Xlog:cds+dynamic=off"


def class_sharing_options(archive: Path, *, now: float, writer: int) -> str:
    """JVM options: map the archive, or write one at exit; promotes a settled written one first."""
    _settle(archive, now)
    if archive.is_file():
        return f"-XX:SharedArchiveFile={archive} -Xshare:auto {_QUIET}"
    return f"-XX:ArchiveClassesAtExit={archive}.{writer}.tmp {_QUIET}"


def _settle(archive: Path, now: float) -> None:
    """Where no `archive` is, the newest written one that has settled becomes it; the other settled
    ones, each as large (100-200 MB), are removed (a JVM that started before the archive was there
    still writes one at exit). Another start doing the same at once is no error."""
    settled: list[tuple[float, Path]] = []
    for written in archive.parent.glob(archive.name + ".*.tmp"):
        with suppress(FileNotFoundError):
            if now - (mtime := written.stat().st_mtime) > _SETTLED_S:
                settled.append((mtime, written))
    settled.sort()
    if settled and not archive.is_file():
        with suppress(FileNotFoundError):
            settled.pop()[1].replace(archive)
    for _, other in settled:
        other.unlink(missing_ok=True)


def warm_class_archive() -> Path | None:
    """Write the class archive now with a short session (a fresh machine's first restart then maps
    it instead of waiting for a driver's clean exit); the archive's path, or None when disabled."""
    import subprocess

    located = locate_jars()
    master = "local[1]"
    archive = located.archive(master)
    if archive is None or archive.is_file():
        return archive
    script = (
        f"from materializers.spark import session as s; spark = s.build({master!r}, 'class-archive'); "
        "spark.range(10).selectExpr('id % 3 as k').groupBy('k').count().collect(); "
        "s.load_source_classes(spark); spark.stop()"
    )
    subprocess.run([sys.executable, "-c", script], check=True, capture_output=True, timeout=300)
    written = sorted(archive.parent.glob(archive.name + ".*.tmp"), key=lambda p: p.stat().st_mtime)
    if written:  # its JVM has exited: the file is whole
        written[-1].replace(archive)
    return archive if archive.is_file() else None


# The jars whose classes a restarted driver's first batch loads: the Kafka source, its consumer pool,
# Kafka's client and Avro (Spark's own jars are archived by any session).
SOURCE_JARS = ("kafka", "avro", "commons-pool2")


def source_classes(jar_paths: Sequence[str]) -> list[str]:
    """The names of the classes in the Kafka source's and Avro's jars among `jar_paths`."""
    import zipfile

    names: list[str] = []
    for jar in jar_paths:
        if any(part in Path(jar).name for part in SOURCE_JARS):
            with zipfile.ZipFile(jar) as archive:
                names += [
                    entry.removesuffix(".class").replace("/", ".")
                    for entry in archive.namelist()
                    if entry.endswith(".class") and "-" not in entry  # not META-INF/..., module-info
                ]
    return names


def load_source_classes(spark: SparkSession) -> int:
    """Load (not initialize) the classes of the Kafka source's and Avro's jars on a local driver's
    class path, so the archive its JVM writes at exit holds them; how many loaded. A class whose
    optional dependency is absent is skipped, as a JVM that never needs it would."""
    from py4j.protocol import Py4JJavaError

    jvm = spark.sparkContext._jvm
    assert jvm is not None
    loader, for_name = jvm.java.lang.ClassLoader.getSystemClassLoader(), jvm.java.lang.Class.forName
    loaded = 0
    for name in source_classes(locate_jars().files):
        try:
            for_name(name, False, loader)
            loaded += 1
        except Py4JJavaError:
            continue
    return loaded


ENV_DRIVER_JIT = "MATERIALIZERS_DRIVER_JIT"
# The driver JVM's profile. `quick` compiles with C1 only; `live` and `full` with the JVM's tiered JIT
# (C1, then C2 for hot code, at FULL_JIT_THRESHOLDS), and `full` also collects with the parallel
# collector (THROUGHPUT_GC). `auto`, the default, picks per start: `full` when the driver starts at
# least FULL_JIT_BACKLOG records behind (a backfill, a rebuild from offset 0: C2's compile time is paid
# back many times over), `quick` for a driver near the end of its topics (a restart, a new job from
# `latest`). `live` halves a warm live batch's planning (Spark's optimizer runs again every batch), so
# its batches are shorter and the views' tail latency lower under load. But a cold start pays for C2's
# compiles: the demo, a cold start, had a higher steady p99 and a longer recovery after kill -9 with
# `live` than with `quick`; so `quick` stays auto's pick, and `live` is there for a driver that runs
# long between restarts. On a cluster the executors' JVMs keep the JVM's defaults: only the driver's own
# JVM (every thread of it in local mode) is affected.
# C1 alone also shrinks the JVM's code cache to a fifth (48 MB, not 240): a driver running for minutes
# filled it with the compiled code of Spark's generated classes, and the JVM stopped compiling
# ("CodeCache is full. Compiler has been disabled": new code interpreted from then on), so quick keeps
# the full size.
#
# The full JIT compiles with C2 whatever runs hot, and on a backfill's cold JVM much of that is the
# code of its start and of each batch's planning: class loading, tasks' Java serialization, the SQL
# parser, ASM's closure cleaning, Janino (in a backfill's JFR recording the Kafka fetch, the decode
# stage and Arrow were a small part of C2's compiles, and C2's threads took about half the run's
# time in CPU). C2 thresholds ten times the JVM's still reach the per-record code within the first
# ~50k records and leave the per-batch and per-task code at C1: C2's CPU more than halved, and the
# backfill finished sooner. Forty times the JVM's cut C2's CPU further but the backfill was no
# faster: the record loop stayed longer in C1's profiling tier.
FULL_JIT_THRESHOLDS = (
    "-XX:Tier4InvocationThreshold=50000 -XX:Tier4MinInvocationThreshold=6000 "
    "-XX:Tier4CompileThreshold=150000 -XX:Tier4BackEdgeThreshold=400000"
)
DRIVER_JIT = {
    "quick": "-XX:TieredStopAtLevel=1 -XX:ReservedCodeCacheSize=240m",
    "live": FULL_JIT_THRESHOLDS,
    "full": FULL_JIT_THRESHOLDS,
}
FULL_JIT_BACKLOG = 500_000
# A driver that starts far behind (`full`) also collects with the JVM's parallel (throughput) collector
# instead of G1, the default: a backfill's tasks allocate each Arrow result whole (a humongous object to G1,
# which starts a concurrent cycle for it) and build a row object per field, and G1's concurrent threads and
# heavier write barriers took cores the tasks needed: a backfill finishes sooner with it. A driver near the
# end of its topics (`live`, `quick`) keeps G1: the parallel collector made a restarted driver's start
# longer (its heap grown by full collections), and G1 collects a long-running driver's old generation beside
# it. A driver that started `full` keeps the parallel collector once caught up (its live batches measured
# there).
THROUGHPUT_GC = "-XX:+UseParallelGC"
# Where a JVM's options may already name a collector: the JVM refuses to start with two
# ("Multiple garbage collectors selected"), so a driver whose options name one keeps it.
JAVA_OPTION_VARIABLES = ("JDK_JAVA_OPTIONS", "JAVA_TOOL_OPTIONS", "_JAVA_OPTIONS")
EXTRA_JAVA_OPTIONS = "spark.driver.extraJavaOptions"
DRIVER_JAVA_OPTIONS = ("spark.driver.defaultJavaOptions", EXTRA_JAVA_OPTIONS)
COLLECTORS = ("Serial", "Parallel", "ParallelOld", "G1", "Z", "Shenandoah", "Epsilon", "ConcMarkSweep")
COLLECTOR_OPTIONS = frozenset(f"-XX:+Use{name}GC" for name in COLLECTORS)


def driver_jit(environ: Mapping[str, str] | None = None, *, backlog: int | None = None) -> str:
    """The driver JVM's profile, `quick`, `live` or `full`, from MATERIALIZERS_DRIVER_JIT (default
    `auto`: full when `backlog`, the records the driver has to read before it is caught up, is at
    least FULL_JIT_BACKLOG; quick when it is smaller or not known)."""
    env = os.environ if environ is None else environ
    chosen = env.get(ENV_DRIVER_JIT) or "auto"
    if chosen == "auto":
        return "full" if backlog is not None and backlog >= FULL_JIT_BACKLOG else "quick"
    if chosen not in DRIVER_JIT:
        raise MaterializerError(
            f"{ENV_DRIVER_JIT}={chosen!r} is not one of auto, {', '.join(DRIVER_JIT)}: auto (full when the "
            f"driver starts {FULL_JIT_BACKLOG:,} records behind or more, else quick), quick (C1 only: the "
            "fastest restart), live (C2 too: shorter live batches) or full (C2 and the parallel collector: "
            "faster long backfills in local mode)"
        )
    return chosen


def java_options(jit: str, environ: Mapping[str, str], sharing: str = "") -> str:
    """The driver JVM's options for the `jit` profile, with the class archive's (`sharing`), then
    the driver's Java options of spark-defaults.conf: a session's setting replaces that file's (the
    launcher's file gives way), so yours are carried over, last, where the JVM takes an option given
    twice from the last."""
    defaults = spark_defaults(environ)
    yours = defaults.get(EXTRA_JAVA_OPTIONS, "")
    options = [
        COMPILE_HUGE_METHODS,
        METASPACE_THRESHOLD,
        DRIVER_JIT[jit],
        driver_collector(jit, environ, defaults),
        sharing,
        yours,
    ]
    return " ".join(o for o in options if o)


def driver_collector(
    jit: str, environ: Mapping[str, str] | None = None, defaults: Mapping[str, str] | None = None
) -> str:
    """The driver JVM's collector option for the `jit` profile: THROUGHPUT_GC for `full`, none (the
    JVM's G1) for `live` and `quick`, or where the JVM's options already name a collector
    (JAVA_OPTION_VARIABLES, or the driver's Java options in spark-defaults.conf: `defaults`, read
    here when not given)."""
    if jit != "full":
        return ""
    env = os.environ if environ is None else environ
    conf = spark_defaults(env) if defaults is None else defaults
    named = [env.get(v, "") for v in JAVA_OPTION_VARIABLES] + [conf.get(k, "") for k in DRIVER_JAVA_OPTIONS]
    return "" if any(names_collector(options) for options in named) else THROUGHPUT_GC


def names_collector(options: str) -> bool:
    """Whether JVM `options` choose a garbage collector (pure)."""
    return any(o in COLLECTOR_OPTIONS for o in options.split())


def spark_defaults(environ: Mapping[str, str]) -> dict[str, str]:
    """The settings of the spark-defaults.conf Spark's launcher reads (under SPARK_CONF_DIR, else
    SPARK_HOME's conf/, else pyspark's own); none where there is no such file."""
    conf_dir = environ.get("SPARK_CONF_DIR")
    if not conf_dir:
        import pyspark

        conf_dir = str(Path(environ.get("SPARK_HOME") or Path(pyspark.__file__).parent) / "conf")
    try:
        text = (Path(conf_dir) / "spark-defaults.conf").read_text(encoding="utf-8")
    except OSError:
        return {}
    return parse_properties(text)


def require_master(master: str, timeout_s: float = 5.0) -> None:
    """A standalone master (`spark://h:p`, or `spark://h1:p1,h2:p2` with standby masters) that answers
    on none of its addresses is refused here, before a checkpoint is claimed: Spark itself would try
    for a minute and leave a half-started driver."""
    if not master.startswith("spark://"):
        return
    for address in master.removeprefix("spark://").split(","):
        host, _, port = address.strip().rpartition(":")
        try:
            with socket.create_connection((host, int(port)), timeout=timeout_s):
                return
        except (OSError, ValueError):
            continue
    raise MaterializerError(
        f"the Spark master {master} does not answer (from --master, MATERIALIZERS_MASTER or SPARK_MASTER_URL): "
        "start it, or point the setting at a running master (local[*] runs Spark inside the driver); "
        "nothing was started or written"
    )


def build(
    master: str = "local[*]", app_name: str = "materializers", *, jit: str | None = None
) -> SparkSession:
    """The driver's session; `jit` (`quick`/`live`/`full`) as `driver_jit` chose it, else the environment's
    choice for a driver whose backlog is not known."""
    from pyspark.sql import SparkSession

    from materializers.spark.memory import choose_arrow_pool

    choose_arrow_pool()  # before the first batch is collected into Arrow
    located = locate_jars()
    builder = SparkSession.builder.master(master).appName(app_name)
    for key, value in located.conf(master, spark_jar_glob(os.environ)).items():
        builder = builder.config(key, value)
    archive = located.archive(master)
    sharing = ""
    if archive is not None:
        archive.parent.mkdir(parents=True, exist_ok=True)
        sharing = class_sharing_options(archive, now=time.time(), writer=os.getpid())
    builder = builder.config(EXTRA_JAVA_OPTIONS, java_options(jit or driver_jit(), os.environ, sharing))
    # Executors' Python workers must run this interpreter (its venv has redis, tantivy, ...), not
    # whatever `python3` is first on PATH; pyspark reads the worker's interpreter only from this
    # variable when the driver is a plain Python process (no spark-submit). An explicit setting wins.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    for key, value in {**CONF, **context_defaults(master)}.items():
        builder = builder.config(key, value)
    heap = local_heap(host_memory()) if is_local(master) else None
    with _launch_default(ENV_DRIVER_MEMORY, heap):
        session = builder.getOrCreate()
    session.sparkContext.setLogLevel("WARN")
    size_by_parallelism(session)
    for key, value in session_defaults(master).items():
        if not session.sparkContext.getConf().contains(key):  # spark-defaults.conf or spark.* wins
            session.conf.set(key, value)
    return session


def local_heap(memory: int | None) -> str:
    """The default `spark.driver.memory` of a local driver on a host (or container) with `memory`
    bytes (None: not known), pure: a LOCAL_HEAP_SHARE of it, at least Spark's own default."""
    share = 0 if memory is None else (memory // LOCAL_HEAP_SHARE) >> 20
    return f"{max(SPARK_DRIVER_HEAP_MIB, share)}m"


def host_memory() -> int | None:
    """The bytes of memory this process may use: the host's, or its cgroup's limit where lower (None:
    neither is known)."""
    try:
        physical: int | None = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):  # not a POSIX host
        physical = None
    known = [m for m in (physical, cgroup_limit()) if m is not None]
    return min(known) if known else None


def cgroup_limit(
    root: Path = Path("/sys/fs/cgroup"), membership: Path = Path("/proc/self/cgroup")
) -> int | None:
    """The memory limit of this process's cgroup (None: none, or it cannot be read)."""
    try:
        files = limit_files(membership.read_text(encoding="utf-8"), root)
    except OSError:
        return None
    for file in files:
        try:
            return memory_limit(file.read_text(encoding="utf-8"))
        except OSError:
            continue
    return None


def limit_files(membership: str, root: Path) -> list[Path]:
    """Where the memory limit of a process with `membership` (its /proc/self/cgroup) is, first that
    exists applies (pure): its own cgroup's (v2 `memory.max`, v1 `memory.limit_in_bytes`), then the
    hierarchy root's (inside a container, its own cgroup is the root it sees)."""
    files: list[Path] = []
    for line in membership.splitlines():
        fields = line.split(":", 2)
        if len(fields) != 3:
            continue
        _, controllers, path = fields
        if controllers == "":
            files += [root / path.lstrip("/") / "memory.max", root / "memory.max"]
        elif "memory" in controllers.split(","):
            files += [root / "memory" / path.lstrip("/") / "memory.limit_in_bytes"]
            files += [root / "memory" / "memory.limit_in_bytes"]
    return files


def memory_limit(text: str) -> int | None:
    """A cgroup memory limit file's value in bytes (pure); None for none: `max`, or v1's unlimited (a
    number near 2**63)."""
    value = text.strip()
    if not value.isdigit() or int(value) >= 1 << 62:
        return None
    return int(value)


@contextmanager
def _launch_default(name: str, value: str | None) -> Iterator[None]:
    """The environment variable `name` set to `value` while the block runs (Spark's launcher reads it
    then), unless it is set already or `value` is None."""
    if value is None or name in os.environ:
        yield
        return
    os.environ[name] = value
    try:
        yield
    finally:
        os.environ.pop(name, None)


def driver_heap(spark: SparkSession) -> int:
    """The bytes of heap the driver's JVM may take (its -Xmx, as the JVM reports it)."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    return int(jvm.java.lang.Runtime.getRuntime().maxMemory())


def driver_collectors(spark: SparkSession) -> list[str]:
    """The names of the driver JVM's garbage collectors, as the JVM reports them (G1's, or the
    parallel collector's `PS Scavenge` and `PS MarkSweep`)."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    return [str(b.getName()) for b in jvm.java.lang.management.ManagementFactory.getGarbageCollectorMXBeans()]


def context_defaults(master: str) -> dict[str, str]:
    """The settings `build` gives Spark's context before it starts, by master (pure)."""
    return dict(LOCAL_CONTEXT) if is_local(master) else {}


def session_defaults(master: str) -> dict[str, str]:
    """The session settings `build` sets where spark-defaults.conf (or spark.*) does not (pure)."""
    return {
        **STATE_STORE,
        **CHECKPOINT_FILES,
        **TYPES_FRAMEWORK,
        **CODEGEN_FIELDS,
        **({} if is_local(master) else CLUSTER_CODEGEN),
    }


def size_by_parallelism(session: SparkSession) -> None:
    """Shuffle and Delta snapshot partitions = the master's parallelism, unless configured. On a
    cluster Spark counts the executors' cores registered so far (at least 2), so a driver that starts
    before its workers does gets fewer partitions than cores: set them in spark-defaults.conf there."""
    context = session.sparkContext
    parallelism = str(max(1, context.defaultParallelism))
    for key in SIZED_BY_PARALLELISM:
        if not context.getConf().contains(key):
            session.conf.set(key, parallelism)
