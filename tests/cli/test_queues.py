"""Queues that leave nothing behind: ``purge`` deletes a queue's bookkeeping with its jobs, and
``taskforge queues forget`` deletes every key of an empty queue, and its name."""

from __future__ import annotations

import pytest

from taskforge import TaskForge
from taskforge.broker import durability, keys
from taskforge.errors import QueueNotEmpty
from taskforge.forgetting import forget_queue
from tests.conftest import admin_client

from . import helpers
from .conftest import one_line_error

pytestmark = pytest.mark.redis


def queue_keys(app: TaskForge, queue: str) -> set[str]:
    client = admin_client(app.url)
    return {k.decode() for k in client.scan_iter(match=f"taskforge:{{{queue}}}:*")}


def registered(app: TaskForge) -> set[str]:
    return {q.decode() for q in admin_client(app.url).smembers(keys.QUEUES)}


def fill_mail(app: TaskForge) -> None:
    """Pending, scheduled, keyed (a lane, its turns) and retrying jobs: every bookkeeping key a queue grows."""
    send = app.tasks["cliapp.send"]
    for n in range(3):
        send.delay(f"{n}@b.c")
        send.with_options(key=f"customer-{n % 2}").delay(f"k{n}@b.c")
    send.apply_in(60, "later@b.c")
    helpers.retrying(app, "cliapp.send", "r@b.c", queue="mail")


def test_purge_leaves_no_key_of_the_queue(cli_app: TaskForge, invoke) -> None:
    fill_mail(cli_app)
    before = queue_keys(cli_app, "mail")
    assert {"taskforge:{mail}:seq", "taskforge:{mail}:wake", "taskforge:{mail}:key_turns"} <= before
    result = invoke("purge", "cliapp:app", "--queue", "mail", "--yes")
    assert result.exit_code == 0, result.output
    # Only the last hours' outcome counts stay (the dashboard's chart: they expire on their own).
    client = admin_client(cli_app.url)
    history = {k for k in queue_keys(cli_app, "mail") if k.split(":")[2] in ("stats", "timings")}
    assert history and all(0 < client.ttl(k) <= 2 * 3600 for k in history)
    assert queue_keys(cli_app, "mail") == history
    assert "mail" in registered(cli_app)  # purge empties a queue; forgetting it is another command


def test_purge_keeps_the_bookkeeping_of_a_queue_that_still_has_jobs(cli_app: TaskForge, invoke) -> None:
    fill_mail(cli_app)
    running = helpers.running(cli_app, "cliapp.send", "busy@b.c", queue="mail")
    assert invoke("purge", "cliapp:app", "--queue", "mail", "--yes").exit_code == 0
    left = queue_keys(cli_app, "mail")
    assert {"taskforge:{mail}:seq", "taskforge:{mail}:running", f"taskforge:{{mail}}:job:{running}"} <= left


def test_forget_refuses_a_queue_with_jobs_and_deletes_nothing(cli_app: TaskForge, invoke) -> None:
    helpers.dead(cli_app, "cliapp.send", "x@b.c", queue="mail")
    before = queue_keys(cli_app, "mail")
    result = invoke("queues", "forget", "cliapp:app", "mail")
    assert result.exit_code == 2
    line = one_line_error(result)
    assert "queue 'mail' still holds dead jobs" in line and "purge it first" in line
    assert queue_keys(cli_app, "mail") == before
    assert "mail" in registered(cli_app)
    with pytest.raises(QueueNotEmpty):
        forget_queue(cli_app, "mail")


def test_forget_deletes_every_key_and_the_name(cli_app: TaskForge, invoke) -> None:
    helpers.succeeded(cli_app, "cliapp.send", "ok", "done@b.c", queue="mail")  # a finished record, stats
    cli_app.pause("mail")
    assert queue_keys(cli_app, "mail") and "mail" in registered(cli_app)
    result = invoke("queues", "forget", "cliapp:app", "mail")
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("queue mail forgotten:")
    assert queue_keys(cli_app, "mail") == set()
    assert "mail" not in registered(cli_app)


def test_forget_of_a_one_off_queue_drops_it_from_status(cli_app: TaskForge, invoke) -> None:
    cli_app.tasks["cliapp.add"].with_options(queue="report-2027-01-05").delay(1, 2)
    assert invoke("purge", "cliapp:app", "--queue", "report-2027-01-05", "--yes").exit_code == 0
    assert "report-2027-01-05" in invoke("status", "cliapp:app").stdout
    assert forget_queue(cli_app, "report-2027-01-05") == 0  # the purge left no key
    assert "report-2027-01-05" not in invoke("status", "cliapp:app").stdout


def test_forget_names_a_bad_queue_name(cli_app: TaskForge, invoke) -> None:
    result = invoke("queues", "forget", "cliapp:app", "a{b}")
    assert result.exit_code == 2
    assert "a{b}" in one_line_error(result)


def test_a_producer_lists_a_forgotten_queue_again(cli_app: TaskForge, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(durability, "NAMES_AGAIN_EVERY", 0.0)  # a minute, in production
    send = cli_app.tasks["cliapp.add"].with_options(queue="reused")
    send.delay(1, 1)
    cli_app.broker.cleanup.purge("reused", "pending")
    forget_queue(cli_app, "reused")
    assert "reused" not in registered(cli_app)
    send.delay(2, 2)  # the same producer, still sending there
    assert "reused" in registered(cli_app)
