"""Dead letters: records a job cannot decode or apply go to a Kafka topic; the job keeps running.

A dead letter keeps the original key and value bytes and carries headers `dlq-error`,
`dlq-source-topic`, `dlq-source-partition`, `dlq-source-offset`, `dlq-materializer`, so it can be
inspected and replayed. Delivery is at-least-once: a micro-batch re-run after a crash may write the
same dead letter twice (the source coordinates identify duplicates).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from kafkakit.client_config import PLAINTEXT, KafkaClientConfig
from kafkakit.limits import DEAD_LETTER_MAX_RECORD_BYTES, producer_buffer_bytes
from materializers.views.redis_cache import REJECT_DDL, Reject

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

H_ERROR = "dlq-error"
H_TOPIC = "dlq-source-topic"
H_PARTITION = "dlq-source-partition"
H_OFFSET = "dlq-source-offset"
H_MATERIALIZER = "dlq-materializer"


def rejects_frame(spark: SparkSession, rejects: Sequence[Reject]) -> DataFrame:
    """What views refused, as error rows (topic, partition, offset, error). Views are handed
    coordinates only: shipping every record's bytes through the shuffle and to the Python workers,
    for the rare refusal, cost more than the rest of the change."""
    return spark.createDataFrame(list(rejects), REJECT_DDL)


def write(
    errors: DataFrame,
    *,
    bootstrap: str,
    topic: str,
    materializer: str,
    client_config: KafkaClientConfig = PLAINTEXT,
) -> None:
    """Write error rows (key, value, topic, partition, offset, error) to the dead-letter topic."""
    from pyspark.sql import functions as F

    def h(name: str, col: Column) -> Column:
        return F.struct(F.lit(name).alias("key"), col.cast("string").cast("binary").alias("value"))

    out = errors.select(
        "key",
        "value",
        F.array(
            h(H_ERROR, F.col("error")),
            h(H_TOPIC, F.col("topic")),
            h(H_PARTITION, F.col("partition")),
            h(H_OFFSET, F.col("offset")),
            h(H_MATERIALIZER, F.lit(materializer)),
        ).alias("headers"),
    )
    (
        out.write.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .options(**client_config.spark_options())  # the Java client's SASL/TLS settings
        .option("topic", topic)
        .option("kafka.max.request.size", str(DEAD_LETTER_MAX_RECORD_BYTES))
        .option("kafka.buffer.memory", str(producer_buffer_bytes(DEAD_LETTER_MAX_RECORD_BYTES)))
        .save()
    )
