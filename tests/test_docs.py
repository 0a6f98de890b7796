"""The README's code runs: the tour and the API block against a real worker, the other blocks on memory://.

Blocks are found by their fences: the tour is the Python block that starts
``# myapp.py``; the API block is the one importing from ``myapp``. Every other
Python block is a fragment run with an ``app`` (on ``memory://``) and a job
handle ``h`` in scope. Blocks fenced ``py`` are shown, not run: they need
Django 6 (Python 3.12+), and ``examples/django`` runs their code. Every
``taskforge COMMAND`` line in any block must name a real command, and every
``pip install`` of the published package must use its distribution name.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
from pathlib import Path

import click
import pytest

from taskforge import JobState, TaskForge
from taskforge.cli import main
from tests.test_examples import start, stop

README = Path(__file__).resolve().parent.parent / "README.md"
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.M | re.S)
COMMAND = re.compile(r"(?:^|&&\s*|-m\s+)taskforge\s+([a-z][a-z-]*)")


def blocks(language: str | None = None) -> list[str]:
    return [body for lang, body in FENCE.findall(README.read_text()) if language is None or lang == language]


def the_block(starting: str) -> str:
    (found,) = [b for b in blocks("python") if starting in b]
    return found


TOUR = the_block("# myapp.py")
API = the_block("from myapp import")
FRAGMENTS = [b for b in blocks("python") if b not in (TOUR, API)]


def test_the_blocks_are_found() -> None:
    assert TOUR.startswith("# myapp.py") and len(FRAGMENTS) >= 3


@pytest.mark.parametrize("index", range(len(FRAGMENTS)))
def test_each_fragment_runs_with_an_app_in_scope(index: int) -> None:
    app = TaskForge("readme", broker="memory://")

    @app.task
    def noop() -> None:
        return None

    handle = noop.delay()
    code = compile(FRAGMENTS[index], f"README.md python block {index}", "exec")
    # In a thread of its own, as a user's script runs: no event loop some earlier test
    # left running in this one can stop the asyncio block's asyncio.run().
    errors: list[BaseException] = []

    def run() -> None:
        try:
            exec(code, {"app": app, "h": handle, "__name__": "readme_fragment"})
        except BaseException as exc:  # re-raised below, in the test's thread
            errors.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(timeout=60)
    assert not thread.is_alive(), f"README.md python block {index} did not finish"
    if errors:
        raise errors[0]
    if "h.abort()" in FRAGMENTS[index]:
        assert handle.status() is JobState.CANCELLED


def test_every_command_shown_exists() -> None:
    shown = {name for body in blocks() for line in body.splitlines() for name in COMMAND.findall(line.strip())}
    assert {"worker", "status", "cancel", "abort", "demo"} <= shown, shown
    commands = set(main.list_commands(click.Context(main)))
    assert shown <= commands, f"the README shows commands that do not exist: {shown - commands}"


def test_pip_installs_name_the_distribution() -> None:
    text = README.read_text()
    installs = re.findall(r"pip install (?:-e )?'?([^'\s`]+)", text)
    assert installs, "no pip install line found"
    for target in installs:
        assert target.startswith((".", "taskforge-redis")), f"pip install {target}: the distribution is taskforge-redis"


@pytest.mark.redis
@pytest.mark.slow
def test_the_tour_and_the_api_block_run_against_a_worker(redis_url: str, tmp_path: Path) -> None:
    (tmp_path / "myapp.py").write_text(TOUR)
    (tmp_path / "api_tour.py").write_text(API)
    env = {**os.environ, "TASKFORGE_BROKER_URL": redis_url, "PYTHONDONTWRITEBYTECODE": "1"}
    worker = start("myapp:app", ["-c", "2"], tmp_path, env, tmp_path / "worker.log")
    try:
        runs = [
            subprocess.run([sys.executable, script], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
            for script in ("myapp.py", "api_tour.py")
        ]
    finally:
        stop(worker)
    worker_log = (tmp_path / "worker.log").read_text(errors="replace")
    for run in runs:
        assert run.returncode == 0, f"{run.stdout}\n{run.stderr}\nworker:\n{worker_log}"
    assert runs[0].stdout.strip() == "sent 'hello' to a@example.com"
    assert "sent 'hello' to a@example.com False succeeded" in runs[1].stdout, runs[1].stdout
    assert worker.returncode == 0, worker_log


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to dashes."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_every_anchor_link_names_a_heading() -> None:
    text = README.read_text()
    anchors = {slug(h) for h in re.findall(r"^#+ (.+)$", FENCE.sub("", text), re.M)}
    links = set(re.findall(r"\]\(#([^)]+)\)", text))
    assert links and links <= anchors, f"links to no heading: {sorted(links - anchors)}"


def test_the_commands_and_the_tour_fit_the_first_screen() -> None:
    """A newcomer sees what to run, and the tour to the end, without scrolling (about 60 lines)."""
    lines = README.read_text().splitlines()
    first = "\n".join(lines[:60])
    assert "taskforge demo" in first and "python -m pytest -q" in first and '-m "not slow"' in first
    assert TOUR in first and "taskforge worker myapp:app" in first and "database 0" in first


def test_the_readme_says_what_is_built_and_that_retries_are_on_by_default() -> None:
    """A Celery user reads the migration table first: built options are not called "not yet",
    and the default that differs most from Celery's (every exception retried) is said there."""
    text = README.read_text(encoding="utf-8")
    assert not re.search(r"retry_on`?:? \**not yet", text), "retry_on is built"
    table = text.split("## Coming from Celery", 1)[1].split("\n## ", 1)[0]
    assert "every exception is retried by default" in table
