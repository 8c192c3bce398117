"""The README's and the docs' runnable code blocks run against the stack (docs/hooks/codeblocks.py
says which are): a page's Python blocks together, in order, as one script, as a reader would paste
them; each shell block with `bash -euo pipefail` from the checkout, the venv's commands first on PATH.
Each must exit 0, and a `print(...)  # shown` line must print what its comment shows, in order.
What the README's and the guides' blocks create (names starting readme- or guide-, or with _) is
removed after."""

from __future__ import annotations

import ast
import io
import os
import subprocess
import sys
import tokenize
from collections.abc import Iterator

import httpx
import psycopg
import pytest
import redis
from confluent_kafka.admin import AdminClient

from devstack.session import StackHandle
from docs.hooks.codeblocks import REPO, Block, blocks, pages

pytestmark = pytest.mark.integration
PYTHON_PAGES = [p for p in pages() if any(b.runnable and b.language == "python" for b in blocks(p))]
SHELL_BLOCKS = [b for p in pages() for b in blocks(p) if b.runnable and b.language == "bash"]


def environment(stack: StackHandle) -> dict[str, str]:
    path = f"{os.path.dirname(sys.executable)}{os.pathsep}{os.environ.get('PATH', '')}"
    return {**os.environ, **stack.endpoints.as_env(), "PYTHONUNBUFFERED": "1", "PATH": path}


def shown(script: str) -> list[str]:
    """What the script's `print(...)  # shown` statements say they print, in order (pure): the comment
    on the line that closes each print call at the top level or in a `with` block."""
    comments = {
        tok.start[0]: tok.string.lstrip("#").strip()
        for tok in tokenize.generate_tokens(io.StringIO(script).readline)
        if tok.type == tokenize.COMMENT
    }
    found = []
    for node in _straight_line(ast.parse(script).body):
        call = node.value if isinstance(node, ast.Expr) else None
        is_print = isinstance(call, ast.Call) and getattr(call.func, "id", "") == "print"
        if is_print and (comment := comments.get(node.end_lineno or 0)):
            found.append(comment)
    return found


def _straight_line(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """The statements run once, in order: the top level and the bodies of `with` blocks."""
    for node in body:
        yield node
        if isinstance(node, ast.With):
            yield from _straight_line(node.body)


def missing_output(stdout: str, expected: list[str]) -> list[str]:
    """The expected tails that no later line of `stdout` ends with, matched in order (pure)."""
    lines, missing, at = stdout.splitlines(), [], 0
    for tail in expected:
        hit = next((i for i in range(at, len(lines)) if lines[i].rstrip().endswith(tail)), None)
        if hit is None:
            missing.append(tail)
        else:
            at = hit + 1
    return missing


def test_shown_output_is_read_from_print_comments() -> None:
    script = 'print("a", 1)  # 1\nwith open(".") as f:\n    print(\n        "b"\n    )  # b\nfor x in []:\n    print(x)  # x\n'
    assert shown(script) == ["1", "b"]
    assert missing_output("a 1\nnoise\nb\n", ["1", "b"]) == []
    assert missing_output("b\na 1\n", ["1", "b"]) == ["b"]  # in order


@pytest.fixture
def leftovers(toolkit_stack: StackHandle) -> Iterator[None]:
    yield
    env = toolkit_stack.endpoints
    with httpx.Client(timeout=30) as http:
        for name in http.get(f"{env.kafka_connect_url}/connectors").json():
            if name.startswith("readme_"):
                http.delete(f"{env.kafka_connect_url}/connectors/{name}")
    with psycopg.connect(env.pg_dsn, autocommit=True) as pg:
        for (table,) in pg.execute("SELECT tablename FROM pg_tables WHERE tablename LIKE 'readme\\_%'"):
            pg.execute(f'DROP TABLE IF EXISTS "{table}"')
        for (slot,) in pg.execute("SELECT slot_name FROM pg_replication_slots WHERE NOT active"):
            if "readme_" in slot:
                pg.execute("SELECT pg_drop_replication_slot(%s)", (slot,))
    admin = AdminClient(
        {"bootstrap.servers": env.kafka_bootstrap_servers, **env.kafka_client.librdkafka_settings()}
    )
    made = ("readme-", "readme_", "guide-", "__debezium-heartbeat.readme_")
    topics = [t for t in admin.list_topics(timeout=10).topics if t.startswith(made)]
    for future in (admin.delete_topics(topics) if topics else {}).values():
        future.exception(30)
    with redis.Redis.from_url(env.redis_url) as cache:
        for key in cache.scan_iter(match="readme-*", count=500):
            cache.delete(key)


@pytest.mark.parametrize("page", PYTHON_PAGES, ids=[str(p.relative_to(REPO)) for p in PYTHON_PAGES])
def test_python_blocks_run(page, toolkit_stack: StackHandle, leftovers: None, tmp_path) -> None:  # type: ignore[no-untyped-def]
    script = "\n\n".join(b.body for b in blocks(page) if b.runnable and b.language == "python")
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=tmp_path,
        env=environment(toolkit_stack),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, (
        f"{page.name} exited {done.returncode}:\n{done.stdout}\n{done.stderr[-4000:]}"
    )
    missing = missing_output(done.stdout, shown(script))
    assert not missing, f"{page.name} did not print what its comments show: {missing}\n{done.stdout}"


@pytest.mark.parametrize("block", SHELL_BLOCKS, ids=[str(b) for b in SHELL_BLOCKS])
def test_shell_blocks_run(block: Block, toolkit_stack: StackHandle) -> None:
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", block.body],
        cwd=REPO,
        env=environment(toolkit_stack),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, f"{block} exited {done.returncode}:\n{done.stdout}\n{done.stderr[-4000:]}"
