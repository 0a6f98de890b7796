"""``taskforge jobs APP``: find jobs and act on every match, against real worker processes and real Redis.

A user app of its own (``shopapp``) whose ``charge`` fails for a customer
until a side key says the card is fixed; a real ``taskforge worker`` runs
the jobs. The commands run through click in this process (a second of
interpreter start saved per command), the refused and the real bulk retry
in a process of their own, as a user runs them.
"""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from taskforge import JobState, TaskForge
from taskforge.cli import main
from tests.conftest import admin_client, admin_url

from ..worker.conftest import wait_for
from .conftest import one_line_error
from .schema import JOB_SCHEMA, check

pytestmark = [pytest.mark.redis, pytest.mark.slow]

jobs_module = importlib.import_module("taskforge.cli.jobs")
purge_module = importlib.import_module("taskforge.cli.purge")

SHOP_APP = """
import os

import redis

from taskforge import TaskForge

app = TaskForge("shopapp")
side = redis.Redis.from_url(os.environ["SIDE_REDIS"])


@app.task(key=lambda customer, amount: customer, max_attempts=1)
def charge(customer, amount):
    side.incr(f"side:runs:{customer}:{amount}")
    if amount < 0 and not side.exists("side:fixed"):
        raise ValueError(f"card declined for {customer}")
    return amount


@app.task(queue="mail")
def receipt(email):
    return email
"""


@pytest.fixture
def shop_app(tmp_path: Path, redis_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, object]]:
    """The app's module in a directory of its own, importable here too, and a producer; no worker yet."""
    (tmp_path / "shopapp.py").write_text(SHOP_APP)
    env = {**os.environ, "TASKFORGE_BROKER_URL": redis_url, "SIDE_REDIS": admin_url(redis_url)}
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("TASKFORGE_BROKER_URL", redis_url)
    monkeypatch.setenv("SIDE_REDIS", redis_url)
    sys.modules.pop("shopapp", None)
    yield {"cwd": tmp_path, "env": env, "producer": TaskForge("producer", broker=redis_url)}
    sys.modules.pop("shopapp", None)


@pytest.fixture
def shop(shop_app: dict[str, object], start_worker: Callable[..., object]) -> dict[str, object]:
    """Twelve charges over three customers (three declined, dead), six receipts; one worker ran them all."""
    producer: TaskForge = shop_app["producer"]  # type: ignore[assignment]

    @producer.task(name="shopapp.charge", key=lambda customer, amount: customer, max_attempts=1)
    def charge(customer: str, amount: int) -> None: ...  # the producer's twin: it computes the key

    handles = [charge.delay(f"cust-{n % 3}", -n if n % 4 == 3 else n) for n in range(12)]
    receipts = [producer.task_for("shopapp.receipt").with_options(queue="mail").delay(f"u{n}@x.y") for n in range(6)]
    worker = start_worker("-c", "2", "-q", "default", "-q", "mail", app="shopapp:app")
    wait_for(lambda: all(h.status().finished for h in handles + receipts), 30, "the first runs to finish")
    return {**shop_app, "charges": handles, "worker": worker}


def run(shop: dict[str, object], *args: str) -> subprocess.CompletedProcess[str]:
    """``taskforge jobs shopapp:app ARGS`` in this process (a second each saved), stdin not a terminal."""
    result = CliRunner().invoke(main, ["jobs", "shopapp:app", *args], catch_exceptions=False)
    return subprocess.CompletedProcess(args, result.exit_code, result.stdout, result.stderr)


def run_process(shop: dict[str, object], *args: str) -> subprocess.CompletedProcess[str]:
    """The same command in a process of its own, as a user runs it."""
    return subprocess.run(
        [sys.executable, "-m", "taskforge", "jobs", "shopapp:app", *args],
        cwd=shop["cwd"],  # type: ignore[arg-type]
        env=shop["env"],  # type: ignore[arg-type]
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )


def listed(shop: dict[str, object], *args: str) -> dict[str, object]:
    out = run(shop, *args, "--json")
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)  # type: ignore[no-any-return]


