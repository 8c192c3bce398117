"""A restarted driver's start-up: the JVM class archive and the Delta tables it finds (pure)."""

from __future__ import annotations

import os
import zipfile
from pathlib import Path

import pytest

from materializers.spark.session import class_archive, class_sharing_options, source_classes


def test_the_archive_is_named_after_the_jars_and_can_be_turned_off(tmp_path: Path) -> None:
    env = {"MATERIALIZERS_JVM_CACHE": str(tmp_path)}
    one = class_archive(["/j/a.jar", "/j/b.jar"], env)
    assert one is not None and one.parent == tmp_path and one.suffix == ".jsa"
    assert class_archive(["/j/b.jar", "/j/a.jar"], env) == one  # order does not matter
    assert class_archive(["/j/a.jar", "/j/c.jar"], env) != one  # other classes, another archive
    assert class_archive(["/j/a.jar"], {"MATERIALIZERS_JVM_CACHE": "off"}) is None
    # a JVM maps an archive only with the class path it was written with
    assert class_archive(["/j/a.jar", "/j/b.jar"], env, on_class_path=True) != one


def test_the_archive_is_warmed_with_the_kafka_sources_and_avros_classes(tmp_path: Path) -> None:
    def jar(name: str, *entries: str) -> str:
        path = tmp_path / name
        with zipfile.ZipFile(path, "w") as archive:
            for entry in entries:
                archive.writestr(entry, b"")
        return str(path)

    jars = [
        jar("spark-sql-kafka-0-10_2.13-4.2.0.jar", "org/apache/spark/sql/kafka010/KafkaSourceProvider.class",
            "META-INF/versions/9/module-info.class", "META-INF/services/x"),
        jar("kafka-clients-3.9.2.jar", "org/apache/kafka/clients/consumer/KafkaConsumer$1.class"),
        jar("spark-avro_2.13-4.2.0.jar", "org/apache/spark/sql/avro/AvroDataToCatalyst.class", "module-info.class"),
        jar("commons-pool2-2.13.1.jar", "org/apache/commons/pool2/ObjectPool.class"),
        jar("delta-spark_2.13-4.4.0.jar", "io/delta/tables/DeltaTable.class"),  # loaded by any session
    ]  # fmt: skip
    assert source_classes(jars) == [
        "org.apache.spark.sql.kafka010.KafkaSourceProvider",
        "org.apache.kafka.clients.consumer.KafkaConsumer$1",
        "org.apache.spark.sql.avro.AvroDataToCatalyst",
        "org.apache.commons.pool2.ObjectPool",
    ]


def test_a_jvm_writes_its_own_file_which_a_later_start_promotes_once_settled(tmp_path: Path) -> None:
    archive = tmp_path / "spark-driver-x.jsa"
    assert class_sharing_options(archive, now=1000.0, writer=7).startswith(
        f"-XX:ArchiveClassesAtExit={archive}.7.tmp "
    )
    written = tmp_path / "spark-driver-x.jsa.7.tmp"
    written.write_bytes(b"archive")
    os.utime(written, (990.0, 990.0))
    # Still being written, maybe: not used, a new writer gets a file of its own.
    assert "ArchiveClassesAtExit" in class_sharing_options(archive, now=1000.0, writer=8)
    assert class_sharing_options(archive, now=1100.0, writer=9).startswith(
        f"-XX:SharedArchiveFile={archive} "
    )
    assert archive.read_bytes() == b"archive" and not written.exists()


