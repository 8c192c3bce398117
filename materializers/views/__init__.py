"""The three views a materializer keeps: Redis cache, Tantivy search index, Delta warehouse."""
