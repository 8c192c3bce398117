"""The peer: the PySpark job a user writes from Delta's docs to keep a table of Debezium's products topic.

Kafka source -> decode (`from_json` for JsonConverter records, with or without the inline schema;
`from_avro` on the body after the 5-byte Confluent header, with the writer schema fetched from the
registry once) -> `foreachBatch`: the newest change per key (row_number over the source LSN) ->
Delta `MERGE`. Nothing else: no history table, no batch-id idempotence, no TOAST placeholders, no
dead letters. `bench/scenarios/cdc_formats.py` runs it beside the products materializer's warehouse view.

Alone: `spark-submit --packages <spark-sql-kafka, spark-avro, delta-spark> bench/peers/delta_job.py
BOOTSTRAP TOPIC FORMAT REGISTRY_URL TABLE_PATH CHECKPOINT` (FORMAT: json | json-schemaless | avro).
"""

from __future__ import annotations

import sys
from collections.abc import Callable

import httpx
from delta.tables import DeltaTable
from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql.avro.functions import from_avro
from pyspark.sql.streaming.query import StreamingQuery

ROW = "id int, name string, description string, price string, stock int"
CHANGE = f"before struct<{ROW}>, after struct<{ROW}>, source struct<lsn: long>, op string"
COLUMNS = ("name", "description", "price", "stock")


def changes(records: DataFrame, fmt: str, registry_url: str, topic: str) -> DataFrame:
    """One row per change: key, LSN, op and the row's columns after it (null for a delete)."""
    if fmt == "avro":
        latest = httpx.get(f"{registry_url}/subjects/{topic}-value/versions/latest").json()
        change = from_avro(F.expr("substring(value, 6)"), latest["schema"])
    elif fmt == "json":  # Connect's envelope: {"schema": ..., "payload": <the change>}
        change = F.from_json(F.col("value").cast("string"), f"payload struct<{CHANGE}>")["payload"]
    else:
        change = F.from_json(F.col("value").cast("string"), CHANGE)
    c = records.where("value IS NOT NULL").select(change.alias("c"))  # tombstones carry nothing
    return c.select(
        F.coalesce("c.after.id", "c.before.id").alias("id"),
        F.col("c.source.lsn").alias("lsn"),
        F.col("c.op").alias("op"),
        *[F.col(f"c.after.{name}").alias(name) for name in COLUMNS],
    )


def upsert(path: str) -> Callable[[DataFrame, int], None]:
    def merge(batch: DataFrame, batch_id: int) -> None:
        newest = Window.partitionBy("id").orderBy(F.col("lsn").desc())
        latest = batch.withColumn("n", F.row_number().over(newest)).where("n = 1").drop("n")
        (
            DeltaTable.forPath(batch.sparkSession, path)
            .alias("t")
            .merge(latest.alias("s"), "t.id = s.id")
            .whenMatchedDelete(condition="s.op = 'd'")
            .whenMatchedUpdateAll(condition="s.op != 'd'")
            .whenNotMatchedInsertAll(condition="s.op != 'd'")
            .execute()
        )

    return merge


def start(
    spark: SparkSession,
    *,
    bootstrap: str,
    topic: str,
    fmt: str,
    registry_url: str,
    path: str,
    checkpoint: str,
    max_offsets: int = 0,
    available_now: bool = False,
) -> StreamingQuery:
    reader = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
    )
    if max_offsets:
        reader = reader.option("maxOffsetsPerTrigger", str(max_offsets))
    decoded = changes(reader.load(), fmt, registry_url, topic)
    DeltaTable.createIfNotExists(spark).location(path).addColumns(decoded.schema).execute()
    writer = decoded.writeStream.foreachBatch(upsert(path)).option("checkpointLocation", checkpoint)
    writer = writer.trigger(availableNow=True) if available_now else writer.trigger(processingTime="1 second")
    return writer.start()


def main(argv: list[str]) -> int:
    bootstrap, topic, fmt, registry_url, path, checkpoint = argv
    spark = SparkSession.builder.appName("peer-delta-job").getOrCreate()
    start(
        spark,
        bootstrap=bootstrap,
        topic=topic,
        fmt=fmt,
        registry_url=registry_url,
        path=path,
        checkpoint=checkpoint,
    ).awaitTermination()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
