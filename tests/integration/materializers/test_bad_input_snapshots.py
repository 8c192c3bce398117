"""Bad input for snapshot / restore / rebuild: exit 2, a message naming the fix, nothing changed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from materializers.cli import main
from materializers.ops import snapshots

pytestmark = pytest.mark.integration


def files(home: Path) -> list[str]:
    return sorted(str(p.relative_to(home)) for p in home.rglob("*")) if home.exists() else []


def test_unknown_snapshot_and_nothing_committed(
    cli_env: Path, topics: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    topic = topics("mat-bad-snap")
    assert main(["restore", "products", "20990101T000000-abcdef", "--topic", topic]) == 2
    err = capsys.readouterr().err
    assert (
        "no snapshot '20990101T000000-abcdef' for products" in err
        and "materializers snapshot products" in err
    )
    assert main(["snapshot", "products", "--topic", topic]) == 2
    assert "has no committed batch" in capsys.readouterr().err
    assert files(cli_env) == []


def test_snapshot_of_another_materializer(
    cli_env: Path, topics: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    topic = topics("mat-bad-snap")
    owned = cli_env / "orders" / snapshots.SNAPSHOTS_DIR / "s1"
    owned.mkdir(parents=True)
    manifest = {
        "id": "s1", "materializer": "orders", "topic": topic, "generation": "", "app_id": "a", "created_at": 0.0,
        "committed_batch": 0, "offsets": {topic: {"0": 1}}, "redis_keys": 0, "search": False, "delta_versions": {},
    }  # fmt: skip
    (owned / snapshots.MANIFEST).write_text(json.dumps(manifest))
    (owned / snapshots.REDIS_DUMP).write_bytes(b"")
    before = files(cli_env)
    assert main(["restore", "products", "s1", "--topic", topic]) == 2
    err = capsys.readouterr().err
    assert "belongs to materializer 'orders'" in err and "materializers restore orders s1" in err
    assert files(cli_env) == before


def test_rebuild_from_latest(cli_env: Path, topics: Any, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["rebuild", "products", "--topic", topics("mat-bad-snap"), "--from", "latest"]) == 2
    assert "use --from earliest" in capsys.readouterr().err
    assert main(["rebuild", "products", "--topic", "mat-no-such-topic"]) == 2
    assert "input topic 'mat-no-such-topic' does not exist" in capsys.readouterr().err
    assert files(cli_env) == []
