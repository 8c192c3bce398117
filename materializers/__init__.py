"""PySpark Structured Streaming materializers: Redis cache, search index, Delta warehouse."""
