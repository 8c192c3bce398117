"""Kafka plumbing shared by cdc, eventstore and materializers: settings, start positions, errors."""
