"""An append-only, exactly-once event store on Kafka."""
