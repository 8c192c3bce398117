"""Internal: running materializers. One streaming query per job (`job`), the driver loop that runs
several (`driver_loop`), the Kafka source and its topics (`kafka_topics`), batch sizing, the
checkpoint's identity and offsets, dead letters, status, stop requests and the batch timeline.

Modules here may move without notice; use `materializers.run` and `materializers.testing`.
"""
