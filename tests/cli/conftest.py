"""CLI fixtures: a user app module in a temp directory, loaded fresh by every test.

The worker fixtures (real ``taskforge worker`` subprocesses, no orphans) come
from tests/worker/conftest.py.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from taskforge import TaskForge
from taskforge.cli import main
from taskforge.loader import load_app
from tests.worker.conftest import side, start_worker, workdir  # noqa: F401

CLI_APP = """
from taskforge import TaskForge

app = TaskForge("cliapp")


@app.task
def add(x, y):
    return x + y


@app.task(queue="mail", priority="high")
def send(to, subject="hello"):
    return f"sent {subject} to {to}"
"""

Invoke = Callable[..., Result]


@pytest.fixture
def cli_app(tmp_path: Path, redis_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[TaskForge]:
    """``cliapp:app`` on the test Redis, importable from the cwd; the same object the CLI loads."""
    (tmp_path / "cliapp.py").write_text(CLI_APP)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("TASKFORGE_BROKER_URL", redis_url)
    sys.modules.pop("cliapp", None)
    yield load_app("cliapp:app")
    sys.modules.pop("cliapp", None)


@pytest.fixture
def invoke() -> Invoke:
    """Run ``taskforge ARGS...`` in-process; stderr is kept apart from stdout."""

    def run(*args: str, input: str | None = None, color: bool = False) -> Result:
        return CliRunner().invoke(main, list(args), input=input, color=color, catch_exceptions=False)

    return run


def one_line_error(result: Result) -> str:
    """The single line a failing command wrote to stderr."""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, f"expected one line on stderr, got: {result.stderr!r}"
    assert "Traceback" not in result.output
    return lines[0]
