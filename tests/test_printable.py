"""Names with control characters print escaped: in the CLI's tables and lines, errors, and the worker's log lines.

A task name or key may hold any character (a producer chooses it); printed
raw, a newline forges a line and an escape sequence drives the terminal.
"""

from __future__ import annotations

import logging

import click
import pytest
from click.testing import CliRunner

from taskforge import TaskForge
from taskforge.cli import main
from taskforge.cli.table import cell, render
from taskforge.context import enter, leave
from taskforge.logs import JobContextFilter
from taskforge.printable import printable
from taskforge.worker.foreign import Elsewhere
from taskforge.worker.joblog import outcome_line

from .worker.test_log_lines import claim

EVIL = "report\n2027-01-01 00:00:00 INFO [supervisor] forged\x1b[2J\x1b]8;;http://x\x07\r\u202e\x85"
ESCAPED = r"report\n2027-01-01 00:00:00 INFO [supervisor] forged\x1b[2J\x1b]8;;http://x\x07\r\u202e\x85"
CONTROLS = ("\r", "\x1b", "\x07", "\u202e", "\x85")  # and newlines: counted where they belong


def clean(text: str) -> bool:
    return not any(c in text for c in CONTROLS)


def test_printable_escapes_every_control_character_and_keeps_the_rest() -> None:
    assert printable(EVIL) == ESCAPED
    assert printable("plain name with spaces, ü and a \\ backslash") == "plain name with spaces, ü and a \\ backslash"
    assert printable("line one\nline two\x1b[31m", lines=True) == "line one\nline two\\x1b[31m"
    assert printable(42) == "42"


def test_a_table_row_stays_one_row() -> None:
    table = render(["TASK", "KEY"], [[cell(EVIL), cell("k\x1b[31m")], [cell("ok"), cell("-")]])
    table = click.unstyle(table)  # the header's bold, which click.echo strips off a terminal
    assert len(table.splitlines()) == 3 and clean(table)
    assert ESCAPED in table


def test_the_job_line_and_the_job_context_of_a_log_are_escaped() -> None:
    _, text = outcome_line(EVIL, "id\n1", "1/1", "dead", 0.1, "ValueError: bad key\x1b[2J\rhidden\nmore")
    assert clean(text) and "\n" not in text and ESCAPED in text and "id\\n1" in text
    assert "(ValueError: bad key\\x1b[2J)" in text  # the error's first line (\\r ends one too), escaped
    token = enter(claim("j\x1b1", EVIL), None)
    try:
        entry = logging.LogRecord("user", logging.INFO, __file__, 1, "hello", None, None)
        JobContextFilter().filter(entry)
    finally:
        leave(token)
    assert entry.job == f"{ESCAPED}[j\\x1b1]: " and entry.task == ESCAPED  # type: ignore[attr-defined]


def test_the_warning_about_another_apps_task_is_escaped(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, "taskforge.worker")
    Elsewhere(None, None).say_once(claim("j", EVIL), "worker-2")  # type: ignore[arg-type]  # say_once needs neither
    [said] = [record.getMessage() for record in caplog.records]
    assert clean(said) and "\n" not in said and f"define task {ESCAPED};" in said


@pytest.mark.redis
def test_the_cli_prints_names_escaped(tmp_path, redis_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "evilapp.py").write_text("from taskforge import TaskForge\n\napp = TaskForge('evilapp')\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("TASKFORGE_BROKER_URL", redis_url)
    producer = TaskForge("producer", broker=redis_url)

    @producer.task(name=EVIL)
    def evil() -> None: ...

    handle = evil.with_options(key="key\x1b[31m\nforged").delay()
    runner = CliRunner()
    listing = runner.invoke(main, ["jobs", "evilapp:app"], catch_exceptions=False)
    assert listing.exit_code == 0, listing.output
    assert clean(listing.output) and ESCAPED in listing.output and "key\\x1b[31m\\nforged" in listing.output
    assert len(listing.output.strip().splitlines()) == 2  # the header and one row
    shown = runner.invoke(main, ["job", "evilapp:app", handle.id], catch_exceptions=False)
    assert shown.exit_code == 0 and clean(shown.output) and ESCAPED in shown.output
    cancelled = runner.invoke(main, ["cancel", "evilapp:app", handle.id], catch_exceptions=False)
    assert cancelled.exit_code == 0 and clean(cancelled.output) and ESCAPED in cancelled.output
    flow = (evil.si() | evil.si()).delay()
    steps = runner.invoke(main, ["workflow", "evilapp:app", flow.id], catch_exceptions=False)
    assert steps.exit_code == 0 and clean(steps.output), steps.output
    assert steps.output.count(ESCAPED) == 3  # "held up by" and the two steps
