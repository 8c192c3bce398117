"""The toolkit's root exception; every package's errors.py derives from it."""

from __future__ import annotations


class ToolkitError(Exception):
    """Root of every error this toolkit raises on purpose; messages say what to do next."""


class ConfigError(ToolkitError):
    """A setting is missing or malformed."""


class KafkaClientConfigInvalid(ConfigError):
    """A Kafka client security setting is unknown, inconsistent, untranslatable or names a missing file."""


class BadStartPosition(ToolkitError):
    """A start position (offsets, timestamp) cannot be parsed or does not exist in the topic."""


class KafkaAccessRefused(ConfigError):
    """A Kafka broker refused the client's credentials or the client refused the broker's certificate."""


class HttpAuthInvalid(ConfigError):
    """Connect's, the registry's or Redis's login/TLS settings are inconsistent or name a missing file."""


class ServiceAccessRefused(ConfigError):
    """Connect, the schema registry or Redis refused the login, or the TLS handshake failed."""
