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
- the logger is the only setting added to a caller's settings, except what `client_config` (a
  `KafkaClientConfig`, kafkakit.client_config) adds: its security settings (SASL, TLS), which every
  client of the toolkit is given through this one merge, and, when it authenticates or speaks TLS, an
  `error_cb` that turns a refused login or an untrusted broker certificate into `KafkaAccessRefused`
  raised from the poll()/flush()/consume() that served it. librdkafka itself only logs those and
  retries forever, so a wrong password would otherwise look like an unreachable broker; both failures
  are permanent until the configuration changes. A caller's setting that contradicts the client config
  is refused (`KafkaClientConfigInvalid`), never silently overridden either way.

confluent_kafka is imported inside the builders, as the CLIs do, so that importing this module (and
`cdc --help`) does not pay for loading librdkafka.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TypedDict, Unpack

from kafkakit.client_config import KafkaClientConfig
from kafkakit.errors import KafkaAccessRefused, KafkaClientConfigInvalid

if TYPE_CHECKING:
    from confluent_kafka import Consumer, KafkaError, Producer
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


def client_settings(
    config: Mapping[str, Any],
    client_config: KafkaClientConfig | None = None,
    logger: logging.Logger | None = None,
) -> dict[str, Any]:
    """`config` + `client_config`'s security settings (+ its `error_cb` when secured) + the logger."""
    merged = dict(config)
    if client_config is not None:
        for key, value in client_config.librdkafka_settings().items():
            if key in merged and merged[key] != value:  # values never quoted: they may be passwords
                raise KafkaClientConfigInvalid(
                    f"a client's own setting {key} contradicts the Kafka client config "
                    f"({client_config.origin}): remove one of them"
                )
            merged[key] = value
        if client_config.secured and "error_cb" not in merged:
            merged["error_cb"] = access_refusal_raiser(
                str(merged.get("bootstrap.servers", "?")), client_config
            )
    return with_logger(merged, logger)


# librdkafka's codes for a refused login: its own (-169) and the broker's SASL_AUTHENTICATION_FAILED.
_AUTHENTICATION = frozenset({-169, 58})
_SSL = -181
# librdkafka also reports -169 when the connection drops during the SASL handshake ("mechanism
# handshake failed: Local: Broker transport failure: broker's supported mechanisms: (n/a)"): no
# credentials were checked, and it reconnects. Seen once on a busy machine after `cdc tail` had read
# its record, which that process then reported as a refused login.
_DROPPED = "broker transport failure"


def access_refusal(code: int, reason: str, bootstrap: str, client_config: KafkaClientConfig) -> str | None:
    """The message for a refused login or an untrusted broker certificate; None for any other error.

    Names the service, the setting and the fix; `reason` is librdkafka's text, which holds no secret.
    """
    where = f"Kafka at {bootstrap} ({client_config.security_protocol}, {client_config.origin})"
    if code in _AUTHENTICATION and _DROPPED not in reason.lower():
        return (
            f"{where} refused the {client_config.sasl_mechanism} login of user "
            f"{client_config.sasl_username!r}: {reason}. Check the user name and password "
            "(KAFKA_CLIENT_SASL_USERNAME / KAFKA_CLIENT_SASL_PASSWORD, or sasl.jaas.config in the "
            "KAFKA_CLIENT_CONFIG file) and that the user has credentials for that mechanism on the "
            "cluster; this client wrote nothing"
        )
    if code == _SSL and "certificate" in reason.lower():
        return (
            f"{where}: the broker's TLS certificate was refused: {reason}. Point KAFKA_CLIENT_SSL_CA_LOCATION "
            "(ssl.truststore.location in the KAFKA_CLIENT_CONFIG file) at the PEM file of the CA that "
            "signed it, or check that the broker's address matches its certificate; this client wrote "
            "nothing"
        )
    return None


def access_refusal_raiser(bootstrap: str, client_config: KafkaClientConfig) -> Callable[[KafkaError], None]:
    """An `error_cb` raising `KafkaAccessRefused` for a refused login or certificate; every other
    error is left to librdkafka, which logs it and retries."""

    def on_error(error: KafkaError) -> None:
        message = access_refusal(error.code(), error.str(), bootstrap, client_config)
        if message is not None:
            raise KafkaAccessRefused(message)

    return on_error


class ClientOptions(TypedDict, total=False):
    """What every builder takes besides the client's own settings."""

    client_config: KafkaClientConfig | None  # the security settings (default: none, PLAINTEXT)
    logger: logging.Logger | None  # where librdkafka's lines go (default: the toolkit's logger)


def make_producer(config: Mapping[str, Any], **options: Unpack[ClientOptions]) -> Producer:
    """A Producer with the security settings, whose librdkafka lines reach the logger on poll() and
    flush()."""
    from confluent_kafka import Producer

    return Producer(client_settings(config, options.get("client_config"), options.get("logger")))


def make_consumer(config: Mapping[str, Any], **options: Unpack[ClientOptions]) -> Consumer:
    """A Consumer with the security settings, whose librdkafka lines reach the logger on poll(),
    consume() and close()."""
    from confluent_kafka import Consumer

    return Consumer(client_settings(config, options.get("client_config"), options.get("logger")))


def make_admin(config: Mapping[str, Any], **options: Unpack[ClientOptions]) -> AdminClient:
    """An AdminClient with the security settings, whose librdkafka lines (and refused logins) reach
    the logger only when its owner calls poll().

    Its admin calls never serve its log queue: unpolled, the lines are dropped (still never printed).
    Prefer `admin_client()`, which polls when its block ends; this is for one kept across calls.
    """
    from confluent_kafka.admin import AdminClient

    return AdminClient(client_settings(config, options.get("client_config"), options.get("logger")))


@contextmanager
def admin_client(config: Mapping[str, Any], **options: Unpack[ClientOptions]) -> Iterator[AdminClient]:
    """An AdminClient for the block; leaving it polls once so the lines its calls caused reach `logger`.

    (An AdminClient's admin calls never serve its log queue; without that poll the lines — a refused
    connection while listing topics, say — would be dropped. A refused login surfaces there too: as
    `KafkaAccessRefused`, chained to the admin call's own timeout.)
    """
    admin = make_admin(config, **options)
    try:
        yield admin
    finally:
        admin.poll(0)
