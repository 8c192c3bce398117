"""The code blocks of the README and the docs, as the docs tests see them.

A Python or shell block is one of:
- *runnable*: no marker; the test runs it against the stack (a page's Python blocks together, in
  order, as one script; each shell block on its own, with `bash -euo pipefail`);
- *included*: its body is a snippet line (`--8<-- "docs/examples/x.py"`), a file that
  tests/integration/docs/test_runnable_examples.py runs;
- *not run*: the last non-blank line before it is `<!-- not-run: why -->`, the reason in words.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
LANGUAGES = {"python": "python", "py": "python", "bash": "bash", "sh": "bash", "shell": "bash"}
NOT_RUN = re.compile(r"^<!--\s*not-run:\s*(.*?)\s*-->$")
SNIPPET = re.compile(r'^--8<--\s+"([^"]+)"$')


@dataclass(frozen=True, slots=True)
class Block:
    page: Path
    line: int  # of the opening fence, 1-based
    language: str  # "python" or "bash"
    body: str
    not_run: str | None  # the marker's reason, None when there is no marker

    @property
    def included(self) -> str | None:
        found = SNIPPET.match(self.body.strip())
        return found.group(1) if found else None

    @property
    def runnable(self) -> bool:
        return self.not_run is None and self.included is None

    def __str__(self) -> str:
        return f"{self.page.relative_to(REPO)}:{self.line}"


def pages() -> list[Path]:
    return [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]


def blocks(page: Path) -> list[Block]:
    """The Python and shell blocks of `page`, in order."""
    found, lines = [], page.read_text().split("\n")
    i = 0
    while i < len(lines):
        if lines[i].startswith("```"):
            language = (
                lines[i][3:].strip().removeprefix("{").removesuffix("}").strip().split(" ")[0].lstrip(".")
            )
            end = next(j for j in range(i + 1, len(lines)) if lines[j].startswith("```"))
            if language in LANGUAGES:
                before = next((x.strip() for x in reversed(lines[:i]) if x.strip()), "")
                marker = NOT_RUN.match(before)
                body = "\n".join(lines[i + 1 : end]) + "\n"
                found.append(
                    Block(page, i + 1, LANGUAGES[language], body, marker.group(1) if marker else None)
                )
            i = end
        i += 1
    return found
