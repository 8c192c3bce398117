"""The event store's physical limit: a confluent-kafka idempotent producer writing the same event bytes.

`raw_worker` sends prebuilt (key, Avro value, headers) records to a topic with the store's partition
count and partitioner, after one record to get its producer id and metadata, and puts its timings on
`out`: no transaction, no reply, no dedup record. Runs in a process of its own.
"""

from __future__ import annotations

import time
from typing import Any


def raw_worker(
    bootstrap: str, topic: str, records: list[Any], partitions: int, barrier: Any, out: Any
) -> None:
    from eventstore.topics import partition_for
    from kafkakit.clients import make_producer

    producer = make_producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5})
    key, value, headers = records[0]
    producer.produce(topic, key=key, value=value, headers=headers)  # producer id + metadata first
    producer.flush(30)
    barrier.wait(120)
    started = time.time()
    for key, value, headers in records:
        while True:
            try:
                producer.produce(
                    topic,
                    key=key,
                    value=value,
                    headers=headers,
                    partition=partition_for(key.decode(), partitions),
                )
                break
            except BufferError:
                producer.poll(0.05)
    left = producer.flush(60)
    assert left == 0, f"{left} records not delivered"
    out.put({"start": started, "end": time.time(), "events": len(records), "lat": [], "phases": []})