def test_filters_pages_and_json(shop: dict[str, object]) -> None:
    charges = shop["charges"]
    every = listed(shop, "--limit", "100")
    assert len(every["jobs"]) == 18 and every["cursor"] is None  # type: ignore[arg-type]
    for job in every["jobs"]:  # type: ignore[attr-defined]
        check(job, JOB_SCHEMA)
    dead = listed(shop, "--state", "dead")
    assert [j["id"] for j in dead["jobs"]] == [h.id for h in reversed(charges) if h.status() is JobState.DEAD]  # type: ignore[index,attr-defined]
    assert len(dead["jobs"]) == 3  # type: ignore[arg-type]
    keyed = listed(shop, "--key", "cust-0", "--state", "succeeded")
    assert {j["key"] for j in keyed["jobs"]} == {"cust-0"} and len(keyed["jobs"]) == 3  # type: ignore[index,arg-type,attr-defined]
    assert len(listed(shop, "--match", "DECLINED")["jobs"]) == 3  # type: ignore[arg-type]
    assert len(listed(shop, "--queue", "mail", "--match", "u3@")["jobs"]) == 1  # type: ignore[arg-type]
    assert listed(shop, "--task", "shopapp.receipt", "--since", "1h")["jobs"]  # type: ignore[index]
    first = listed(shop, "--limit", "7")
    second = listed(shop, "--limit", "7", "--cursor", first["cursor"])  # type: ignore[arg-type]
    third = listed(shop, "--limit", "7", "--cursor", second["cursor"])  # type: ignore[arg-type]
    pages = [j["id"] for p in (first, second, third) for j in p["jobs"]]  # type: ignore[attr-defined]
    assert pages == [j["id"] for j in every["jobs"]] and third["cursor"] is None  # type: ignore[attr-defined]
    table = run(shop, "--state", "dead", "--limit", "2")
    assert table.returncode == 0 and table.stdout.splitlines()[0].split()[:4] == ["ID", "QUEUE", "TASK", "STATE"]
    assert "card declined" in table.stdout and "--cursor" in table.stdout.splitlines()[-1]


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--state", "finished"], "unknown state"),
        (["--queue", "nowhere"], "unknown queue"),
        (["--since", "yesterday"], "--since"),
        (["--since", "0s"], "--since"),
        (["--cursor", "0123456789ab.AAAA"], "another query"),
        (["--limit", "0"], "--limit"),
        (["--retry", "--cancel"], "one of"),
        (["--delete", "--cursor", "x"], "--cursor"),
    ],
)
def test_bad_input_exits_2_with_one_line(shop_app: dict[str, object], args: list[str], words: str) -> None:
    out = run(shop_app, *args)
    assert out.returncode == 2, out
    assert "Traceback" not in out.stderr and words in out.stderr


def test_a_cursor_of_another_query_is_refused(shop_app: dict[str, object]) -> None:
    producer: TaskForge = shop_app["producer"]  # type: ignore[assignment]
    for n in range(3):
        producer.task_for("shopapp.receipt").with_options(queue="mail").delay(f"u{n}@x.y")
    page = listed(shop_app, "--queue", "mail", "--limit", "2")
    out = run(shop_app, "--queue", "default", "--cursor", page["cursor"])  # type: ignore[arg-type]
    assert out.returncode == 2 and "another query" in out.stderr


def test_bulk_retry_runs_every_dead_match_again_once(shop: dict[str, object], redis_url: str) -> None:
    side = admin_client(redis_url)
    refused = run_process(shop, "--state", "dead", "--retry")  # no terminal, no --yes: nothing changes
    assert refused.returncode == 2 and "--yes" in refused.stderr
    assert len(listed(shop, "--state", "dead")["jobs"]) == 3  # type: ignore[arg-type]
    side.set("side:fixed", 1)
    done = run_process(shop, "--match", "declined", "--retry", "--yes")
    assert done.returncode == 0 and done.stdout.strip() == "retried 3 jobs", done
    dead = [h for h in shop["charges"] if h.info().error and "declined" in h.info().error]  # type: ignore[attr-defined]
    wait_for(lambda: all(h.status() is JobState.SUCCEEDED for h in dead), 30, "the retried jobs to run again")
    for h in dead:
        customer, amount = h.info().args
        assert int(side.get(f"side:runs:{customer}:{amount}")) == 2  # once dead, once again: exactly once more
    again = run(shop, "--retry", "--yes")
    assert again.returncode == 0 and again.stdout.strip() == "retried 0 jobs"


def test_bulk_cancel_and_delete_leave_other_states_alone(shop: dict[str, object]) -> None:
    producer: TaskForge = shop["producer"]  # type: ignore[assignment]
    later = [producer.task_for("shopapp.charge").apply_in(3600, f"cust-{n}", n) for n in range(4)]  # no key
    out = run(shop, "--cancel", "--yes")
    assert out.returncode == 0 and out.stdout.strip() == "cancelled 4 jobs"
    assert {h.status() for h in later} == {JobState.CANCELLED}
    assert len(listed(shop, "--state", "cancelled")["jobs"]) == 4  # type: ignore[arg-type]
    gone = run(shop, "--queue", "mail", "--delete", "--yes")
    assert gone.stdout.strip() == "deleted 6 jobs"
    assert listed(shop, "--queue", "mail")["jobs"] == []
    assert len(listed(shop, "--limit", "100")["jobs"]) == 16  # type: ignore[arg-type]
    assert run(shop, "--state", "running", "--delete", "--yes").stdout.strip() == "deleted 0 jobs"


def test_on_a_terminal_a_bulk_action_asks_with_the_count(
    shop: dict[str, object], invoke, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(jobs_module, "stdin_is_terminal", lambda: True)
    monkeypatch.setattr(purge_module, "stdin_is_terminal", lambda: True)
    declined = invoke("jobs", "shopapp:app", "--state", "dead", "--delete", input="n\n")
    assert declined.exit_code == 1 and "Delete 3 jobs that match?" in declined.stderr
    assert len(shop["producer"].find_jobs(state="dead").jobs) == 3  # type: ignore[attr-defined]
    accepted = invoke("jobs", "shopapp:app", "--state", "dead", "--delete", input="y\n")
    assert accepted.exit_code == 0 and accepted.stdout.strip() == "deleted 3 jobs"
    nothing = invoke("jobs", "shopapp:app", "--state", "dead", "--delete")
    assert nothing.exit_code == 0 and nothing.stdout.strip() == "no jobs to delete"
    assert one_line_error(invoke("jobs", "shopapp:app", "--state", "nope")).startswith("Error: unknown state")
