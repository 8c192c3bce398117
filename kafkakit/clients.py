"""Every confluent-kafka client the toolkit builds, with librdkafka's log lines sent into Python logging.

Why: a client built without a `logger` lets librdkafka write its own lines (`%6|…|BGQUEUE|…`,
`%4|…|GETPID|…`) straight onto the process's stderr, from its own threads, past any logging setup:
they land between a CLI's results and between the demo's narrated steps. Given a `logging.Logger` under
the `logger` key, confluent-kafka turns on librdkafka's `log.queue` and hands each line to that logger
as a record, `"<FACILITY> [rdkafka#<client>] [thrd:…]: <text>"`, at the level mapped from syslog's
(0-2 CRITICAL, 3 ERROR, 4 WARNING, 5-6 INFO, 7 DEBUG). Where the record goes is then decided by the
application's logging setup like every other record (kafkakit.logs for the CLIs and the demo).

Guarantees and assumptions (measured with confluent-kafka 2.16.1, librdkafka 2.16.0):
- nothing librdkafka logs is written to stderr by librdkafka itself, whichever client type;
- the records are emitted on the application thread that serves the client's queue, never on a
  librdkafka thread, and only when it is served: a Consumer in poll(), consume() and close(); a Producer
  in poll() and flush() (commit_transaction() flushes); an AdminClient only in poll(), which none of
  its admin calls does (confluent-kafka-python#1734) — `admin_client()` therefore polls once when its
  block ends. Lines logged after a client's last serve are dropped, not printed: BGQUEUE at destroy,
  and TERMINATE for a producer destroyed with messages undelivered (whose owner learns of them from
  flush()'s return value anyway);
- the logger is the only setting added: every other setting is the caller's, unchanged.

confluent_kafka is imported inside the builders, as the CLIs do, so that importing this module (and
`cdc --help`) does not pay for loading librdkafka.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from confluent_kafka import Consumer, Producer
    from confluent_kafka.admin import AdminClient

LIBRDKAFKA_LOGGER = "kafkakit.librdkafka"


def librdkafka_logger() -> logging.Logger:
    """The one logger every client's librdkafka lines go to (each line names its client already)."""
    return logging.getLogger(LIBRDKAFKA_LOGGER)


def with_logger(config: Mapping[str, Any], logger: logging.Logger | None = None) -> dict[str, Any]:
    """A copy of `config` whose `logger` is `logger` (default: the toolkit's librdkafka logger).

    A `logger` already in `config` is replaced: passing one on purpose is what the keyword is for
    (devstack's readiness probes pass a silenced one while the broker boots).
    """
    return {**config, "logger": logger if logger is not None else librdkafka_logger()}


def make_producer(config: Mapping[str, Any], *, logger: logging.Logger | None = None) -> Producer:
    """A Producer whose librdkafka lines reach `logger` on poll() and flush()."""
    from confluent_kafka import Producer

    return Producer(with_logger(config, logger))


def make_consumer(config: Mapping[str, Any], *, logger: logging.Logger | None = None) -> Consumer:
    """A Consumer whose librdkafka lines reach `logger` on poll(), consume() and close()."""
    from confluent_kafka import Consumer

    return Consumer(with_logger(config, logger))


def make_admin(config: Mapping[str, Any], *, logger: logging.Logger | None = None) -> AdminClient:
    """An AdminClient whose librdkafka lines reach `logger` only when its owner calls poll().

    Its admin calls never serve its log queue: unpolled, the lines are dropped (still never printed).
    Prefer `admin_client()`, which polls when its block ends; this is for one kept across calls.
    """
    from confluent_kafka.admin import AdminClient

    return AdminClient(with_logger(config, logger))


@contextmanager
def admin_client(config: Mapping[str, Any], *, logger: logging.Logger | None = None) -> Iterator[AdminClient]:
    """An AdminClient for the block; leaving it polls once so the lines its calls caused reach `logger`.

    (An AdminClient's admin calls never serve its log queue; without that poll the lines — a refused
    connection while listing topics, say — would be dropped.)
    """
    admin = make_admin(config, logger=logger)
    try:
        yield admin
    finally:
        admin.poll(0)
