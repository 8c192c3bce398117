"""Example aggregates shipped with the event store (used by the demo and the materializers)."""
