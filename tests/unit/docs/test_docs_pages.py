"""The README as the product page and the docs' code blocks, checked without services: the README is
short, keeps `make demo` and `make test`, holds no dated run-by-run history and links only to files
that exist; every Python and shell block of the README and the docs is run by a test, included from a
script that is, or says why it is not (docs/hooks/codeblocks.py)."""

from __future__ import annotations

import re

from docs.hooks.codeblocks import REPO, blocks, pages

README = REPO / "README.md"
EXAMPLES = REPO / "docs" / "examples"


def test_readme_is_a_product_page() -> None:
    text = README.read_text()
    assert len(text.splitlines()) <= 200, "README.md is over 200 lines: move detail into docs/"
    assert "make demo" in text and "make test" in text
    assert "pip install" in text
    assert any(b.language == "python" and b.runnable for b in blocks(README)), "no runnable example"


def test_readme_holds_no_dated_measurements() -> None:
    dated = [line for line in README.read_text().splitlines() if re.search(r"\b20\d\d-\d\d-\d\d\b", line)]
    assert not dated, f"dated measurements belong in bench/results/history.md: {dated}"


def test_readme_links_resolve() -> None:
    links = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", README.read_text())
    missing = [link for link in links if "://" not in link and not (REPO / link).exists()]
    assert not missing, f"README.md links to files that do not exist: {missing}"


def test_every_block_is_run_or_says_why_not() -> None:
    problems = []
    for page in pages():
        for block in blocks(page):
            if block.not_run is not None and len(block.not_run) < 15:
                problems.append(f"{block}: a not-run marker needs its reason in words")
            if block.included is not None:
                target = REPO / block.included
                if target.parent != EXAMPLES or target.suffix not in (".py", ".yaml"):
                    problems.append(f"{block}: includes {block.included}, which no test runs")
                elif not target.is_file():
                    problems.append(f"{block}: includes {block.included}, which does not exist")
    assert not problems, "\n".join(problems)


def test_some_docs_blocks_are_run() -> None:
    runnable = [b for page in pages() for b in blocks(page) if b.runnable]
    included = [b for page in pages() for b in blocks(page) if b.included]
    assert len(runnable) >= 5 and len(included) >= 6, (len(runnable), len(included))
