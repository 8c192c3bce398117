"""The documentation pages generated from the code, and the mkdocs hook that adds them to the site.

- `reference/cli.md`: every command, subcommand and flag of the CLIs, walked from their argparse
  parsers (`CLIS`); a flag without help text is an error, so a new flag cannot go undocumented.
- `reference/configuration.md`: every environment variable, from the tables the programs check their
  environment against (`kafkakit.environment` and each package's `environment` module).
- `performance/index.md` and `performance/results/*.md`: the current results, from whatever benchmark
  JSON (and the Markdown beside it) lies under `bench/results/` at build time.
- the measurement history, `bench/results/history.md` (the one history), shown in `performance/history.md`.

`tests/unit/docs/test_generated_reference.py` checks the references against the parsers and tables.
"""

from __future__ import annotations

import argparse
import importlib
import json
import re
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
RESULTS = REPO / "bench" / "results"
# program -> "module:function" returning its argparse parser
CLIS = {
    "cdc": "cdc.cli:_parser",
    "eventstore": "eventstore.cli:build_parser",
    "materializers": "materializers.cli:_parser",
    "devstack": "devstack.cli:build_parser",
    "demo": "demo.run:build_parser",
}
CLI_INTROS = {
    "demo": "`make demo`, or `python -m demo.run` with these flags.",
    "devstack": "The local stack (`make up`, `make down`, `make status` call it).",
}


# ---- the CLI reference -------------------------------------------------------------------------------


def parser_of(program: str) -> argparse.ArgumentParser:
    if str(REPO) not in sys.path:  # the demo is a folder of the checkout, not an installed package
        sys.path.insert(0, str(REPO))
    module, _, function = CLIS[program].partition(":")
    parser: argparse.ArgumentParser = getattr(importlib.import_module(module), function)()
    return parser


def commands(parser: argparse.ArgumentParser, path: Sequence[str] = ()) -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser, str]]:  # fmt: skip
    """(command path, its parser, its one-line help) for the parser and every subcommand, depth first."""
    yield tuple(path), parser, ""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help or "" for choice in action._choices_actions}
            for name, sub in action.choices.items():
                for found_path, found, text in commands(sub, (*path, name)):
                    yield found_path, found, text or (helps.get(name, "") if found is sub else "")


def undocumented_flags() -> list[str]:
    """`program subcommand --flag` for every flag that has no help text."""
    missing = []
    for program in CLIS:
        for path, parser, _ in commands(parser_of(program)):
            for action in parser._actions:
                if action.option_strings and action.help in (None, "") and action.dest != "help":
                    missing.append(" ".join((program, *path, action.option_strings[-1])))
    return missing


