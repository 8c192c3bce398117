"""The wheel holds every package of the source tree and the data files they read at run time."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _declared() -> tuple[list[str], dict[str, str]]:
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    return setuptools["packages"], setuptools.get("package-dir", {})


def test_every_package_and_data_folder_is_declared() -> None:
    """A folder with modules or with schemas read at run time must be listed, or the wheel lacks it."""
    packages, package_dir = _declared()
    found = set()
    for top in {p.split(".")[0] for p in packages}:
        base = ROOT / package_dir.get(top, top)
        for path in [*base.rglob("__init__.py"), *base.rglob("*.avsc")]:
            if "__pycache__" not in path.parts:
                found.add(".".join([top, *path.parent.relative_to(base).parts]))
    assert sorted(found - set(packages)) == [], "add these to [tool.setuptools] packages in pyproject.toml"
