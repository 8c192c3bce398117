"""Where a driver finds the Kafka source, Avro and Delta: a setting, the toolkit's cache, or Maven
coordinates Spark resolves itself; never the dev stack or a source tree."""

from __future__ import annotations

import ast
import os
from importlib.metadata import version
from pathlib import Path

import pyspark
import pytest

import materializers
from materializers.errors import MaterializerError
from materializers.spark.session import (
    ENV_SPARK_JARS,
    SIZED_BY_PARALLELISM,
    SparkJars,
    locate_jars,
    packages,
    spark_jar_glob,
)

SPARK, DELTA = version("pyspark"), version("delta-spark")


def _jars(folder: Path, *names: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name in names:
        (folder / name).write_bytes(b"PK")
    return folder


def test_the_setting_names_folders_and_files(tmp_path: Path) -> None:
    folder = _jars(tmp_path / "spark", f"spark-sql-kafka-0-10_2.13-{SPARK}.jar", "kafka-clients.jar")
    extra = _jars(tmp_path / "more", "delta-spark_2.13.jar") / "delta-spark_2.13.jar"
    found = locate_jars({ENV_SPARK_JARS: f"{folder}, {extra}", "TOOLKIT_CACHE": str(tmp_path / "none")})
    assert [Path(f).name for f in found.files] == [
        "kafka-clients.jar",
        f"spark-sql-kafka-0-10_2.13-{SPARK}.jar",
        "delta-spark_2.13.jar",
    ]
    # a local driver's executors are its threads: the files go on its JVM's class path, where its
    # class archive can hold their classes; a cluster's executors fetch them (spark.jars)
    # (after the user's spark.driver.extraClassPath, which Spark's launcher puts first; Spark's own
    # default entry kept)
    # Spark's own jars come next, ahead of the conf folder Spark's launcher puts after this (the JVM
    # maps a class archive only when no folder with files comes before the jars it was made from)
    spark_jars = "/spark/jars/*"
    assert found.conf("local[2]", spark_jars) == {
        "spark.driver.defaultExtraClassPath": os.pathsep.join(("hive-jackson/*", *found.files, spark_jars))
    }
    assert found.on_class_path("local[*]") and not found.on_class_path("spark://m:7077")
    assert found.conf("spark://m:7077", spark_jars) == {
        "spark.jars": ",".join(found.files),
        "spark.driver.defaultExtraClassPath": os.pathsep.join(("hive-jackson/*", spark_jars)),
    }
    assert spark_jar_glob({"SPARK_HOME": "/opt/spark"}) == "/opt/spark/jars/*"
    assert spark_jar_glob({}) == str(Path(pyspark.__file__).parent / "jars" / "*")


def test_a_setting_naming_nothing_usable_is_refused_with_the_fix(tmp_path: Path) -> None:
    with pytest.raises(
        MaterializerError, match=r"names '/no/such', which is neither a \.jar file nor a folder"
    ):
        locate_jars({ENV_SPARK_JARS: "/no/such"})
    without_kafka = _jars(tmp_path / "x", "delta-spark_2.13.jar")
    with pytest.raises(MaterializerError, match=r"holds no spark-sql-kafka-0-10 jar.*or unset it"):
        locate_jars({ENV_SPARK_JARS: str(without_kafka)})


def test_unset_the_toolkit_cache_for_these_versions_then_spark_resolves_coordinates(tmp_path: Path) -> None:
    assert locate_jars({"TOOLKIT_CACHE": str(tmp_path)}) == SparkJars(packages=packages())
    assert not SparkJars(packages=packages()).on_class_path("local[2]")  # Ivy's jars: spark.jars.packages
    assert SparkJars(packages=packages()).conf("local[2]", "/spark/jars/*") == {
        "spark.driver.defaultExtraClassPath": f"hive-jackson/*{os.pathsep}/spark/jars/*",
        "spark.jars.packages": f"org.apache.spark:spark-sql-kafka-0-10_2.13:{SPARK},"
        f"org.apache.spark:spark-avro_2.13:{SPARK},io.delta:delta-spark_2.13:{DELTA}",
    }
    cached = _jars(
        tmp_path / f"spark-{SPARK}-delta-{DELTA}" / "jars", f"spark-sql-kafka-0-10_2.13-{SPARK}.jar"
    )
    assert locate_jars({"TOOLKIT_CACHE": str(tmp_path)}).files == (
        str(cached / f"spark-sql-kafka-0-10_2.13-{SPARK}.jar"),
    )


def test_the_runtime_packages_import_nothing_of_the_dev_stack_or_the_demo() -> None:
    """An installed wheel on a Spark worker has no devstack, no demo and no source tree."""
    offenders = []
    for package in ("kafkakit", "cdc", "eventstore", "materializers"):
        root = Path(materializers.__file__).parent.parent / package
        for module in root.rglob("*.py"):
            for node in ast.walk(ast.parse(module.read_text())):
                names = (
                    [a.name for a in node.names]
                    if isinstance(node, ast.Import)
                    else [node.module or ""]
                    if isinstance(node, ast.ImportFrom)
                    else []
                )
                offenders += [
                    f"{module}: {n}" for n in names if n.split(".")[0] in {"devstack", "demo", "shop"}
                ]
            if "pyproject.toml" in module.read_text():
                offenders.append(f"{module}: reads pyproject.toml")
    assert offenders == []


class _Conf(dict[str, str]):
    def contains(self, key: str) -> bool:
        return key in self

    def set(self, key: str, value: str) -> None:
        self[key] = value


class _Session:
    """Just the attributes `size_by_parallelism` reads: the master's parallelism and the confs."""

    def __init__(self, parallelism: int, configured: dict[str, str]) -> None:
        self.sparkContext = self
        self.defaultParallelism = parallelism
        self._launch = _Conf(configured)
        self.conf = _Conf()

    def getConf(self) -> _Conf:
        return self._launch


def test_partitions_follow_the_masters_parallelism_unless_configured() -> None:
    from materializers.spark.session import size_by_parallelism

    cluster = _Session(48, {})
    size_by_parallelism(cluster)  # type: ignore[arg-type]
    assert cluster.conf == {k: "48" for k in SIZED_BY_PARALLELISM}
    tuned = _Session(48, {"spark.sql.shuffle.partitions": "400"})
    size_by_parallelism(tuned)  # type: ignore[arg-type]
    assert tuned.conf == {"spark.databricks.delta.snapshotPartitions": "48"}  # the user's 400 stands
