"""``--version``, and ``--help`` with an example on every command."""

from __future__ import annotations

import pytest

from taskforge import __version__

COMMANDS = [
    ["worker"],
    ["status"],
    ["job"],
    ["dead"],
    ["dead", "APP", "list"],
    ["dead", "APP", "retry"],
    ["dead", "APP", "purge"],
    ["enqueue"],
    ["purge"],
    ["cancel"],
    ["abort"],
    ["broker"],
    ["demo"],
    [],
]


def test_version(invoke) -> None:
    result = invoke("--version")
    assert result.exit_code == 0 and __version__ in result.stdout


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c) or "taskforge")
def test_help_has_an_example(invoke, command: list[str]) -> None:
    result = invoke(*command, "--help")
    assert result.exit_code == 0, result.output
    assert "Example:" in result.stdout
    example = result.stdout.split("Example:", 1)[1].strip().splitlines()[0]
    assert example.startswith("taskforge "), example


def test_unknown_option_is_a_usage_error(invoke) -> None:
    assert invoke("status", "x:app", "--frobnicate").exit_code == 2
