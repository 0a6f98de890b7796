"""``worker`` and ``enqueue`` refuse a ``memory://`` app: its broker dies with the command."""

from __future__ import annotations

import signal
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from .conftest import one_line_error

MEMORY_APP = """
from taskforge import TaskForge

app = TaskForge("memapp", broker="memory://")


@app.task
def add(x, y):
    return x + y
"""


@pytest.fixture
def memory_app(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    (tmp_path / "memapp.py").write_text(MEMORY_APP)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delenv("TASKFORGE_BROKER_URL", raising=False)
    sys.modules.pop("memapp", None)
    # The worker command installs its own SIGTERM/SIGINT handlers: give pytest its own back.
    handlers = {signum: signal.getsignal(signum) for signum in (signal.SIGTERM, signal.SIGINT)}
    yield "memapp:app"
    for signum, handler in handlers.items():
        signal.signal(signum, handler)
    sys.modules.pop("memapp", None)


@pytest.mark.parametrize(
    "command",
    [["worker", "memapp:app", "-c", "1", "--burst"], ["enqueue", "memapp:app", "memapp.add", "--args", "[1, 2]"]],
    ids=["worker", "enqueue"],
)
def test_refused_with_one_line_pointing_at_taskforge_broker(memory_app: str, invoke, command: list[str]) -> None:
    result = invoke(*command)
    assert result.exit_code == 2, result.output
    line = one_line_error(result)
    assert "memapp:app uses memory://" in line and "`taskforge broker`" in line, line
    assert result.stdout == "", "no job id may be printed for a job that vanishes"


def test_env_url_memory_is_refused_too(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, invoke) -> None:
    """The broker can come from TASKFORGE_BROKER_URL rather than the code."""
    (tmp_path / "envapp.py").write_text("from taskforge import TaskForge\napp = TaskForge('envapp')\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("TASKFORGE_BROKER_URL", "memory://")
    sys.modules.pop("envapp", None)
    try:
        result = invoke("enqueue", "envapp:app", "envapp.anything")
    finally:
        sys.modules.pop("envapp", None)
    assert result.exit_code == 2, result.output
    assert "`taskforge broker`" in one_line_error(result)