def test_the_newest_settled_archive_is_promoted_and_the_other_settled_ones_removed(tmp_path: Path) -> None:
    archive = tmp_path / "spark-driver-x.jsa"
    for writer, mtime in ((1, 900.0), (2, 950.0), (3, 1090.0)):  # 3: maybe still being written
        written = tmp_path / f"spark-driver-x.jsa.{writer}.tmp"
        written.write_bytes(f"archive {writer}".encode())
        os.utime(written, (mtime, mtime))
    assert class_sharing_options(archive, now=1100.0, writer=9).startswith(
        f"-XX:SharedArchiveFile={archive} "
    )
    assert archive.read_bytes() == b"archive 2"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["spark-driver-x.jsa", "spark-driver-x.jsa.3.tmp"]
    # written by a JVM that started before there was an archive: removed once settled, the archive kept
    assert class_sharing_options(archive, now=1200.0, writer=10).startswith(
        f"-XX:SharedArchiveFile={archive} "
    )
    assert [p.name for p in tmp_path.iterdir()] == ["spark-driver-x.jsa"]
    assert archive.read_bytes() == b"archive 2"


def test_a_restarted_driver_sees_its_delta_tables_without_spark(tmp_path: Path) -> None:
    from materializers.views.warehouse.delta import _has_log

    table = tmp_path / "t"
    assert not _has_log(str(table))
    (table / "_delta_log").mkdir(parents=True)
    assert not _has_log(str(table))  # a directory alone is no table
    (table / "_delta_log" / "00000000000000000003.json").write_text("{}")
    assert _has_log(str(table))
    (table / "_delta_log" / "00000000000000000003.json").unlink()
    (table / "_delta_log" / "_last_checkpoint").write_text("{}")  # old commits cleaned up
    assert _has_log(str(table))


def test_the_driver_profile_is_full_far_behind_quick_near_the_end_unless_asked_and_a_bad_one_is_refused() -> (
    None
):
    from materializers.errors import MaterializerError
    from materializers.spark.session import DRIVER_JIT, FULL_JIT_BACKLOG, driver_jit

    assert DRIVER_JIT["quick"] == "-XX:TieredStopAtLevel=1 -XX:ReservedCodeCacheSize=240m"
    # C2 for the per-record code only: thresholds ten times the JVM's (5,000 / 600 / 15,000 / 40,000)
    assert DRIVER_JIT["full"].split() == [
        "-XX:Tier4InvocationThreshold=50000",
        "-XX:Tier4MinInvocationThreshold=6000",
        "-XX:Tier4CompileThreshold=150000",
        "-XX:Tier4BackEdgeThreshold=400000",
    ]
    assert DRIVER_JIT["live"] == DRIVER_JIT["full"]  # the same JIT; full adds the parallel collector
    # auto (the default): C2 and the parallel collector pay back over a backfill, not over a restart
    assert driver_jit({}, backlog=FULL_JIT_BACKLOG) == "full"
    assert driver_jit({"MATERIALIZERS_DRIVER_JIT": "auto"}, backlog=2_000_000) == "full"
    assert driver_jit({}, backlog=FULL_JIT_BACKLOG - 1) == "quick"
    assert driver_jit({}, backlog=None) == "quick"  # not known: a broker that did not answer
    assert driver_jit({}) == "quick"
    # asked: the backlog does not matter
    assert driver_jit({"MATERIALIZERS_DRIVER_JIT": "quick"}, backlog=10**9) == "quick"
    assert driver_jit({"MATERIALIZERS_DRIVER_JIT": "live"}, backlog=10**9) == "live"
    assert driver_jit({"MATERIALIZERS_DRIVER_JIT": "full"}, backlog=0) == "full"
    with pytest.raises(
        MaterializerError, match=r"MATERIALIZERS_DRIVER_JIT='c2' is not one of auto, quick, live, full"
    ):
        driver_jit({"MATERIALIZERS_DRIVER_JIT": "c2"}, backlog=10**9)


def test_records_ahead_count_from_each_partitions_start_as_spark_starts_it() -> None:
    from materializers.runtime.checkpoint import records_ahead

    bounds = {0: (0, 100), 1: (40, 90), 2: (5, 5)}
    assert records_ahead({0: -2, 1: -2, 2: -2}, bounds) == 100 + 50
    assert records_ahead({0: -1, 1: -1, 2: -1}, bounds) == 0
    assert records_ahead({0: 70}, bounds) == 30 + 50  # partitions not named start at earliest
    assert records_ahead({0: 100, 1: 10, 2: 5}, bounds) == 0 + 50  # below the log start: from it
    assert records_ahead({}, {}) == 0


