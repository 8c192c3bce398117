"""Clients built through kafkakit.clients hand librdkafka's lines to Python logging, never to stderr.

No broker is needed: a bootstrap nothing listens on (127.0.0.1:1) makes librdkafka log a refused
connection (`%3|…|FAIL|…`) at once, which is the line that would otherwise land on the console.
"""

from __future__ import annotations

import gc
import logging
import time
from collections.abc import Callable

import pytest

from kafkakit.clients import (
    LIBRDKAFKA_LOGGER,
    admin_client,
    librdkafka_logger,
    make_consumer,
    make_producer,
    with_logger,
)

UNREACHABLE = {"bootstrap.servers": "127.0.0.1:1"}


def refused(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [
        r
        for r in caplog.records
        if r.name == LIBRDKAFKA_LOGGER and "Connect to" in r.getMessage() and r.levelno == logging.ERROR
    ]


def serve_until_refused(caplog: pytest.LogCaptureFixture, serve: Callable[[], object]) -> None:
    """Serve the client's queue until librdkafka's refused-connection line arrived (5 s at most)."""
    deadline = time.monotonic() + 5
    while not refused(caplog) and time.monotonic() < deadline:
        serve()


def test_with_logger_adds_the_toolkit_logger_and_keeps_every_other_setting() -> None:
    config = {"bootstrap.servers": "b:9092", "enable.idempotence": True}
    built = with_logger(config)
    assert built == {**config, "logger": logging.getLogger(LIBRDKAFKA_LOGGER)}
    assert "logger" not in config  # a copy: the caller's dict is not changed
    assert built["logger"] is librdkafka_logger()


def test_an_explicit_logger_wins() -> None:
    quiet = logging.getLogger("test.quiet")
    assert with_logger({"logger": librdkafka_logger()}, quiet)["logger"] is quiet


def test_a_consumer_logs_a_refused_connection_to_python_logging_not_stderr(
    caplog: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture[str]
) -> None:
    caplog.set_level(logging.DEBUG, logger=LIBRDKAFKA_LOGGER)
    consumer = make_consumer({**UNREACHABLE, "group.id": "kafkakit-clients-test"})
    try:
        serve_until_refused(caplog, lambda: consumer.poll(0.1))
    finally:
        consumer.close()
    record = refused(caplog)[0]
    assert record.getMessage().startswith("FAIL [rdkafka#consumer-")
    assert "127.0.0.1:1" in record.getMessage()
    assert capfd.readouterr().err == ""


def test_a_producer_logs_on_flush(
    caplog: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture[str]
) -> None:
    caplog.set_level(logging.DEBUG, logger=LIBRDKAFKA_LOGGER)
    producer = make_producer(UNREACHABLE)
    serve_until_refused(caplog, lambda: producer.flush(0.1))
    assert refused(caplog)
    assert capfd.readouterr().err == ""


def test_an_admin_client_logs_when_its_block_ends(
    caplog: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture[str]
) -> None:
    """Its admin calls do not serve the log queue (confluent-kafka-python#1734); leaving the block does."""
    caplog.set_level(logging.DEBUG, logger=LIBRDKAFKA_LOGGER)
    with admin_client(UNREACHABLE) as admin, pytest.raises(Exception, match="transport"):
        admin.list_topics(timeout=1)
    assert refused(caplog)
    assert capfd.readouterr().err == ""


def test_lines_logged_at_destroy_are_dropped_not_printed(capfd: pytest.CaptureFixture[str]) -> None:
    """Without a logger, a producer destroyed with a message queued prints `%4|…|TERMINATE|…`."""
    producer = make_producer(UNREACHABLE)
    producer.produce("t", b"x")
    del producer
    gc.collect()
    assert capfd.readouterr().err == ""


def test_librdkafka_levels_map_onto_logging_levels(caplog: pytest.LogCaptureFixture) -> None:
    """`debug` lines (syslog 7) arrive as DEBUG records: the level decides where they go, not librdkafka."""
    caplog.set_level(logging.DEBUG, logger=LIBRDKAFKA_LOGGER)
    consumer = make_consumer({**UNREACHABLE, "group.id": "kafkakit-clients-test", "debug": "generic"})
    try:
        consumer.poll(0.2)
    finally:
        consumer.close()
    init = [r for r in caplog.records if r.name == LIBRDKAFKA_LOGGER and r.getMessage().startswith("INIT")]
    assert init and init[0].levelno == logging.DEBUG
