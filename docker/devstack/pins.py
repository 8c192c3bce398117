"""The one set of pinned versions, read from pyproject.toml's [tool.toolkit.pins].

An installed toolkit (a wheel: no pyproject.toml beside it) reads `pins.json`, shipped in this package:
a copy of that table, which tests/unit/test_pins.py keeps equal to it (the Spark jars a materializer
driver passes as `spark.jars`, and the local stack, are named after these versions).
"""

from __future__ import annotations

import json
import tomllib
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
PACKAGE_COPY = Path(__file__).with_name("pins.json")


@dataclass(frozen=True, slots=True, kw_only=True)
class Pins:
    java: str
    postgres: str
    kafka: str
    scala: str
    log4j: str
    debezium: str
    apicurio: str
    apicurio_converter: str
    redis: str
    spark: str
    delta: str
    opensearch: str

    @classmethod
    def load(cls, pyproject: Path = REPO_ROOT / "pyproject.toml") -> Pins:
        """The source tree's pins; an installed toolkit's (no pyproject.toml there) from `pins.json`."""
        if not pyproject.is_file():
            return cls(**json.loads(PACKAGE_COPY.read_text()))
        with pyproject.open("rb") as fh:
            table = tomllib.load(fh)["tool"]["toolkit"]["pins"]
        return cls(**{k: str(v) for k, v in table.items()})
