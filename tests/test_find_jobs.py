"""``app.find_jobs`` and the bulk actions (docs/howto/operating.md, "Finding jobs..."), on both backends.

Jobs are put in each state through the broker's own scripts (``app.drain()``
runs them as a worker would); ``tests/cli/test_jobs.py`` drives the same
through ``taskforge jobs`` against real worker processes.
"""

from __future__ import annotations

import time
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from taskforge import JobPage, JobState, TaskForge, bulk, search
from taskforge.broker.keys import QueueKeys, search_index


@pytest.fixture
def shop(app: TaskForge) -> dict[str, Any]:
    """Two queues: orders keyed by customer (some fail), mail; created a few ms apart, oldest first."""

    @app.task(queue="orders", key=lambda customer, amount: customer, max_attempts=1)
    def charge(customer: str, amount: int) -> int:
        if amount < 0:
            raise ValueError(f"card declined for {customer}")
        return amount

    @app.task(queue="mail")
    def send_mail(to: str) -> None:
        return None

    handles = []
    for n in range(12):
        handles.append(charge.delay(f"cust-{n % 3}", -n if n % 4 == 3 else n * 10))
        handles.append(send_mail.delay(f"user{n}@example.com"))
        time.sleep(0.002)
    app.drain()
    return {"charge": charge, "mail": send_mail, "handles": handles}


def ids(page: JobPage) -> list[str]:
    return [job.id for job in page.jobs]


def newest_first(handles: list[Any]) -> list[str]:
    return [h.id for h in reversed(handles)]


def test_every_job_newest_first_across_queues_and_pages(app: TaskForge, shop: dict[str, Any]) -> None:
    everything = newest_first(shop["handles"])
    page = app.find_jobs(limit=100)
    assert ids(page) == everything and page.cursor is None
    seen: list[str] = []
    cursor = None
    while True:
        page = app.find_jobs(limit=5, cursor=cursor)
        seen += ids(page)
        cursor = page.cursor
        if cursor is None:
            break
    assert seen == everything  # no gap, no repeat
    assert {job.queue for job in app.find_jobs(limit=3).jobs} == {"orders", "mail"}


def test_each_filter(app: TaskForge, shop: dict[str, Any]) -> None:
    charge, mail = shop["charge"], shop["mail"]
    orders = [h for h in shop["handles"] if h.queue == "orders"]
    assert ids(app.find_jobs(queue="orders")) == newest_first(orders)
    assert ids(app.find_jobs(task=charge.name)) == newest_first(orders)
    assert ids(app.find_jobs(task=mail.name, queue="orders")) == []
    dead = [h for h in orders if h.status() is JobState.DEAD]
    assert len(dead) == 3
    assert ids(app.find_jobs(state="dead")) == newest_first(dead)
    assert ids(app.find_jobs(state=JobState.DEAD, key="cust-0")) == newest_first(
        [h for h in dead if h.info().key == "cust-0"]
    )
    assert {j.key for j in app.find_jobs(key="cust-1").jobs} == {"cust-1"}
    assert len(app.find_jobs(key="cust-1").jobs) == 4
    assert app.find_jobs(key="cust").jobs == []  # a key matches exactly
    assert {j.state for j in app.find_jobs(state="succeeded").jobs} == {JobState.SUCCEEDED}
    assert app.find_jobs(state="pending").jobs == []


def test_match_looks_in_id_task_key_arguments_and_error(app: TaskForge, shop: dict[str, Any]) -> None:
    some = shop["handles"][5]
    assert ids(app.find_jobs(match=some.id[-12:])) == [some.id]  # the id
    assert len(app.find_jobs(match="SEND_MAIL").jobs) == 12  # the task name, any case
    assert len(app.find_jobs(match="cust-2").jobs) == 4  # the key (and the argument)
    assert ids(app.find_jobs(match="user7@")) == [shop["handles"][15].id]  # a string argument
    big = shop["charge"].delay("cust-0", 987654)
    assert ids(app.find_jobs(match="987654", queue="orders")) == [big.id]  # a number argument's digits
    declined = app.find_jobs(match="card declined")  # the error
    assert len(declined.jobs) == 3 and all(j.state is JobState.DEAD for j in declined.jobs)
    assert app.find_jobs(match="no such text anywhere").jobs == []


def test_since(app: TaskForge, shop: dict[str, Any]) -> None:
    time.sleep(0.3)
    late = shop["mail"].delay("late@example.com")
    assert ids(app.find_jobs(since=timedelta(seconds=0.2))) == [late.id]
    moment = datetime.now(timezone.utc) - timedelta(seconds=0.2)
    assert ids(app.find_jobs(since=moment)) == [late.id]
    assert ids(app.find_jobs(since=moment.astimezone(timezone(timedelta(hours=-5))))) == [late.id]
    assert len(app.find_jobs(since=timedelta(hours=1)).jobs) == 25


