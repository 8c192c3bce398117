"""The CLIs' and the demo's logging: librdkafka's INFO lines never on the console, all of it in the demo's file."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from kafkakit.clients import LIBRDKAFKA_LOGGER, make_consumer
from kafkakit.logs import configure_cli_logging, configure_demo_logging, librdkafka_at_least

RDKAFKA = logging.getLogger(LIBRDKAFKA_LOGGER)
OTHER = logging.getLogger("eventstore.processor")


def record(name: str, level: int) -> logging.LogRecord:
    return logging.LogRecord(name, level, __file__, 1, "a line", None, None)


@pytest.fixture
def bare_root() -> Iterator[Callable[[], None]]:
    """Call it to take pytest's handlers off the root logger so basicConfig configures it (pytest adds
    them only once the test body runs); the root is restored afterwards."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield root.handlers.clear
    for handler in root.handlers:
        if handler not in handlers:
            handler.close()
    root.handlers[:] = handlers
    root.setLevel(level)


@pytest.mark.parametrize(
    ("name", "level", "kept"),
    [
        (LIBRDKAFKA_LOGGER, logging.INFO, False),
        (LIBRDKAFKA_LOGGER, logging.DEBUG, False),
        (LIBRDKAFKA_LOGGER, logging.WARNING, True),
        (LIBRDKAFKA_LOGGER, logging.ERROR, True),
        (LIBRDKAFKA_LOGGER + ".probe", logging.INFO, False),
        ("kafkakit.librdkafkaish", logging.INFO, True),
        ("eventstore.processor", logging.INFO, True),
    ],
)
def test_librdkafka_records_pass_only_from_the_level_up(name: str, level: int, kept: bool) -> None:
    assert librdkafka_at_least(logging.WARNING)(record(name, level)) is kept


def test_a_cli_shows_librdkafka_warnings_but_not_its_info_even_when_verbose(
    bare_root: Callable[[], None], capsys: pytest.CaptureFixture[str]
) -> None:
    bare_root()
    configure_cli_logging(logging.INFO)
    RDKAFKA.info("BGQUEUE purged")
    RDKAFKA.warning("GETPID not yet")
    OTHER.info("partition 0 rebuilt")
    err = capsys.readouterr().err
    assert "BGQUEUE" not in err
    assert "GETPID not yet" in err and "partition 0 rebuilt" in err


def test_the_demo_writes_every_record_to_its_file_and_librdkafka_none_to_the_console(
    bare_root: Callable[[], None], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log_file = tmp_path / "logs" / "demo.log"
    bare_root()
    configure_demo_logging(log_file)
    RDKAFKA.info("BGQUEUE purged")
    RDKAFKA.error("FAIL refused")
    OTHER.warning("could not remove container")
    err = capsys.readouterr().err
    assert "BGQUEUE" not in err and "FAIL" not in err
    assert "could not remove container" in err
    written = log_file.read_text()
    assert "BGQUEUE purged" in written and "FAIL refused" in written and "could not remove" in written


def test_a_real_clients_lines_reach_the_demo_log_and_not_stderr(
    bare_root: Callable[[], None], tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    log_file = tmp_path / "demo.log"
    bare_root()
    configure_demo_logging(log_file)
    consumer = make_consumer({"bootstrap.servers": "127.0.0.1:1", "group.id": "kafkakit-logs-test"})
    deadline = time.monotonic() + 5
    try:
        while "Connect to" not in log_file.read_text() and time.monotonic() < deadline:
            consumer.poll(0.1)
    finally:
        consumer.close()
    assert "ERROR kafkakit.librdkafka: FAIL [rdkafka#consumer-" in log_file.read_text()
    assert capfd.readouterr().err == ""
