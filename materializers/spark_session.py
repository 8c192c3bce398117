"""A SparkSession with the Kafka source, Avro and Delta jars taken from local files (no network)."""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

from materializers.errors import MaterializerError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

# Small-machine settings: a materializer's batches are small, so few partitions beat Spark's defaults
# (200 shuffle partitions, 50 Delta snapshot partitions) that mostly schedule empty tasks.
CONF = {
    "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
    "spark.sql.shuffle.partitions": "2",
    "spark.default.parallelism": "2",
    "spark.databricks.delta.snapshotPartitions": "2",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.driver.memory": "1g",
    "spark.sql.streaming.stopGracefullyOnShutdown": "true",
}


def jars() -> list[str]:
    try:
        from devstack.artifacts import spark_jars
    except ImportError as exc:
        raise MaterializerError(
            "devstack is not importable, so the Kafka/Avro/Delta jars cannot be located; install the project "
            "with `pip install -e .`"
        ) from exc
    found = [str(p) for p in spark_jars()]
    if not any("spark-sql-kafka" in j for j in found):
        raise MaterializerError("spark-sql-kafka jar missing from the Spark jar cache; run `make fetch`")
    return found


def build(master: str = "local[2]", app_name: str = "materializers") -> SparkSession:
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.master(master).appName(app_name).config("spark.jars", ",".join(jars()))
    # Executors' Python workers must run this interpreter (its venv has redis, tantivy, ...), not
    # whatever `python3` is first on PATH; pyspark reads the worker's interpreter only from this
    # variable when the driver is a plain Python process (no spark-submit). An explicit setting wins.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    for key, value in CONF.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("WARN")
    return session
