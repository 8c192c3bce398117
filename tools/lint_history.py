"""No measurement history in the library's comments and docstrings (`make lint`).

A comment says *why* in words; the run-by-run figures, with the date and run they came from, go to one
history page, bench/results/history.md (house style, "Docs, layout and history"). This check reads every
.py file of the four library packages, takes their comments (`tokenize`) and docstrings (`ast`; other
string literals, such as a user-facing message with an example timestamp, are not looked at), and flags
a sentence that holds

- a date (2026-12-07),
- a pointer to a result file other than the history page (bench/results/<scenario>/latest.md moves), or
- a run figure: a number with a time, size, rate or ratio unit (ms, s, MiB, rows/s, %, 2.5x) in the same
  sentence as a comparison or statistic: `instead of`, `vs`, `median`, `p50`/`p99`, `alternating`,
  `pairs`, `rounds`, `samples`, `scratch`, or two figures joined by `->`, `→` or `from … to …`.

A constant, a default or a limit alone ("16 MiB per partition fetch", "500 ms by default") is not a
run figure. Prints `path:line: text — move the figure …` per finding; exits 1 when there is any.
Usage: `python tools/lint_history.py [path ...]` (default: the four packages, from the repository root).
"""

from __future__ import annotations

import ast
import io
import re
import sys
import tokenize
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("kafkakit", "cdc", "eventstore", "materializers")
ADVICE = "move the figure to bench/results/history.md, keep the reason in words"

DATE = re.compile(r"\b20\d\d-[01]\d-[0-3]\d\b")
_NUMBER = r"~?\d[\d,]*(?:\.\d+)?[kM]?"
_UNIT = (
    r"(?:ns|µs|us|ms|s|sec|seconds?|minutes?|min|h|B|KB|kB|KiB|MB|MiB|GB|GiB|TB|"
    r"(?:rows|events|records|docs|documents|changes|messages|commands)/s|GB/s|MB/s|%|x|\u00d7)"
)
# a number with its unit, a range of them (`1.4-3.3 s`), or one of a series (`0.59 / 0.63 s`)
FIGURE = re.compile(rf"{_NUMBER}(?:\s*[-\u2013/]\s*{_NUMBER})*\s*{_UNIT}(?![\w/])")
STATISTIC = re.compile(
    r"\binstead of\b|\bvs\.?(?!\w)|\bversus\b|\bmedians?\b|\bp(?:50|90|95|99|999)\b|\balternating\b|"
    r"\bpairs\b|\brounds\b|\bsamples\b|\bscratch\b|\bagainst\b|\bfaster\b|\bslower\b|\btook\b|"
    r"\bran\b|\bmeasured\b|\bprofiles?\b|\bJFR\b|\bpy-spy\b|\basync-profiler\b|\bruns?\b|\bin \d+ of \d+\b",
    re.IGNORECASE,
)
# two figures joined: `112 -> 24 ms`, `0.84 → 0.59 s`, `from 17-20 s to 12-15 s`
ARROW = re.compile(rf"{_NUMBER}\s*{_UNIT}?\s*(?:->|→)\s*{_NUMBER}")
FROM_TO = re.compile(rf"\bfrom {_NUMBER}\S*\s*{_UNIT}?\s+to {_NUMBER}", re.IGNORECASE)
# a result file other than the history page: those move with the bench harness, the history stays
RESULT_FILE = re.compile(r"bench/results/(?!history\.md)\S")
# a sentence ends at `.`, `;` or `:` followed by a space (`0.35 s` keeps its decimal point)
SENTENCE_END = re.compile(r"(?<=[.;:])\s+|\n\s*\n")


@dataclass(frozen=True, slots=True, order=True)
class Finding:
    path: Path
    line: int
    text: str

    def __str__(self) -> str:
        shown = self.path.relative_to(REPO) if self.path.is_relative_to(REPO) else self.path
        return f"{shown}:{self.line}: {self.text} — {ADVICE}"


def is_measurement(sentence: str) -> bool:
    """A date, a result file, or a figure with a unit beside a comparison or statistic (pure)."""
    if DATE.search(sentence):
        return True
    if ARROW.search(sentence) or FROM_TO.search(sentence) or RESULT_FILE.search(sentence):
        return True
    return bool(FIGURE.search(sentence) and STATISTIC.search(sentence))


def _comment_blocks(source: str) -> Iterator[tuple[int, str]]:
    """(first line, text) of each run of comments on consecutive lines, `#` removed."""
    block: list[tuple[int, str]] = []
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type != tokenize.COMMENT:
            continue
        line = token.start[0]
        if block and line != block[-1][0] + 1:
            yield block[0][0], "\n".join(text for _, text in block)
            block = []
        block.append((line, token.string.lstrip("#").strip()))
    if block:
        yield block[0][0], "\n".join(text for _, text in block)


def _docstrings(tree: ast.AST) -> Iterator[tuple[int, str]]:
    """(first line, text) of the module's, classes' and functions' docstrings."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            first = node.body[0] if node.body else None
            if (
                isinstance(first, ast.Expr)
                and isinstance(first.value, ast.Constant)
                and isinstance(first.value.value, str)
            ):
                yield first.value.lineno, first.value.value


def _sentences(start: int, text: str) -> Iterator[tuple[int, str]]:
    """(line, sentence) of a block whose first line is `start`."""
    position = 0
    for end in [*SENTENCE_END.finditer(text), None]:
        stop = end.start() if end else len(text)
        sentence = text[position:stop]
        if sentence.strip():
            offset = len(sentence) - len(sentence.lstrip())
            yield start + text.count("\n", 0, position + offset), " ".join(sentence.split())
        if end:
            position = end.end()


def check_source(path: Path, source: str) -> list[Finding]:
    """The findings in one file's comments and docstrings (pure)."""
    blocks = [*_comment_blocks(source), *_docstrings(ast.parse(source, str(path)))]
    return sorted(
        Finding(path, line, sentence if len(sentence) <= 160 else sentence[:157] + "...")
        for start, text in blocks
        for line, sentence in _sentences(start, text)
        if is_measurement(sentence)
    )


def python_files(roots: Iterable[Path]) -> Iterator[Path]:
    for root in roots:
        yield from sorted(root.rglob("*.py")) if root.is_dir() else [root]


def main(argv: Sequence[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    roots = [Path(arg) for arg in args] or [REPO / package for package in PACKAGES]
    findings = [
        finding for path in python_files(roots) for finding in check_source(path, path.read_text("utf-8"))
    ]
    for finding in findings:
        print(finding)
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
