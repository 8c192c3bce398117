"""The generated references against the code they are generated from: every flag of every CLI has
help text and appears in the command-line reference; every variable the packages read is in the
configuration tables (kafkakit.environment and each package's `environment`), every table entry is in
the configuration reference, and every flag a table names exists in a parser of a program that reads
the variable. A new flag or variable without documentation fails here."""

from __future__ import annotations

import argparse
import re

from docs.hooks.codeblocks import REPO
from docs.hooks.generated import (
    CLIS,
    cli_reference,
    commands,
    configuration_reference,
    parser_of,
    performance_pages,
    undocumented_flags,
    variables,
)

PACKAGES = ("kafkakit", "cdc", "eventstore", "materializers", "demo", "docker/devstack")
# Read from the environment but not the toolkit's to document: the JVM's, Spark's and Docker's own.
NOT_OURS = {"JAVA_HOME", "SPARK_HOME", "SPARK_CONF_DIR", "PYTHONPATH", "DOCKER_HOST", "PYSPARK_PYTHON"}
READS = (
    r'ENV_[A-Z_]+\s*=\s*"([A-Z][A-Z0-9_]+)"',
    r'(?<![\w.])(?:environ|env)(?:\.get)?[\[(]\s*"([A-Z][A-Z0-9_]+)"',
    r'os\.getenv\(\s*"([A-Z][A-Z0-9_]+)"',
)


def test_every_flag_has_help() -> None:
    assert undocumented_flags() == []


def test_the_cli_reference_names_every_flag_and_subcommand() -> None:
    text = cli_reference()
    for program in CLIS:
        for path, parser, _ in commands(parser_of(program)):
            assert f"`{' '.join((program, *path))}`" in text
            for action in parser._actions:
                for option in action.option_strings if action.dest != "help" else ():
                    assert f"`{option}`" in text, f"{program} {' '.join(path)} {option}"


def code_reads() -> set[str]:
    names: set[str] = set()
    for package in PACKAGES:
        for source in (REPO / package).rglob("*.py"):
            text = source.read_text()
            for pattern in READS:
                names |= set(re.findall(pattern, text))
    return {
        name for name in names if not name.endswith("_")
    }  # a prefix (KAFKA_CLIENT_): its names are listed


def test_every_variable_read_is_in_the_tables() -> None:
    documented = {v.name for v in variables()}
    missing = code_reads() - documented - NOT_OURS
    assert not missing, f"read from the environment but not in any environment table: {sorted(missing)}"


def test_the_configuration_reference_names_every_variable() -> None:
    text = configuration_reference()
    names = [v.name for v in variables()]
    assert len(names) == len(set(names)), "a variable is declared twice"
    assert all(f"`{name}`" in text for name in names)


def test_every_flag_of_a_variable_exists() -> None:
    for variable in variables():
        for flag in variable.flags:
            owners = [p for p in variable.used_by if p in CLIS]
            found = [
                p
                for p in owners
                for _, parser, _ in commands(parser_of(p))
                if any(
                    flag in a.option_strings
                    for a in parser._actions
                    if not isinstance(a, argparse._SubParsersAction)
                )
            ]
            assert found, f"{variable.name}: no program of {owners} has the flag {flag}"


def test_every_form_refuses_its_bad_value_and_accepts_its_example() -> None:
    for variable in variables():
        if variable.form.check is None or variable.form.text == "the path of a readable file":
            continue  # any text; or a file that need not exist here
        assert not variable.form.refuses(variable.example), (
            f"{variable.name}: its example {variable.example!r}"
        )
        assert variable.form.bad is not None and variable.form.refuses(variable.form.bad), variable.name


def test_performance_pages_come_from_the_results() -> None:
    pages = performance_pages()
    index = pages.pop("performance/index.md")
    assert all(f"({uri.removeprefix('performance/')})" in index for uri in pages)
