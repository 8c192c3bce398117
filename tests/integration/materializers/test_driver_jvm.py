"""The driver's JVM runs with the options the session asked for (MATERIALIZERS_DRIVER_JIT), its jars
where `locate_jars` found them, partitions sized by the master, and a local driver's heap by the host."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from materializers.spark.session import (
    CHECKPOINT_FILES,
    DRIVER_JIT,
    ENV_JVM_CACHE,
    JAVA_OPTION_VARIABLES,
    SIZED_BY_PARALLELISM,
    THROUGHPUT_GC,
    driver_collector,
    driver_collectors,
    driver_heap,
    host_memory,
    java_binary,
    local_heap,
    locate_jars,
    spark_jar_glob,
)

pytestmark = pytest.mark.integration


def test_the_driver_jvm_compiles_with_c1_only_by_default_in_a_full_size_code_cache(spark: Any) -> None:
    """A driver near the end of its topics (the test session's: no backlog known) takes the `quick`
    profile: C1 only, the JVM's G1, a full-size code cache."""
    jvm = spark.sparkContext._jvm
    flags = [
        str(a) for a in jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments()
    ]
    assert "-XX:TieredStopAtLevel=1" in flags and "-XX:+UseParallelGC" not in flags, flags
    assert "G1 Young Generation" in driver_collectors(spark)
    # a whole decode is one generated method, past the JVM's 8,000-byte limit for wider tables
    diagnostics = jvm.java.lang.management.ManagementFactory.getPlatformMXBean(
        jvm.java.lang.Class.forName("com.sun.management.HotSpotDiagnosticMXBean")
    )
    assert str(diagnostics.getVMOption("DontCompileHugeMethods").getValue()) == "false"
    # class metadata first collected past 128 MB, not ~21 MB (a driver loads ~38 MB of it)
    assert str(diagnostics.getVMOption("MetaspaceSize").getValue()) == str(128 * 1024 * 1024)
    assert spark.conf.get("spark.sql.codegen.hugeMethodLimit") == "65535"  # Spark's: a local master
    # C1 alone would reserve 48 MB, which a long-running driver fills (the JVM then stops compiling)
    pools = {str(p.getName()): p for p in jvm.java.lang.management.ManagementFactory.getMemoryPoolMXBeans()}
    code_cache = [p for name, p in pools.items() if name.startswith("CodeHeap") or name == "CodeCache"]
    assert sum(int(p.getUsage().getMax()) for p in code_cache) == 240 * 1024 * 1024


def test_the_local_drivers_heap_follows_the_host(spark: Any) -> None:
    """A quarter of this host's memory (Spark's launcher alone would give 1 GiB), as the JVM reports
    its own maximum heap: G1 rounds -Xmx up to its region size (at most 32 MiB)."""
    expected = int(local_heap(host_memory()).removesuffix("m")) << 20
    assert expected > 1 << 30  # the test machine has more than 4 GiB
    assert 0 <= driver_heap(spark) - expected < 32 << 20


def test_the_full_jits_thresholds_are_flags_the_installed_jvm_takes() -> None:
    """A JVM refuses to start on a flag it does not know: the driver's `full` options, on `java`."""
    shown = subprocess.run(
        [java_binary(os.environ), *DRIVER_JIT["full"].split(), "-XX:+PrintFlagsFinal", "-version"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    final = {
        line.split()[1]: line.split()[3] for line in shown.splitlines() if "Tier4" in line and "=" in line
    }
    assert final["Tier4InvocationThreshold"] == "50000"
    assert final["Tier4BackEdgeThreshold"] == "400000"


def test_a_full_driver_collects_with_the_parallel_collector_and_never_with_two(tmp_path: Path) -> None:
    """The installed JVM takes the `full` profile's collector, refuses a second one (why a collector
    named in the JVM's own options is kept), and starts with the options `build` gives in that case."""
    env = {**os.environ, "SPARK_CONF_DIR": str(tmp_path)}
    for variable in JAVA_OPTION_VARIABLES:
        env.pop(variable, None)
    chosen = final_flags(env, *DRIVER_JIT["full"].split(), driver_collector("full", env))
    assert (chosen["UseParallelGC"], chosen["UseG1GC"]) == ("true", "false")
    refused = java_version(env, THROUGHPUT_GC, "-XX:+UseG1GC")
    assert refused.returncode != 0 and "Multiple garbage collectors selected" in refused.stdout
    env["JDK_JAVA_OPTIONS"] = "-XX:+UseG1GC"
    assert driver_collector("full", env) == ""
    kept = final_flags(env, *DRIVER_JIT["full"].split(), driver_collector("full", env))
    assert (kept["UseParallelGC"], kept["UseG1GC"]) == ("false", "true")


def final_flags(env: dict[str, str], *options: str) -> dict[str, str]:
    shown = java_version(env, *[o for o in options if o], "-XX:+PrintFlagsFinal")
    assert shown.returncode == 0, shown.stderr
    return {line.split()[1]: line.split()[3] for line in shown.stdout.splitlines() if " = " in line}


def java_version(env: dict[str, str], *options: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [java_binary(env), *options, "-version"], capture_output=True, text=True, timeout=60, env=env
    )


def test_jars_come_from_the_located_files_and_partitions_follow_the_master(spark: Any) -> None:
    located = locate_jars()
    assert located.files, "the test stack's jars are fetched: the driver uses files, not Ivy"
    # a local driver has them on its JVM's class path (nothing shipped to executors), after any
    # spark.driver.extraClassPath of the user's; Spark's own jars next, ahead of its conf folder
    conf = spark.sparkContext.getConf()
    assert conf.get("spark.driver.defaultExtraClassPath").split(os.pathsep)[1:] == [
        *located.files,
        spark_jar_glob(os.environ),
    ]
    assert not conf.contains("spark.jars") and not conf.contains("spark.driver.extraClassPath")
    class_path = str(jvm_property(spark, "java.class.path")).split(os.pathsep)
    assert set(located.files) <= set(class_path)
    system = spark.sparkContext._jvm.java.lang.ClassLoader.getSystemClassLoader()
    provider = system.loadClass("org.apache.spark.sql.kafka010.KafkaSourceProvider")
    assert provider.getClassLoader().equals(system)
    # the fixture's master is local[2]: two cores, two partitions; nothing hard-wired
    assert spark.sparkContext.defaultParallelism == 2
    assert [spark.conf.get(key) for key in SIZED_BY_PARALLELISM] == ["2", "2"]


def jvm_property(spark: Any, name: str) -> Any:
    return spark.sparkContext._jvm.java.lang.System.getProperty(name)


def test_a_driver_sized_collect_comes_back_whole_as_direct_task_results(spark: Any) -> None:
    """A local session sends task results up to 2047 MiB directly (Spark's defaults: 1 MiB, and 128
    MiB for any RPC message, send larger ones through the block manager), and a collect of more than
    128 MiB per task, what a driver batch's tasks return, comes back whole."""
    conf = spark.sparkContext.getConf()
    assert conf.get("spark.task.maxDirectResultSize") == "2047m"
    assert conf.get("spark.rpc.message.maxSize") == "2047"
    rows, width = 1_200_000, 240
    table = spark.range(0, rows, 1, 2).selectExpr("id", f"repeat('x', {width}) || id AS text").toArrow()
    assert table.num_rows == rows and table.nbytes > 2 * 128 * 1024 * 1024
    assert sorted(table.column("id").to_pylist()) == list(range(rows))
    assert table.column("text")[rows - 1].as_py() == "x" * width + str(rows - 1)


def test_checkpoints_are_written_by_the_file_system_manager_and_resume(spark: Any, tmp_path: Path) -> None:
    """The manager Spark resolves for a checkpoint path is the FileSystem-based one (Hadoop's
    FileContext forks 20 processes per micro-batch on a local disk), and a query's checkpoint written
    through it resumes: the second run starts at batch 1 with the second file only."""
    jvm = spark.sparkContext._jvm
    resolved = jvm.org.apache.spark.sql.execution.streaming.checkpointing.CheckpointFileManager.create(
        jvm.org.apache.hadoop.fs.Path(str(tmp_path / "probe")),
        spark._jsparkSession.sessionState().newHadoopConf(),
    )
    assert resolved.getClass().getName() == CHECKPOINT_FILES["spark.sql.streaming.checkpointFileManagerClass"]
    source, checkpoint = tmp_path / "in", tmp_path / "checkpoint"
    source.mkdir()
    seen: list[tuple[int, list[int]]] = []

    def run_once() -> None:
        query = (
            spark.readStream.schema("n long")
            .json(str(source))
            .writeStream.option("checkpointLocation", str(checkpoint))
            .foreachBatch(
                lambda batch, batch_id: seen.append((batch_id, sorted(r.n for r in batch.collect())))
            )
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination(120)

    (source / "a.json").write_text('{"n": 1}\n{"n": 2}\n')
    run_once()
    (source / "b.json").write_text('{"n": 3}\n')
    run_once()
    assert seen == [(0, [1, 2]), (1, [3])]
    assert sorted(p.name for p in (checkpoint / "commits").iterdir() if not p.name.startswith(".")) == [
        "0",
        "1",
    ]


@pytest.mark.parametrize("conf_folder", [False, True], ids=["no-conf-folder", "a-spark-conf-folder"])
def test_a_warmed_class_archive_maps_the_kafka_sources_classes_in_a_later_driver(
    tmp_path: Path, conf_folder: bool
) -> None:
    """`devstack fetch` writes the archive with the Kafka source's classes loaded; a driver started
    later maps them from it (the JVM's class-load log says where each class came from). So it does
    under a Spark conf folder with files in it (a Spark install's conf/, SPARK_CONF_DIR), which
    Spark's launcher puts on the class path: the JVM neither writes nor maps an archive with such a
    folder ahead of its jars. The folder still counts: its spark-defaults.conf and its files on the
    driver's class path."""
    env = {**os.environ, ENV_JVM_CACHE: str(tmp_path / "jvm")}
    if conf_folder:
        conf = tmp_path / "conf"
        conf.mkdir()
        (conf / "spark-defaults.conf").write_text("spark.toolkit.probe from-the-conf-folder\n")
        (conf / "toolkit-probe.properties").write_text("probe=1\n")
        env["SPARK_CONF_DIR"] = str(conf)
    warm = "from materializers.spark import session as s; print(s.warm_class_archive())"
    written = subprocess.run(
        [sys.executable, "-c", warm], env=env, capture_output=True, text=True, timeout=600, check=True
    ).stdout.strip()
    archive = Path(written.splitlines()[-1])
    assert archive.parent == tmp_path / "jvm" and archive.is_file()
    later = (
        "from materializers.spark import session as s; spark = s.build('local[1]', 'later'); "
        "spark.read.format('kafka').option('kafka.bootstrap.servers', '127.0.0.1:9')"
        ".option('subscribe', 't').load().schema; jvm = spark.sparkContext._jvm; "
        "print(spark.conf.get('spark.toolkit.probe', None), "
        "jvm.Thread.currentThread().getContextClassLoader().getResource('toolkit-probe.properties') is not None); "
        "spark.stop()"
    )
    logs = tmp_path / "loads"
    logs.mkdir()
    shown = subprocess.run(
        [sys.executable, "-c", later],
        env={**env, "JAVA_TOOL_OPTIONS": f"-Xlog:class+load=info:file={logs}/%p.log"},
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    ).stdout.strip()
    loads = [
        line for log in logs.glob("*.log") for line in log.read_text().splitlines() if " source: " in line
    ]
    provider = [line for line in loads if "org.apache.spark.sql.kafka010.KafkaSourceProvider " in line]
    assert provider and all("source: shared objects file" in line for line in provider), provider
    expected = "from-the-conf-folder True" if conf_folder else "None False"
    assert shown.splitlines()[-1] == expected


def test_a_users_driver_class_path_stays_first_on_a_local_driver(tmp_path: Path) -> None:
    """`spark.driver.extraClassPath` from the user's spark-defaults.conf is not replaced by the
    toolkit's jars: Spark's launcher puts it before them."""
    (tmp_path / "spark-defaults.conf").write_text(f"spark.driver.extraClassPath {tmp_path / 'mine.jar'}\n")
    probe = (
        "from materializers.spark import session as s; spark = s.build('local[1]', 'class-path'); "
        "print(spark.sparkContext._jvm.java.lang.System.getProperty('java.class.path')); spark.stop()"
    )
    shown = (
        subprocess.run(
            [sys.executable, "-c", probe],
            env={**os.environ, "SPARK_CONF_DIR": str(tmp_path)},
            capture_output=True,
            text=True,
            timeout=300,
            check=True,
        )
        .stdout.strip()
        .splitlines()[-1]
    )
    class_path = shown.split(os.pathsep)
    mine, theirs = (
        class_path.index(str(tmp_path / "mine.jar")),
        [class_path.index(j) for j in locate_jars().files],
    )
    assert mine < min(theirs)
