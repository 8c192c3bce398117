"""Kafka plumbing shared by cdc, eventstore and materializers: settings, start positions, errors,
the client builders (librdkafka's lines into Python logging) and the CLIs' logging setup."""
