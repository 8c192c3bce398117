"""The baselines the scenarios compare the toolkit with, side by side in the same run: the Delta job a
user writes from Delta's docs (`delta_job`), the `eventsourcing` library (`eventsourcing_orders`) and a
raw idempotent producer (`raw_producer`). The hand-written Redis and OpenSearch loops stay beside the
scenario that runs them (`scenarios.materializers`, `scenarios.search_backends`)."""
