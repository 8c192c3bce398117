"""Record size limits shared by the CDC topics, the connector's producer and the dead-letter topics.

Kafka's defaults (1 MB per record: the producer's max.request.size, the broker's message.max.bytes)
fail a Debezium task on the first row over ~1 MB, and that stops the capture of every table. The
toolkit sets the limit per topic (`max.message.bytes`, which overrides the broker-wide
message.max.bytes) and on the producers that write those topics, so nothing needs changing on the
brokers. The ceiling is the broker's socket.request.max.bytes (100 MiB by default): one produce
request must fit in it.
"""

from __future__ import annotations

MiB = 1 << 20
# Carries a 16 MB row with room for JSON escaping, base64 of bytea and the inline Connect schema.
CDC_MAX_RECORD_BYTES = 32 * MiB
# A dead letter is the source record plus headers, so its topic takes twice the CDC default.
DEAD_LETTER_MAX_RECORD_BYTES = 64 * MiB
# A broker refuses any request over socket.request.max.bytes (default 104857600): stay below it.
BROKER_REQUEST_CEILING_BYTES = 100 * MiB - MiB


def producer_buffer_bytes(max_record_bytes: int) -> int:
    """A producer's buffer.memory must hold a whole record; twice it lets the next batch fill meanwhile."""
    return max(2 * max_record_bytes, 32 * MiB)