def _cell(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def _option(action: argparse.Action) -> str:
    names = ", ".join(f"`{o}`" for o in action.option_strings) or f"`{action.metavar or action.dest}`"
    if action.option_strings and action.nargs != 0:
        names += f" `{action.metavar or action.dest.upper()}`"
    return names


def _default(action: argparse.Action) -> str:
    if action.default in (None, False, argparse.SUPPRESS) or action.nargs == 0:
        return ""
    return f"`{action.default}`"


def cli_reference() -> str:
    out = [
        "# Command-line reference",
        "",
        "Generated from the CLIs' own parsers when the site is built: what `--help` says, every flag.",
        "Flags override the environment ([configuration reference](configuration.md)), which overrides",
        "the defaults. A value outside a flag's form ends the command with one line and exit status 2.",
        "",
    ]
    for program in CLIS:
        parser = parser_of(program)
        out += [f"## `{program}`", "", CLI_INTROS.get(program, ""), ""]
        description = (parser.description or "").strip()
        if description:
            out += ["```text", description, "```", ""]
        if parser.epilog:
            out += ["```text", parser.epilog.strip(), "```", ""]
        for path, sub, text in commands(parser):
            rows = [
                a for a in sub._actions if a.dest != "help" and not isinstance(a, argparse._SubParsersAction)
            ]
            if not path and not rows:
                continue
            title = " ".join((program, *path))
            out += [f"### `{title}`" if path else f"### `{program}` (every command)", ""]
            if text:
                out += [_cell(text[0].upper() + text[1:]) + ".", ""]
            usage = sub.format_usage().removeprefix("usage: ").strip()
            out += ["```text", " ".join(usage.split()), "```", ""]
            if rows:
                out += ["| argument | meaning | default |", "|---|---|---|"]
                out += [f"| {_option(a)} | {_cell(a.help or '')} | {_default(a)} |" for a in rows]
                out.append("")
    return "\n".join(out)


# ---- the configuration reference ---------------------------------------------------------------------


def variables() -> tuple[Any, ...]:
    from demo.environment import VARIABLES as DEMO
    from devstack.environment import VARIABLES as STACK
    from eventstore.environment import VARIABLES as STORE
    from kafkakit.environment import SHARED
    from materializers.environment import VARIABLES as MATERIALIZERS

    return (*SHARED, *STORE, *MATERIALIZERS, *DEMO, *STACK)


def configuration_reference() -> str:
    out = [
        "# Configuration reference",
        "",
        "Generated from the tables every program checks its environment against (`kafkakit.environment`",
        "and each package's `environment` module): one source for this page and for the checks. Each",
        "program checks the variables it reads, and the flags that override them, before it starts: a",
        "value outside its form ends it with one line naming the variable, the form and an example, and",
        "exit status 2. An unset or empty variable takes its default. Flags override variables.",
        "",
    ]
    sections: dict[str, list[Any]] = {}
    for variable in variables():
        sections.setdefault(variable.section, []).append(variable)
    for section, found in sections.items():
        out += [f"## {section}", ""]
        out += [
            "| variable | form | default | example | read by | flag | meaning |",
            "|---|---|---|---|---|---|---|",
        ]
        for v in found:
            flags = ", ".join(f"`{f}`" for f in v.flags)
            default = f"`{v.default}`" if v.default else ""
            secret = " (a secret: never printed)" if v.secret else ""
            out.append(
                f"| `{v.name}` | {_cell(v.form.text)} | {default} | `{_cell(v.example)}` | "
                f"{', '.join(v.used_by)} | {flags} | {_cell(v.meaning)}{secret} |"
            )
        out.append("")
    return "\n".join(out)


# ---- performance ---------------------------------------------------------------------------------------

_WHEN = ("measured_at", "started_at", "when", "at")


def result_files() -> list[Path]:
    return sorted(RESULTS.rglob("*.json")) if RESULTS.is_dir() else []


def _page_of(json_file: Path) -> str:
    return "results/" + json_file.relative_to(RESULTS).with_suffix(".md").as_posix()


def _headline(data: Any) -> str:
    """The figures a result file names as its verdicts, else its top-level numbers (a few)."""
    if isinstance(data, dict):
        for key in ("verdicts", "verdict", "ratios", "comparison", "median", "medians", "median_ms"):
            if key in data:
                return _cell(json.dumps(data[key], default=str))[:300]
        numbers = {k: v for k, v in data.items() if isinstance(v, int | float) and not isinstance(v, bool)}
        return _cell(json.dumps(dict(list(numbers.items())[:6])))[:300]
    return ""


def _when(data: Any) -> str:
    if isinstance(data, dict):
        for key in _WHEN:
            if key in data:
                return str(data[key])[:19]
    return ""


def performance_pages() -> dict[str, str]:
    """performance/index.md and one page per result (its Markdown summary, else its JSON)."""
    pages: dict[str, str] = {}
    rows = []
    for path in result_files():
        try:
            data = json.loads(path.read_text())
        except (json.JSONDecodeError, UnicodeDecodeError):
            continue
        name = path.relative_to(RESULTS).with_suffix("").as_posix()
        summary = path.with_suffix(".md")
        body = (
            summary.read_text()
            if summary.is_file()
            else f"# {name}\n\n```json\n{json.dumps(data, indent=2)}\n```\n"
        )
        pages["performance/" + _page_of(path)] = _neutralise_links(body)
        rows.append(f"| [{name}]({_page_of(path)}) | {_when(data)} | {_headline(data)} |")
    pages["performance/index.md"] = "\n".join(
        [
            "# Current results",
            "",
            "Generated at build time from the benchmark results under `bench/results/` (each file's",
            "verdicts or headline figures; its page has the whole summary). How to run them:",
            "[Benchmarks](../development/benchmarks.md); what each change did over time:",
            "[Measurement history](history.md).",
            "",
            "| result | measured | verdicts / headline |",
            "|---|---|---|",
            *rows,
            "",
        ]
    )
    return pages


def _neutralise_links(markdown: str) -> str:
    """A results summary's relative links point into bench/, outside the site: kept as text."""
    return re.sub(r"\[([^\]]+)\]\((?!https?:)[^)]*\)", r"\1", markdown)


def bench_history() -> str:
    """The one measurement history, its links (into bench/, outside the site) kept as text."""
    history = RESULTS / "history.md"
    return _neutralise_links(history.read_text()) if history.is_file() else ""


# ---- the mkdocs hook -----------------------------------------------------------------------------------


def generated_pages() -> dict[str, str]:
    return {
        "reference/cli.md": cli_reference(),
        "reference/configuration.md": configuration_reference(),
        **performance_pages(),
    }


def on_files(files: Any, config: Any) -> Any:
    from mkdocs.structure.files import File

    for uri, content in generated_pages().items():
        files.append(File.generated(config, uri, content=content))
    return files


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    if page.file.src_uri == "performance/history.md":
        history = bench_history()
        if history:
            markdown = markdown.replace("<!-- bench-history -->", _demote(history))
    return markdown


def _demote(markdown: str) -> str:
    lines, fence = [], False
    for line in markdown.split("\n"):
        fence = fence != line.startswith("```")
        lines.append("#" + line if line.startswith("#") and not fence else line)
    return "\n".join(lines)
