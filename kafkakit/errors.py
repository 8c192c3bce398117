"""The toolkit's root exception; every package's errors.py derives from it."""

from __future__ import annotations


class ToolkitError(Exception):
    """Root of every error this toolkit raises on purpose; messages say what to do next."""


class ConfigError(ToolkitError):
    """A setting is missing or malformed."""


class BadStartPosition(ToolkitError):
    """A start position (offsets, timestamp) cannot be parsed or does not exist in the topic."""