@pytest.mark.parametrize(
    ("filters", "words"),
    [
        ({"state": "finished"}, "unknown state"),
        ({"queue": "nowhere"}, "unknown queue"),
        ({"since": datetime(2026, 1, 1)}, "aware datetime"),
        ({"since": timedelta(seconds=-1)}, "positive"),
        ({"since": "1h"}, "timedelta or an aware datetime"),
        ({"limit": 0}, "limit"),
        ({"limit": 5000}, "limit"),
        ({"task": ""}, "non-empty"),
        ({"cursor": "junk"}, "another query"),
    ],
)
def test_bad_filters_name_the_culprit(app: TaskForge, filters: dict[str, Any], words: str) -> None:
    with pytest.raises(ValueError, match=words):
        app.find_jobs(**filters)


def test_a_cursor_belongs_to_its_query(app: TaskForge, shop: dict[str, Any]) -> None:
    page = app.find_jobs(queue="orders", limit=2)
    assert page.cursor is not None
    with pytest.raises(ValueError, match="another query"):
        app.find_jobs(queue="mail", limit=2, cursor=page.cursor)
    fingerprint = page.cursor.split(".")[0]
    with pytest.raises(ValueError, match="not a cursor"):
        app.find_jobs(queue="orders", limit=2, cursor=fingerprint + ".!!!")
    assert len(app.find_jobs(queue="orders", limit=2, cursor=page.cursor).jobs) == 2


