"""Internal: from Kafka records to changes. Debezium's JSON and Avro envelopes, the event store's
Avro records, Spark's Avro decoding, and the one change shape every decoder produces (`changes`).

The public names (`DebeziumDecoder`, `EventDecoder`, `CHANGE_COLUMNS`, `WriterSchemas`) are exported
by `materializers`; import them from there, not from here: modules here may move without notice.
"""
