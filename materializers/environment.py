"""The materializers' environment variables (the reference's and the CLI's check's one source; the
shared ones are in `kafkakit.environment`). The forms reuse the parsers `RunConfig` converts values
with, so a value the check accepts is one the job reads."""

from __future__ import annotations

from kafkakit.environment import (
    HTTP_URL,
    NON_NEGATIVE_INT,
    PATH,
    POSITIVE_INT,
    TEXT,
    Form,
    Variable,
    choice,
    pattern,
)
from materializers.config import (
    normalize_trigger,
    parse_driver_rows,
    parse_max_offsets,
    parse_views,
)

SECTION = "Materializers"
MASTER = pattern(
    "local, local[N], local[*] or a cluster's URL (spark://host:7077)",
    r"local(\[(\d+|\*)(,\d+)?\])?|yarn|[a-z][a-z0-9+.-]*://\S+",
    "lokal",
)
TRIGGER = Form("a duration: 250ms, 1s, 2m (or Spark's '1 second')", normalize_trigger, "often")
VIEWS = Form("view names separated by commas (cache, search, warehouse, or your own)", parse_views, "cache,!")
MAX_OFFSETS = Form("a non-negative integer (0: no cap)", parse_max_offsets, "many")
DRIVER_ROWS = Form("auto, or a non-negative integer (0: never from the driver)", parse_driver_rows, "lots")
JARS = pattern("jar files and/or folders, separated by commas", r"[^,]+(,[^,]+)*", ",")
MEMORY = pattern("a JVM memory size: 2g, 1536m", r"(?i)\d+[kmgt]?b?", "lots")
MALLOC_CONF = pattern("jemalloc's option:value list", r"\w+:[^,:]+(,\w+:[^,:]+)*", "muzzy")


def _var(name: str, form: Form, example: str, meaning: str, *flags: str, default: str = "") -> Variable:
    return Variable(
        name=name, form=form, example=example, meaning=meaning, used_by=("materializers", "demo"),
        flags=flags, default=default, section=SECTION,
    )  # fmt: skip


VARIABLES: tuple[Variable, ...] = (
    _var("MATERIALIZERS_HOME", PATH, "/var/lib/materializers", "state directory: checkpoints, the Tantivy index, Delta tables, status files", "--home", default=".materializers"),
    _var("MATERIALIZERS_MASTER", MASTER, "local[2]", "the Spark master", "--master", default="local[*]"),
    _var("SPARK_MASTER_URL", MASTER, "spark://spark:7077", "the Spark master every Spark tool of a deployment shares, when MATERIALIZERS_MASTER is unset"),
    _var("MATERIALIZERS_TRIGGER", TRIGGER, "500ms", "the micro-batch interval", "--trigger", default="250ms"),
    _var("MATERIALIZERS_OPTIMIZE_EVERY", POSITIVE_INT, "50", "Delta compaction every N batches", default="50"),
    _var("MATERIALIZERS_VIEWS", VIEWS, "cache,warehouse", "which of the materializer's views a run keeps (unset: all)", "--views"),
    _var("MATERIALIZERS_MAX_OFFSETS_PER_TRIGGER", MAX_OFFSETS, "100000", "a cap on records per micro-batch", "--max-offsets-per-trigger", default="0"),
    _var("MATERIALIZERS_SMALL_BATCH_ROWS", DRIVER_ROWS, "50000", "a batch of at most this many records is applied whole from the driver", "--small-batch-rows", default="auto"),
    _var("MATERIALIZERS_WAREHOUSE_DRIVER_ROWS", DRIVER_ROWS, "50000", "warehouse batches of at most this many changes are written from the driver with delta-rs", "--warehouse-driver-rows", default="auto"),
    _var("MATERIALIZERS_SEARCH_BACKEND", choice("tantivy", "opensearch"), "opensearch", "where the search view lives", "--search-backend", default="tantivy"),
    _var("OPENSEARCH_URL", HTTP_URL, "http://127.0.0.1:19200", "OpenSearch's address (search backend opensearch)", "--opensearch-url", default="http://127.0.0.1:19200"),
    _var("MATERIALIZERS_OPENSEARCH_REPLICAS", NON_NEGATIVE_INT, "1", "replicas of a new OpenSearch index (unset: the cluster's data nodes minus one, at most 1)"),
    _var("MATERIALIZERS_TOPIC", TEXT, "shop.public.products", "the input topic (unset: the materializer's)"),
    _var("MATERIALIZERS_TABLE", TEXT, "public.products", "the Postgres table `verify` compares a CDC view with"),
    _var("MATERIALIZERS_DLQ_TOPIC", TEXT, "shop.public.products.dlq", "the dead-letter topic (unset: <topic>.dlq)"),
    _var("MATERIALIZERS_REDIS_PREFIX", TEXT, "mat", "the Redis key prefix", "--redis-prefix", default="mat"),
    _var("MATERIALIZERS_DRIVER_JIT", choice("auto", "quick", "live", "full"), "live", "the driver JVM's profile: quick (C1 only), live (C1 then C2), full (C2 and the parallel collector); auto picks full for a backfill, quick otherwise", default="auto"),
    _var("MATERIALIZERS_JVM_CACHE", PATH, "off", "where the driver's JVM class archive lives, or off", default="~/.cache/kafka-toolkit/jvm"),
    _var("MATERIALIZERS_SPARK_JARS", JARS, "/opt/jars", "the Kafka source, Avro and Delta jars (unset: the toolkit's cache, else Maven coordinates)"),
    _var("MATERIALIZERS_FAILPOINT", TEXT, "batch:/tmp/marker", "tests only: the driver touches the marker and blocks at that step"),
    _var("SPARK_DRIVER_MEMORY", MEMORY, "4g", "Spark's own: the driver's heap (local master default: a quarter of the host's memory, at least 1 GiB)"),
    _var("ARROW_DEFAULT_MEMORY_POOL", choice("jemalloc", "mimalloc", "system"), "jemalloc", "Arrow's own: the pool the driver collects batches into (unset: jemalloc)"),
    _var("JE_ARROW_MALLOC_CONF", MALLOC_CONF, "muzzy_decay_ms:-1", "jemalloc's settings for Arrow's copy (unset: muzzy_decay_ms:-1 when materializers loads first)"),
)  # fmt: skip
