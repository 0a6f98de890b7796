"""The README and every page of the site run: their code is the code, their links lead somewhere.

Blocks are found by their fences, on every page (``README.md``, ``docs/**/*.md``
and the Lua scripts' ``taskforge/broker/lua/README.md``, which the site includes).
The tour is the Python block that starts ``# myapp.py`` (the README and Getting
started show the same one); the API block is the one importing from ``myapp``:
those two run against a real worker. Every other Python block is a fragment run
with an ``app`` (on ``memory://``) and a job handle ``h`` in scope. Blocks fenced
``py`` are shown, not run: they need Django 6 (Python 3.12+), and
``examples/django`` runs their code. Every ``taskforge COMMAND`` line in any block
must name a real command, and every ``pip install`` of the published package must
use its distribution name. ``mkdocs build --strict`` (in CI) checks the links of
the site as it renders them; the checks here need no MkDocs and cover the README.
"""

from __future__ import annotations

import logging
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

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = ROOT / "docs"
LUA_PAGE = ROOT / "taskforge" / "broker" / "lua" / "README.md"  # docs/reference/lua.md includes it
PAGES = [README, *sorted(DOCS.rglob("*.md")), LUA_PAGE]
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.M | re.S)
COMMAND = re.compile(r"(?:^|&&\s*|-m\s+)taskforge\s+([a-z][a-z-]*)")
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def name(page: Path) -> str:
    return page.relative_to(ROOT).as_posix()


def blocks(page: Path, language: str | None = None) -> list[str]:
    return [body for lang, body in FENCE.findall(page.read_text(encoding="utf-8")) if language in (None, lang)]


def the_blocks(starting: str) -> list[str]:
    return [b for page in PAGES for b in blocks(page, "python") if starting in b]


TOURS = the_blocks("# myapp.py")
TOUR = TOURS[0]
(API,) = the_blocks("from myapp import")
FRAGMENTS = [
    pytest.param(page, index, body, id=f"{name(page)}-{index}")
    for page in PAGES
    for index, body in enumerate(blocks(page, "python"))
    if body not in (TOUR, API)
]


def test_the_blocks_are_found() -> None:
    assert TOUR.startswith("# myapp.py") and len(FRAGMENTS) >= 20
    assert TOURS == [TOUR, TOUR], "the README and Getting started show one tour, the same"
    assert TOUR in blocks(README, "python") and API in blocks(DOCS / "tutorials" / "getting-started.md", "python")


@pytest.mark.parametrize(("page", "index", "code"), FRAGMENTS)
def test_each_fragment_runs_with_an_app_in_scope(page: Path, index: int, code: str) -> None:
    app = TaskForge("docs", broker="memory://")

    @app.task
    def noop() -> None:
        return None

    handle = noop.delay()
    compiled = compile(code, f"{name(page)} python block {index}", "exec")
    # In a thread of its own, as a user's script runs: no event loop some earlier test
    # left running in this one can stop the asyncio block's asyncio.run().
    errors: list[BaseException] = []
    handlers = list(logging.root.handlers)  # a block that configures logging leaves the suite's alone

    def run() -> None:
        try:
            exec(compiled, {"app": app, "h": handle, "__name__": "docs_fragment"})
        except BaseException as exc:  # re-raised below, in the test's thread
            errors.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(timeout=60)
    assert not thread.is_alive(), f"{name(page)} python block {index} did not finish"
    logging.root.handlers[:] = handlers
    if errors:
        raise errors[0]
    if "h.abort()" in code:
        assert handle.status() is JobState.CANCELLED


def test_every_command_shown_exists() -> None:
    shown = {
        name for page in PAGES for body in blocks(page) for line in body.splitlines() for name in COMMAND.findall(line)
    }
    assert {"worker", "status", "cancel", "abort", "demo", "jobs", "dead"} <= shown, shown
    commands = set(main.list_commands(click.Context(main)))
    assert shown <= commands, f"the docs show commands that do not exist: {shown - commands}"


