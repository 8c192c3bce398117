"""Debezium CDC: connector management and typed change events."""