def test_huge_generated_methods_are_compiled_in_the_driver_and_stopped_at_the_limit_on_a_cluster() -> None:
    from materializers.spark.session import CLUSTER_CODEGEN, COMPILE_HUGE_METHODS, session_defaults

    assert COMPILE_HUGE_METHODS == "-XX:-DontCompileHugeMethods"
    assert "spark.sql.codegen.hugeMethodLimit" not in session_defaults("local[2]")
    assert "spark.sql.codegen.hugeMethodLimit" not in session_defaults("local")
    cluster = session_defaults("spark://master:7077")
    assert {k: cluster[k] for k in CLUSTER_CODEGEN} == {"spark.sql.codegen.hugeMethodLimit": "8000"}
    assert cluster["spark.sql.types.framework.enabled"] == "false"  # the others stay
    # an Avro decode's documents, one per writer schema version, pass Spark's 100 fields
    assert (
        session_defaults("local[2]")["spark.sql.codegen.maxFields"]
        == cluster["spark.sql.codegen.maxFields"]
        == "1000"
    )


def test_a_local_driver_takes_its_tasks_results_directly_and_a_cluster_keeps_sparks_bound() -> None:
    from materializers.spark.session import context_defaults

    assert context_defaults("local[2]") == {
        "spark.task.maxDirectResultSize": "2047m",
        "spark.rpc.message.maxSize": "2047",  # the direct bound is the lower of the two
    }
    assert context_defaults("local[*]") == context_defaults("local")
    assert context_defaults("spark://master:7077") == {}


def test_a_local_drivers_heap_is_a_quarter_of_the_hosts_memory_and_never_below_sparks_default() -> None:
    from materializers.spark.session import local_heap

    gib = 1 << 30
    assert local_heap(24 * gib) == "6144m"  # the JVM's own default share
    assert local_heap(25_276_059_648) == "6026m"  # whole MiB, rounded down
    assert local_heap(2 * gib) == "1024m"  # Spark's 1 GiB stays the floor
    assert local_heap(None) == "1024m"  # not known: Spark's


def test_a_cgroup_limit_is_read_from_the_process_own_group_and_none_means_no_limit(tmp_path: Path) -> None:
    from materializers.spark.session import cgroup_limit, limit_files, memory_limit

    assert memory_limit("4294967296\n") == 4 << 30
    assert memory_limit("max\n") is None  # v2: no limit
    assert memory_limit("9223372036854771712\n") is None  # v1: no limit
    assert memory_limit("") is None
    v1 = "4:memory:/pod/abc\n3:cpu,cpuacct:/pod/abc\n0::/\n"
    assert limit_files(v1, tmp_path)[:2] == [
        tmp_path / "memory" / "pod" / "abc" / "memory.limit_in_bytes",
        tmp_path / "memory" / "memory.limit_in_bytes",
    ]
    assert limit_files("0::/user.slice/app\n", tmp_path) == [
        tmp_path / "user.slice" / "app" / "memory.max",
        tmp_path / "memory.max",
    ]
    assert limit_files("garbage\n", tmp_path) == []
    membership = tmp_path / "cgroup"
    membership.write_text("0::/app\n", encoding="utf-8")
    assert cgroup_limit(tmp_path, membership) is None  # no limit file: none known
    (tmp_path / "memory.max").write_text("max\n", encoding="utf-8")
    assert cgroup_limit(tmp_path, membership) is None
    (tmp_path / "app").mkdir()
    (tmp_path / "app" / "memory.max").write_text("2147483648\n", encoding="utf-8")
    assert cgroup_limit(tmp_path, membership) == 2 << 30  # its own group's comes first
    assert cgroup_limit(tmp_path, tmp_path / "missing") is None


