"""Errors every command shares: an unreachable broker is exit 1, a bad APP exit 2, one line each."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from .conftest import one_line_error

DOWN_APP = """
from taskforge import TaskForge

app = TaskForge("down")


@app.task
def ping():
    return "pong"
"""

COMMANDS = [
    ["status", "downapp"],
    ["status", "downapp", "--json"],
    ["job", "downapp", "0" * 32],
    ["dead", "downapp", "list"],
    ["dead", "downapp", "retry", "--all"],
    ["dead", "downapp", "retry", "0" * 32],
    ["dead", "downapp", "purge", "--yes"],
    ["enqueue", "downapp", "downapp.ping"],
    ["purge", "downapp", "--yes"],
]


@pytest.fixture
def down_app(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    (tmp_path / "downapp.py").write_text(DOWN_APP)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("TASKFORGE_BROKER_URL", "redis://user:s3cret@127.0.0.1:1/0")
    sys.modules.pop("downapp", None)
    yield
    sys.modules.pop("downapp", None)


@pytest.mark.parametrize("args", COMMANDS, ids=" ".join)
def test_unreachable_broker_exits_1_naming_the_redacted_url(down_app, invoke, args: list[str]) -> None:
    result = invoke(*args)
    assert result.exit_code == 1, result.output
    line = one_line_error(result)
    assert "redis://user:***@127.0.0.1:1/0" in line and "s3cret" not in result.output


@pytest.mark.parametrize("args", [c[:1] + ["nosuchmodule:app"] + c[2:] for c in COMMANDS], ids=" ".join)
def test_bad_app_exits_2_with_one_line(down_app, invoke, args: list[str]) -> None:
    result = invoke(*args)
    assert result.exit_code == 2, result.output
    assert "nosuchmodule" in one_line_error(result)


def test_app_that_is_not_an_app_exits_2(down_app, invoke) -> None:
    result = invoke("status", "downapp:ping")
    assert result.exit_code == 2 and "not a TaskForge app" in one_line_error(result)


def test_an_app_built_on_access_that_fails_exits_2_with_its_reason(down_app, invoke, tmp_path: Path) -> None:
    # As taskforge.contrib.django:app does: a module __getattr__ builds the app, and may raise.
    (tmp_path / "lazyapp.py").write_text(
        "from taskforge.errors import ConfigurationError\n\n"
        "def __getattr__(name):\n"
        "    if name == 'app':\n"
        "        raise ConfigurationError('needs DJANGO_SETTINGS_MODULE')\n"
        "    raise RuntimeError('broken ' + name)\n"
    )
    result = invoke("status", "lazyapp:app")
    assert result.exit_code == 2, result.output
    assert "lazyapp" in one_line_error(result) and "needs DJANGO_SETTINGS_MODULE" in result.stderr
    result = invoke("status", "lazyapp:other")  # not taskforge's error: its traceback is shown too
    assert result.exit_code == 2, result.output
    last = result.stderr.strip().splitlines()[-1]
    assert "Traceback" in result.stderr and last.endswith("RuntimeError: broken other")


@pytest.mark.parametrize("spelling", [["-A", "proj"], ["--app=proj"], ["-A", "proj", "-l", "info"]])
def test_celerys_dash_a_names_the_app_argument(spelling: list[str]) -> None:
    """``celery -A proj worker`` becomes ``taskforge worker proj:app``: the usage error says so."""
    from click.testing import CliRunner

    from taskforge.cli import main

    result = CliRunner().invoke(main, ["worker", *spelling])
    assert result.exit_code == 2
    assert "taskforge worker proj:app" in result.output


def test_the_dashboard_without_its_extra_names_the_distribution_to_install(
    down_app, invoke, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The package index knows ``taskforge-redis``, not ``taskforge``: the hint must name what installs."""
    for name in [m for m in sys.modules if m == "starlette" or m.startswith(("starlette.", "taskforge.dashboard"))]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "starlette", None)  # as if the extra were not installed
    result = invoke("dashboard", "downapp")
    assert result.exit_code == 2
    line = one_line_error(result)
    assert "starlette is missing" in line and "pip install 'taskforge-redis[dashboard]'" in line, line
