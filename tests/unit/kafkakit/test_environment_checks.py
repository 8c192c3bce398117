"""Every variable and flag of the configuration reference, given a value outside its form, stops the
program that reads it before anything starts: one line on stderr naming the variable (or flag), the
form it takes and an example, and exit status 2. The tables walked are the ones the reference is
rendered from (docs/hooks/generated.py), so a variable added there is checked here too."""

from __future__ import annotations

import argparse
from collections.abc import Callable

import pytest

from demo.run import DemoConfig
from docs.hooks.generated import CLIS, commands, parser_of, variables

# program -> a command that would do little even if the check let it through
HARMLESS = {
    "cdc": ["validate", "/nonexistent/spec.yaml"],
    "eventstore": ["schemas", "list", "--aggregate", "nonexistent.module:X"],
    "materializers": ["list"],
    "devstack": ["status"],
    "demo": [],
}
CASES = [
    (v, program)
    for v in variables()
    if v.form.bad is not None
    for program in v.used_by
    if program in HARMLESS
]


def mains() -> dict[str, Callable[[list[str]], int]]:
    from cdc.cli import main as cdc_main
    from devstack.cli import main as devstack_main
    from eventstore.cli import main as eventstore_main
    from materializers.cli import main as materializers_main

    def demo(argv: list[str]) -> int:
        try:
            DemoConfig.from_args(argv)
        except SystemExit as exc:
            return int(exc.code or 0)
        return 0

    return {
        "cdc": cdc_main,
        "eventstore": eventstore_main,
        "materializers": materializers_main,
        "devstack": devstack_main,
        "demo": demo,
    }


def run(program: str, argv: list[str]) -> int:
    try:
        return mains()[program](argv)
    except SystemExit as exc:  # argparse's own refusals
        return int(exc.code or 0)


@pytest.mark.parametrize(("variable", "program"), CASES, ids=[f"{p}-{v.name}" for v, p in CASES])
def test_a_bad_variable_is_one_line_and_exit_2(variable, program, monkeypatch, capsys) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv(variable.name, variable.form.bad)
    assert run(program, HARMLESS[program]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert variable.name in err[0] and variable.form.text in err[0] and variable.example in err[0], err[0]
    if variable.secret:
        assert variable.form.bad not in err[0]


def argv_with(program: str, flag: str, value: str) -> tuple[list[str], argparse.Action] | None:
    """A command line of `program` that gives `flag` the value, filling required arguments with 'x'."""
    for path, parser, _ in commands(parser_of(program)):
        action = next((a for a in parser._actions if flag in a.option_strings), None)
        if action is None:
            continue
        rest: list[str] = []
        for other in parser._actions:
            if isinstance(other, argparse._SubParsersAction):
                rest += HARMLESS[program]
            elif not other.option_strings and other.nargs not in ("?", "*"):
                rest.append("x")
            elif other.required and other is not action:
                rest += [other.option_strings[0], "x"]
        for group in parser._mutually_exclusive_groups:
            if group.required and action not in group._group_actions:
                first = group._group_actions[0]
                rest += [first.option_strings[0]] + ([] if first.nargs == 0 else ["x"])
        return [*path, flag, value, *rest], action
    return None


FLAG_CASES = [
    (v, program, flag)
    for v in variables()
    if v.form.bad is not None
    for flag in v.flags
    for program in v.used_by
    if program in CLIS and argv_with(program, flag, "") is not None
]


@pytest.mark.parametrize(
    ("variable", "program", "flag"), FLAG_CASES, ids=[f"{p}-{f}" for _, p, f in FLAG_CASES]
)
def test_a_bad_flag_is_refused_with_exit_2(variable, program, flag, capsys) -> None:  # type: ignore[no-untyped-def]
    found = argv_with(program, flag, variable.form.bad)
    assert found is not None
    argv, action = found
    assert run(program, argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    if action.type is None and action.choices is None:  # checked by the tables: one line, form, example
        assert len(err) == 1, err
        assert flag in err[0] and variable.form.text in err[0] and variable.example in err[0], err[0]
    else:  # argparse refuses a typed flag first, naming it
        assert flag in err[-1], err


def test_demo_scale_tiny_is_one_line(monkeypatch, capsys) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("DEMO_SCALE", "tiny")
    with pytest.raises(SystemExit) as stopped:
        DemoConfig.from_args([])
    assert stopped.value.code == 2
    assert capsys.readouterr().err.strip() == (
        "demo: DEMO_SCALE='tiny' is not valid: expected a positive number, e.g. DEMO_SCALE=3"
    )


def test_valid_values_behave_as_before(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("DEMO_SCALE", "0.5")
    assert DemoConfig.from_args([]).scale == 0.5
    assert DemoConfig.from_args(["--scale", "2"]).scale == 2.0
    monkeypatch.delenv("DEMO_SCALE")
    assert DemoConfig.from_args([]).scale == 1.0
