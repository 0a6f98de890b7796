"""``--version``, and ``--help`` with an example on every command."""

from __future__ import annotations

import subprocess
import sys

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


def test_every_command_is_listed_and_none_is_imported_before_it_runs(invoke) -> None:
    """A worker's children re-import the CLI as their main module: it must not pull in every command."""
    listed = set(invoke("--help").stdout.split("Commands:", 1)[1].split())
    assert {c[0] for c in COMMANDS if c} | {"dashboard", "job", "workflow"} <= listed
    code = "import sys, taskforge.cli; print(' '.join(sys.modules))"
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert not [m for m in loaded if m.startswith("taskforge.cli.") or m == "redis"], loaded