def test_pip_installs_name_the_distribution() -> None:
    installs = [(name(p), t) for p in PAGES for t in re.findall(r"pip install (?:-e )?'?([^'\s`]+)", p.read_text())]
    assert len(installs) >= 5, "no pip install line found"
    for page, target in installs:
        assert target.startswith((".", "taskforge-redis")), f"{page}: pip install {target}: it is taskforge-redis"


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
    """A heading's anchor as MkDocs (Python-Markdown's toc) and GitHub make it for these pages:
    lower case, markup and punctuation dropped, runs of spaces and dashes to one dash."""
    text = re.sub(r"[^\w\s-]", "", re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


def anchors(page: Path) -> set[str]:
    text = FENCE.sub("", page.read_text(encoding="utf-8"))
    if page == DOCS / "reference" / "lua.md":
        text = FENCE.sub("", LUA_PAGE.read_text(encoding="utf-8"))
    return {slug(h) for h in re.findall(r"^#+ (.+)$", text, re.M)}


@pytest.mark.parametrize("page", PAGES, ids=name)
def test_every_link_names_a_file_and_a_heading(page: Path) -> None:
    """A relative link names a file that exists, and its anchor a heading of that file; the site's pages
    link only within docs/ (MkDocs serves nothing else), the README anywhere in the repository."""
    broken = []
    for target in LINK.findall(FENCE.sub("", page.read_text(encoding="utf-8"))):
        if re.match(r"[a-z]+:", target):
            continue
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        inside = page == README or page == LUA_PAGE or dest.is_relative_to(DOCS)
        if not dest.exists() or not inside or (anchor and dest.suffix == ".md" and anchor not in anchors(dest)):
            broken.append(target)
    assert not broken, f"{name(page)}: links to nothing: {broken}"


def test_every_page_is_in_the_nav() -> None:
    listed = set(re.findall(r":\s*(\S+\.md)\s*$", (ROOT / "mkdocs.yml").read_text(), re.M))
    pages = {p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md")}
    assert listed == pages, f"not in the nav: {sorted(pages - listed)}; in the nav, no page: {sorted(listed - pages)}"


def test_the_readme_is_a_landing_page() -> None:
    """At most 200 lines: what and why, the two commands, the tour, and links to the site."""
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 200, len(lines)
    assert all(b in (TOUR, *blocks(README, "bash")) for b in blocks(README)), "the README shows only the tour"


def test_the_commands_and_the_tour_fit_the_first_screen() -> None:
    """A newcomer sees what to run, and the tour to the end, without scrolling (about 60 lines)."""
    lines = README.read_text().splitlines()
    first = "\n".join(lines[:60])
    assert "taskforge demo" in first and "python -m pytest -q" in first and '-m "not slow"' in first
    assert TOUR in first and "taskforge worker myapp:app" in first and "database 0" in first


def test_ci_runs_exactly_the_readmes_test_command() -> None:
    """The quickstart's second command is the suite as CI runs it: ``.ci/run`` has that very line."""
    (line,) = [line for line in blocks(README, "bash")[0].splitlines() if "pytest" in line]
    command = line.split("&&", 1)[1].split("#", 1)[0].strip()
    assert command == "python -m pytest -q", command
    assert command in (ROOT / ".ci" / "run").read_text().splitlines(), f".ci/run does not run {command!r}"


def test_the_migration_page_says_what_is_built_and_that_retries_are_on_by_default() -> None:
    """A Celery user reads the migration table first: built options are not called "not yet",
    and the default that differs most from Celery's (every exception retried) is said there."""
    for page in PAGES:
        assert not re.search(r"retry_on`?:? \**not yet", page.read_text(encoding="utf-8")), f"{name(page)}: built"
    text = (DOCS / "tutorials" / "coming-from.md").read_text(encoding="utf-8")
    table = text.split("## Coming from Celery", 1)[1].split("\n## ", 1)[0]
    assert "every exception is retried by default" in table


def test_nothing_cites_a_contract_outside_the_repository() -> None:
    """The contract the code follows is written in these pages; no comment or page cites a
    specification kept elsewhere (a workflow record's field ``StepField.SPEC`` is a name, not a citation)."""
    cites = re.compile(r"(?<![.\w])S" + r"PEC(?!\w| = \"spec\")")
    files = {*PAGES, *(f for folder in ("taskforge", "tests", "examples") for f in ROOT.glob(f"{folder}/**/*.py"))}
    found = [
        f"{name(f)}:{n}" for f in files for n, line in enumerate(f.read_text().splitlines(), 1) if cites.search(line)
    ]
    assert not found, found
