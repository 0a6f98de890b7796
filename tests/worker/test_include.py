"""``TaskForge(include=[...])``, the refusal of a worker with no task, and ``-l``: Celery's spellings of them."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from taskforge import TaskForge
from taskforge.errors import ConfigurationError

pytestmark = [pytest.mark.redis]

APP = 'from taskforge import TaskForge\n\napp = TaskForge("proj", include={include!r})\n'
PLAIN_APP = 'from taskforge import TaskForge\n\napp = TaskForge("cel")\n\n\n@app.task\ndef ping():\n    return 1\n'
TASKS = "from proj.app import app\n\n\n@app.task\ndef add(a, b):\n    return a + b\n"


def project(root: Path, include: list[str], tasks: str = TASKS) -> Path:
    (root / "proj").mkdir()
    (root / "proj" / "__init__.py").write_text("")
    (root / "proj" / "app.py").write_text(APP.format(include=include))
    (root / "proj" / "tasks.py").write_text(tasks)
    return root


def worker(cwd: Path, url: str, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "TASKFORGE_BROKER_URL": url}
    return subprocess.run(
        [sys.executable, "-m", "taskforge", "worker", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_a_worker_imports_the_modules_include_names_and_runs_their_tasks(tmp_path: Path, redis_url: str) -> None:
    project(tmp_path, ["proj.tasks"])
    producer = TaskForge("producer", broker=redis_url)
    handle = producer.send("proj.tasks.add", 2, 3)
    done = worker(tmp_path, redis_url, "proj.app:app", "-c", "1", "--burst")
    assert done.returncode == 0, done.stderr
    assert "proj.tasks.add" in done.stderr  # the banner lists the included task
    assert handle.result(timeout=5) == 5


def test_a_worker_whose_app_has_no_task_exits_2_naming_include(tmp_path: Path, redis_url: str) -> None:
    project(tmp_path, [])
    done = worker(tmp_path, redis_url, "proj.app:app", "-c", "1", "--burst")
    assert done.returncode == 2
    [line] = done.stderr.strip().splitlines()
    assert line.startswith("Error: ") and "has no task" in line and "include=" in line and "'proj'" in line


def test_an_include_that_does_not_import_is_a_usage_error_naming_it(tmp_path: Path, redis_url: str) -> None:
    project(tmp_path, ["proj.taskz"])
    done = worker(tmp_path, redis_url, "proj.app:app", "--burst")
    assert done.returncode == 2
    [line] = done.stderr.strip().splitlines()
    assert "'proj.taskz'" in line and "include=" in line and "cannot be imported" in line


def test_an_include_that_raises_shows_its_traceback_and_exits_2(tmp_path: Path, redis_url: str) -> None:
    project(tmp_path, ["proj.tasks"], tasks="raise RuntimeError('broken on import')\n")
    done = worker(tmp_path, redis_url, "proj.app:app", "--burst")
    assert done.returncode == 2
    last = done.stderr.strip().splitlines()[-1]
    assert "'proj.tasks'" in last and "RuntimeError: broken on import" in last
    assert 'proj/tasks.py", line 1' in done.stderr  # the user's own frame, for finding the line


def test_include_must_be_module_names() -> None:
    assert TaskForge("proj", include=["proj.tasks", "proj.more"]).include == ("proj.tasks", "proj.more")
    assert TaskForge("proj", include="proj.tasks").include == ("proj.tasks",)
    assert TaskForge("proj").include == ()
    for bad in (["proj/tasks.py"], [3], ["proj..tasks"], 3, {"proj.tasks": 1}):
        with pytest.raises(ConfigurationError, match="include="):
            TaskForge("proj", include=bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("spelling", [["-l", "warning"], ["-l", "WARNING"], ["--log-level", "Warning"]])
def test_dash_l_is_log_level_in_any_case(tmp_path: Path, redis_url: str, spelling: list[str]) -> None:
    (tmp_path / "celeryish.py").write_text(PLAIN_APP)
    done = worker(tmp_path, redis_url, "celeryish:app", "-c", "1", "--burst", *spelling)
    assert done.returncode == 0, done.stderr
    assert " INFO " not in done.stderr  # the banner, an INFO line, is not shown at warning
