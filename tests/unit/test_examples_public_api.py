"""The materializers' public API is what the examples use: every import of `materializers` in the
examples, the demo, the docs' example scripts and the Python blocks of README.md and docs/ names a
public module and a name in its `__all__`. Everything else in the package is internal (its
sub-packages say so) and may move; an example that reached into it would break with the next move.
"""

from __future__ import annotations

import ast
import importlib
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PUBLIC = (
    "materializers",
    "materializers.aggregates",
    "materializers.testing",
    "materializers.config",
    "materializers.environment",
)
CODE = ("examples", "demo", "docs/examples")
PROSE = ("README.md", "docs")
PYTHON_BLOCK = re.compile(r"^```python[^\n]*\n(.*?)^```", re.M | re.S)


def sources() -> Iterator[tuple[str, str]]:
    """(where, Python source) of every example, demo module and Python block in the docs."""
    for folder in CODE:
        for path in sorted((ROOT / folder).rglob("*.py")):
            yield str(path.relative_to(ROOT)), path.read_text()
    for entry in PROSE:
        for path in sorted([ROOT / entry] if entry.endswith(".md") else (ROOT / entry).rglob("*.md")):
            for n, block in enumerate(PYTHON_BLOCK.findall(path.read_text()), 1):
                yield f"{path.relative_to(ROOT)} (python block {n})", block


def materializers_imports(source: str) -> Iterator[tuple[str, str | None]]:
    """(module, name) of every import from the materializers package; name None for `import m`."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "materializers":
            for alias in node.names:
                yield node.module, alias.name
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "materializers":
                    yield alias.name, None


def public_names(module: str) -> set[str]:
    found = importlib.import_module(module)
    names = getattr(found, "__all__", None)
    return set(names) if names is not None else {n for n in vars(found) if not n.startswith("_")}


def private_imports(source: str) -> list[str]:
    """What `source` imports of the materializers package that is not public (pure but for imports)."""
    wrong = []
    for module, name in materializers_imports(source):
        if module not in PUBLIC:
            wrong.append(f"{module} is internal")
        elif name is not None and name not in public_names(module):
            wrong.append(f"{module}.{name} is not in its __all__")
    return wrong


@pytest.mark.parametrize(("where", "source"), list(sources()), ids=lambda v: v if "\n" not in v else "")
def test_examples_import_only_public_names(where: str, source: str) -> None:
    wrong = private_imports(source)
    assert not wrong, f"{where}: {'; '.join(wrong)}: import from {', '.join(PUBLIC)} instead"


def test_a_private_import_is_caught() -> None:
    assert private_imports("from materializers.runtime.job import Job\nfrom materializers import run") == [
        "materializers.runtime.job is internal"
    ]
    assert private_imports("from materializers import spark") == ["materializers.spark is not in its __all__"]


def test_every_public_name_resolves() -> None:
    for module in PUBLIC:
        for name in public_names(module):
            assert getattr(importlib.import_module(module), name) is not None, f"{module}.{name}"
