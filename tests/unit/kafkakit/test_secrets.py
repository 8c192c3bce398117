"""Passwords never leave in printed or stored text (pure)."""

from __future__ import annotations

import pytest

from kafkakit.secrets import masked


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "Connect at http://admin:s3cr%40t@connect:8083 does not answer",
            "Connect at http://admin:***@connect:8083 does not answer",
        ),
        ("redis://:hunter2@cache:6379/0 refused", "redis://:***@cache:6379/0 refused"),
        (
            "cannot read public.t (postgresql://dbz:p@ss@db:5432/shop)",
            "cannot read public.t (postgresql://dbz:***@db:5432/shop)",
        ),
        ("host=db user=dbz password=s3cret dbname=shop", "host=db user=dbz password=*** dbname=shop"),
        ('missing "=" after "password=\'a b c\'"', 'missing "=" after "password=***"'),
        (
            "http://connect:8083 and postgresql://dbz@db/shop",
            "http://connect:8083 and postgresql://dbz@db/shop",
        ),
    ],
)
def test_passwords_are_masked_and_users_and_hosts_kept(text: str, expected: str) -> None:
    assert masked(text) == expected


def test_the_clis_never_print_an_endpoints_password(capsys: pytest.CaptureFixture[str]) -> None:
    """Services that do not answer: each CLI names the address it tried, with the password masked."""
    from cdc.cli import main as cdc_main
    from eventstore.cli import main as eventstore_main

    assert cdc_main(["status", "--connect-url", "http://admin:hunter2@127.0.0.1:9"]) != 0
    eventstore_main(
        [
            "schemas", "list", "--json", "--aggregate", "shop.order:ORDER",
            "--bootstrap-servers", "127.0.0.1:9", "--schema-registry-url", "http://reg:hunter2@127.0.0.1:9",
        ]
    )  # fmt: skip
    printed = capsys.readouterr()
    assert "hunter2" not in printed.out + printed.err
    assert "admin:***@127.0.0.1:9" in printed.err and "reg:***@127.0.0.1:9" in printed.out