def test_a_driver_far_behind_collects_with_the_parallel_collector_unless_its_options_name_one(
    tmp_path: Path,
) -> None:
    from materializers.spark.session import JAVA_OPTION_VARIABLES, THROUGHPUT_GC, driver_collector

    env = {"SPARK_CONF_DIR": str(tmp_path)}  # no spark-defaults.conf there
    assert THROUGHPUT_GC == "-XX:+UseParallelGC"
    assert driver_collector("full", env) == THROUGHPUT_GC
    assert driver_collector("live", env) == driver_collector("quick", env) == ""  # the JVM's G1
    # a JVM given two collectors does not start: one named anywhere is kept
    for variable in JAVA_OPTION_VARIABLES:
        assert driver_collector("full", {**env, variable: "-Xss4m -XX:+UseG1GC"}) == ""
    assert driver_collector("full", {**env, "JDK_JAVA_OPTIONS": "-XX:-UseG1GC -Xss4m"}) == THROUGHPUT_GC
    conf = tmp_path / "spark-defaults.conf"
    conf.write_text("# admin\nspark.driver.memory 4g\nspark.driver.defaultJavaOptions   -XX:+UseZGC -Xss4m\n")
    assert driver_collector("full", env) == ""
    conf.write_text("spark.driver.extraJavaOptions=-XX:+UseShenandoahGC\n")
    assert driver_collector("full", env) == ""
    conf.write_text("spark.executor.extraJavaOptions -XX:+UseG1GC\n")  # the executors' own JVMs
    assert driver_collector("full", env) == THROUGHPUT_GC
    # without SPARK_CONF_DIR the launcher reads SPARK_HOME's conf/
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "spark-defaults.conf").write_text("spark.driver.extraJavaOptions -XX:+UseZGC\n")
    assert driver_collector("full", {"SPARK_HOME": str(tmp_path)}) == ""


def test_a_collector_is_named_only_by_a_collector_option() -> None:
    from materializers.spark.session import names_collector

    assert names_collector("-Xmx1g -XX:+UseParallelGC") and names_collector("-XX:+UseG1GC")
    assert not names_collector("-XX:-UseG1GC -XX:+UseStringDeduplication -XX:MaxGCPauseMillis=100")
    assert not names_collector("-XX:+UseAdaptiveSizePolicyWithSystemGC")  # a collector's setting


def test_the_drivers_java_options_carry_yours_from_spark_defaults_last(tmp_path: Path) -> None:
    from materializers.spark.session import (
        COMPILE_HUGE_METHODS,
        DRIVER_JIT,
        METASPACE_THRESHOLD,
        java_options,
    )

    env = {"SPARK_CONF_DIR": str(tmp_path)}
    sharing = "-XX:SharedArchiveFile=/c/a.jsa -Xshare:auto"
    ours = f"{COMPILE_HUGE_METHODS} {METASPACE_THRESHOLD}"
    assert java_options("quick", env, sharing) == f"{ours} {DRIVER_JIT['quick']} {sharing}"
    assert java_options("full", env) == f"{ours} {DRIVER_JIT['full']} -XX:+UseParallelGC"
    (tmp_path / "spark-defaults.conf").write_text(
        "spark.driver.extraJavaOptions -Dtoolkit.site=eu -XX:TieredStopAtLevel=4 -XX:+UseG1GC\n"
    )
    # the session's setting replaces the file's: yours come last, and win where both set an option
    assert java_options("quick", env, sharing) == (
        f"{ours} {DRIVER_JIT['quick']} {sharing} -Dtoolkit.site=eu -XX:TieredStopAtLevel=4 -XX:+UseG1GC"
    )
    assert "-XX:+UseParallelGC" not in java_options("full", env)  # your collector, not a second one
