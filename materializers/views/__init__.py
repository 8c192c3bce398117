"""Internal: the built-in views. The Redis cache (`redis_cache`), the search index (`search/`: Tantivy
or OpenSearch), the Delta warehouse (`warehouse/`) and the Postgres read model (`read_model`), each
behind the `View` protocol (`materializers.view`).

Use them through a `Materializer`'s `builtin_views` and `materializers.read_model`; modules here may
move without notice.
"""