def test_a_long_search_comes_back_short_with_a_cursor(
    app: TaskForge, shop: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A page that looked at its budget of entries stops there: its cursor goes on, and no match is lost."""
    monkeypatch.setattr(search, "SCAN_BUDGET", 1)
    monkeypatch.setattr(search, "FIRST_SLICE", 4)
    found: list[str] = []
    pages = 0
    cursor = None
    while True:
        page = app.find_jobs(match="declined", limit=50, cursor=cursor)
        found += ids(page)
        pages += 1
        cursor = page.cursor
        if cursor is None:
            break
    assert len(found) == 3 and pages > 1


def test_the_index_follows_the_jobs(app: TaskForge, shop: dict[str, Any]) -> None:
    client = app.broker.client
    entries = client.zcard(search_index("orders"))
    assert entries == 12 * 2 + 3  # t and k per job; d per dead one
    dead = app.find_jobs(state="dead").jobs
    assert len(dead) == 3
    assert app.job(dead[0].id).retry()
    assert client.zcard(search_index("orders")) == entries - 1  # no longer dead
    assert dead[0].id not in ids(app.find_jobs(state="dead"))
    assert ids(app.find_jobs(state="pending")) == [dead[0].id]
    cancelled = shop["mail"].delay("never@example.com")
    assert cancelled.cancel()
    assert ids(app.find_jobs(state="cancelled")) == [cancelled.id]
    app.broker.cleanup.purge("orders", "pending")
    assert client.zcard(search_index("orders")) == entries - 1 - 2
    assert dead[0].id not in ids(app.find_jobs())


def test_the_sweep_drops_entries_of_expired_records(broker_url: str) -> None:
    app = TaskForge("tests", broker=broker_url, retention=0.2, dead_retention=0.2)

    @app.task
    def noop() -> None:
        return None

    handles = [noop.delay() for _ in range(4)]
    app.drain(max_jobs=3)  # the first three run (first in, first out) and expire 0.2 s later
    time.sleep(0.3)
    assert [h.id for h in handles[:3] if app.broker.jobs.read("default", h.id)] == []
    assert app.broker.client.zcard(search_index("default")) == 4  # the entries are still there
    app.broker.claims.reclaim("default")  # every worker runs it about once a second
    assert app.broker.client.zcard(search_index("default")) == 1  # the entry of the job still pending
    assert ids(app.find_jobs()) == [handles[3].id]


def test_entries_an_earlier_version_wrote_are_found_once_and_swept_with_their_record(broker_url: str) -> None:
    """An upgraded Redis holds an 'a' entry beside each job's 't': the search reads the 't', the sweeps drop both."""
    app = TaskForge("tests", broker=broker_url, retention=0.2)

    @app.task
    def noop() -> None:
        return None

    client = app.broker.client
    old, new = noop.delay(), noop.delay()
    created = int(client.hget(QueueKeys("default").job(old.id), "created_at"))
    name = b"%013d%d:%s%d:%s" % (created, len(old.id), old.id.encode(), len(noop.name), noop.name.encode())
    client.zadd(search_index("default"), {b"a" + name: 0})
    assert ids(app.find_jobs()) == [new.id, old.id]
    assert old.cancel() and app.broker.cleanup.delete("default", [old.id]) == 1
    assert client.zcard(search_index("default")) == 1  # the new job's 't'
    # Entries of a record gone some other way (deleted by hand) long ago: the backstop sweep finds both.
    task = b"%d:%s" % (len(noop.name), noop.name.encode())
    stamp = b"%013d5:gone1" % 1
    client.zadd(search_index("default"), {b"a" + stamp + task: 0, b"t" + task + stamp: 0})
    for _ in range(3):  # round the index from wherever the sweep's place was
        app.broker.claims.reclaim("default")
    assert [m for m in client.zrange(search_index("default"), 0, -1) if b"gone1" in m] == []
    assert ids(app.find_jobs()) == [new.id]


def test_every_job_merges_the_tasks_lists_newest_first_through_every_page(
    app: TaskForge, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One list per task, read a few entries at a time: each job once, in creation order, across pages."""
    monkeypatch.setattr(search, "FIRST_SLICE", 3)
    monkeypatch.setattr(search, "MAX_SLICE", 5)

    @app.task
    def often() -> None:
        pass

    @app.task
    def rarely() -> None:
        pass

    @app.task
    def once() -> None:
        pass

    made = []
    for i in range(30):
        made.append((often if i % 5 else rarely).delay().id)
        if i == 7:
            made.append(once.delay().id)
        time.sleep(0.002)  # creation ms apart: newest first is then the reverse of this order
    seen: list[str] = []
    cursor = None
    while True:
        page = app.find_jobs(limit=4, cursor=cursor)
        seen += ids(page)
        if page.cursor is None:
            break
        cursor = page.cursor
    assert seen == made[::-1]


def test_bulk_retry_brings_every_dead_match_back_once(app: TaskForge, shop: dict[str, Any]) -> None:
    q = search.query(app, state="dead")
    assert bulk.count(app, q, "retry") == 3
    assert bulk.apply(app, search.query(app, match="declined"), "retry") == 3
    assert bulk.apply(app, q, "retry") == 0  # again: nothing is dead any more
    assert [j.state for j in app.find_jobs(key="cust-0", state="pending").jobs] == [JobState.PENDING]
    assert app.broker.inspection.counts("orders")["pending"] == 3
    assert bulk.apply(app, search.query(app, state="succeeded"), "retry") == 0  # not a state it applies to


def test_bulk_cancel_leaves_what_has_started_or_ended(app: TaskForge, shop: dict[str, Any]) -> None:
    charge = shop["charge"]
    waiting = [charge.delay("cust-9", 1), charge.apply_in(3600, "cust-9", 2)]
    assert bulk.count(app, search.query(app, key="cust-9"), "cancel") == 2
    assert bulk.apply(app, search.query(app, queue="orders"), "cancel") == 2
    assert [h.status() for h in waiting] == [JobState.CANCELLED, JobState.CANCELLED]
    assert len(app.find_jobs(state="succeeded", queue="orders").jobs) == 9  # untouched


def test_bulk_delete_removes_finished_jobs_and_their_entries(app: TaskForge, shop: dict[str, Any]) -> None:
    waiting = shop["mail"].delay("waiting@example.com")
    deleted = bulk.apply(app, search.query(app, queue="mail"), "delete")
    assert deleted == 12
    assert ids(app.find_jobs(queue="mail")) == [waiting.id]
    assert app.broker.client.zcard(search_index("mail")) == 1
    assert bulk.apply(app, search.query(app, state="dead"), "delete") == 3
    assert app.broker.inspection.counts("orders")["dead"] == 0


def test_a_bulk_action_leaves_jobs_created_after_it_began(app: TaskForge, shop: dict[str, Any]) -> None:
    mail = shop["mail"]
    later: list[str] = []

    def progress(done: int) -> None:
        later.append(mail.apply_in(3600, "later@example.com").id)

    cancelled = bulk.apply(app, search.query(app, queue="mail"), "delete", progress)
    assert cancelled == 12
    assert later and all(app.job(i).status() is JobState.SCHEDULED for i in later)


def test_running_and_scheduled_jobs_come_from_their_own_sets(app: TaskForge, shop: dict[str, Any]) -> None:
    """Below a million finished jobs too: their sets are read whole, not the index from the top."""
    mail = shop["mail"]
    later = [mail.apply_in(3600, f"later{n}@example.com") for n in range(3)]
    for n in range(30):
        mail.delay(f"filler{n}@example.com")
    app.drain()
    running = mail.delay("running@example.com")
    claim = app.broker.claims.dequeue("mail", 60_000).claims[0]
    assert claim.id == running.id
    assert ids(app.find_jobs(state="running")) == [running.id]
    assert ids(app.find_jobs(state="scheduled", limit=2)) == [later[2].id, later[1].id]
    page = app.find_jobs(state="scheduled", limit=2)
    assert ids(app.find_jobs(state="scheduled", limit=2, cursor=page.cursor)) == [later[0].id]
    assert ids(app.find_jobs(state="scheduled", match="later1")) == [later[1].id]
    assert app.find_jobs(state="retrying").jobs == []
    assert ids(app.find_jobs(state="scheduled", since=timedelta(hours=1), queue="mail")) == [h.id for h in later[::-1]]


def test_a_connection_lost_while_reading_records_falls_back_to_the_pipeline(
    app: TaskForge, shop: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The records a page checks are read in one packed write; a lost connection costs a second try, not the page."""
    index = app.broker.index
    expected = ids(app.find_jobs(match="declined"))
    calls: list[int] = []

    def lost(commands: list[tuple[str, ...]]) -> list[Any]:
        calls.append(len(commands))
        raise ConnectionError("connection reset by peer")

    monkeypatch.setattr(index, "packed", lost)
    assert ids(app.find_jobs(match="declined")) == expected and len(expected) == 3
    assert bool(calls) == (getattr(index, "pack", None) is not None)  # without hiredis: the pipeline alone
