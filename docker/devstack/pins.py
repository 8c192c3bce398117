"""The one set of pinned versions, read from pyproject.toml's [tool.toolkit.pins]."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]


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

    @classmethod
    def load(cls, pyproject: Path = REPO_ROOT / "pyproject.toml") -> Pins:
        with pyproject.open("rb") as fh:
            table = tomllib.load(fh)["tool"]["toolkit"]["pins"]
        return cls(**{k: str(v) for k, v in table.items()})
