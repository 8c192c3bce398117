"""CLI input errors that are caught before anything is sent (no services needed)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from eventstore.cli import exit_code, main
from eventstore.errors import SubjectsNeedMigration

# Unreachable endpoints: these commands must fail on the input before touching any service.
OFFLINE = ["--bootstrap-servers", "127.0.0.1:1", "--schema-registry-url", "http://127.0.0.1:1", "--json"]


def run(capsys: Any, *argv: str) -> tuple[int, dict[str, Any], str]:
    aggregate = [] if "--aggregate" in argv else ["--aggregate", "shop.order:ORDER"]
    code = main([*argv, *OFFLINE, *aggregate])
    captured = capsys.readouterr()
    return code, json.loads(captured.out.splitlines()[-1]), captured.err


def test_unknown_command_type_names_the_known_ones(capsys: Any) -> None:
    code, doc, err = run(capsys, "execute", "--command", "order.explode", "--data", "{}")
    assert code == 2 and doc["error"] == "ConfigError"
    assert "unknown command type 'order.explode'" in doc["message"] and "order.create" in doc["message"]
    assert "order.explode" in err


def test_malformed_json_payload_shows_an_example(capsys: Any) -> None:
    code, doc, _ = run(capsys, "execute", "--command", "order.create", "--data", "{order_id: 1")
    assert code == 2 and "--data is not JSON" in doc["message"] and '{"order_id": "42"}' in doc["message"]


def test_json_that_is_not_an_object_is_refused(capsys: Any) -> None:
    code, doc, _ = run(capsys, "execute", "--command", "order.create", "--data", "[1, 2]")
    assert code == 2 and "must be a JSON object" in doc["message"]


@pytest.mark.parametrize(
    ("data", "field"),
    [
        ({"order_id": "1", "sku": "x", "quantity": "many", "unit_price_cents": 1}, "quantity"),
        ({"order_id": "1", "sku": "x", "unit_price_cents": 1}, "quantity"),
        ({"order_id": "1", "sku": "x", "quantity": 1, "unit_price_cents": 1, "qty": 2}, "qty"),
    ],
)
def test_schema_violation_names_the_field(capsys: Any, data: dict[str, Any], field: str) -> None:
    code, doc, _ = run(capsys, "execute", "--command", "order.add_line", "--data", json.dumps(data))
    assert code == 5 and doc["error"] == "SchemaViolation" and doc["field"] == field


def test_unknown_aggregate_says_how_to_write_it(capsys: Any) -> None:
    code, doc, _ = run(capsys, "schemas", "list", "--aggregate", "nowhere.module:THING")
    assert code == 2 and "write module:attribute" in doc["message"]


def test_no_aggregate_named_says_how_to_name_one(capsys: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The toolkit has no domain of its own: a store without an aggregate is refused, not defaulted."""
    monkeypatch.delenv("EVENTSTORE_AGGREGATE", raising=False)
    code = main(["schemas", "list", *OFFLINE])
    doc = json.loads(capsys.readouterr().out)
    assert code == 2 and "give --aggregate module:attribute" in doc["message"]
    assert "EVENTSTORE_AGGREGATE" in doc["message"]


def test_bad_start_position_is_a_usage_error(capsys: Any) -> None:
    code, doc, _ = run(capsys, "subscribe", "--from", "yesterday-ish")
    assert code == 2 and doc["error"] == "BadStartPosition" and "use earliest, latest" in doc["message"]


def test_unknown_subcommand_exits_2(capsys: Any) -> None:
    with pytest.raises(SystemExit) as info:
        main(["explode"])
    assert info.value.code == 2
    assert "invalid choice" in capsys.readouterr().err


def test_schemas_help_describes_the_subjects_and_migrate(capsys: Any) -> None:
    with pytest.raises(SystemExit) as info:
        main(["schemas", "--help"])
    assert info.value.code == 0
    text = capsys.readouterr().out
    assert "<topic>-<record full name>" in text and "migrate" in text and "exit 7" in text


def test_a_store_still_under_the_old_subjects_exits_7() -> None:
    refused = SubjectsNeedMigration(
        "run eventstore schemas migrate", store="s", subjects=("s-order.created",)
    )
    assert exit_code(refused) == 7


def test_text_from_the_outside_is_printed_as_is_not_as_markup(capsys: Any) -> None:
    """Rich would read `[/x]` in a message as a closing tag (and fail) or `[bold]` as style."""
    code = main(["schemas", "list", *OFFLINE[:-1], "--aggregate", "no[/x]where.mod:[bold]T"])
    err = capsys.readouterr().err
    assert code == 2 and "'no[/x]where.mod:[bold]T'" in err
