from __future__ import annotations

import pytest

from kafkakit.errors import BadStartPosition, ConfigError
from kafkakit.positions import Edge, Offsets, Timestamp, parse_start
from kafkakit.settings import Endpoints


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("earliest", Edge("earliest")),
        ("latest", Edge("latest")),
        ("0:15,2:7", Offsets(((None, 0, 15), (None, 2, 7)))),
        ('{"orders": {"0": 12, "1": -2}}', Offsets((("orders", 0, 12), ("orders", 1, -2)))),
        ("2026-11-25T10:00:00Z", Timestamp(1795600800000)),
        ("2026-11-25T11:00:00+01:00", Timestamp(1795600800000)),
    ],
)
def test_every_accepted_form_parses(text: str, expected: object) -> None:
    assert parse_start(text) == expected


@pytest.mark.parametrize(
    ("text", "complaint"),
    [
        ("0:-3", "non-negative"),
        ('{"orders": [1]}', "must be an object"),
        ('{"orders": {"0": "x"}}', "invalid"),
        ("{not json", "malformed"),
        ("yesterday", "not understood"),
    ],
)
def test_bad_positions_say_what_form_is_expected(text: str, complaint: str) -> None:
    with pytest.raises(BadStartPosition, match=complaint):
        parse_start(text)


def test_flags_override_env_which_overrides_defaults() -> None:
    env = {"KAFKA_BOOTSTRAP_SERVERS": "kafka:9092", "PG_DSN": "postgresql://u@db/x"}
    endpoints = Endpoints.from_env(env).with_overrides(pg_dsn="postgresql://flag@db/y", redis_url=None)
    assert endpoints.kafka_bootstrap_servers == "kafka:9092"
    assert endpoints.pg_dsn == "postgresql://flag@db/y"
    assert endpoints.redis_url == Endpoints().redis_url


def test_unknown_override_is_refused() -> None:
    with pytest.raises(ConfigError, match="unknown endpoint setting"):
        Endpoints().with_overrides(kafka="x")
