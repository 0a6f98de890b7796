"""The dashboard over plain HTTP: CSRF, auth, errors, and the JSON API against the CLI's JSON."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlencode

import pytest

from taskforge import JobState, TaskForge
from tests.conftest import admin_url

from .conftest import http

pytestmark = [pytest.mark.redis, pytest.mark.slow]


def dead_job(producer: TaskForge, queue: str = "default") -> str:
    """A dead job, made by the queue's own transitions (no worker needed)."""
    handle = producer.send("dashapp.fails_first", "x")
    claims, _ = producer.broker.claims.dequeue(queue, 30_000)
    assert producer.broker.claims.fail(queue, claims[0].id, claims[0].token, "ValueError: x", "", None) == "dead"
    return handle.id


def run_cli(workdir, redis_url: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {"TASKFORGE_BROKER_URL": redis_url, "SIDE_REDIS": admin_url(redis_url), "PATH": "/usr/bin:/bin"}
    if "PYTHONPATH" in os.environ:  # the taskforge under test, when it is not the one installed
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    return subprocess.run(
        [sys.executable, "-m", "taskforge", *args], cwd=workdir, capture_output=True, text=True, timeout=60, env=env
    )


def cli_json(workdir, redis_url: str, *args: str) -> object:
    out = run_cli(workdir, redis_url, *args, "--json")
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_an_action_without_the_csrf_token_is_refused(start_dashboard, producer: TaskForge) -> None:
    job_id = dead_job(producer)
    board = start_dashboard()
    status, body, headers = http(f"{board.base}/jobs/{job_id}?queue=default")
    assert status == 200
    cookie = re.search(r"taskforge_csrf=(\w+)", headers["set-cookie"])[1]
    token = re.search(r'name="csrf" value="(\w+)"', body)[1]
    assert token == cookie
    url = f"{board.base}/jobs/{job_id}/retry"
    attempts = [
        ({"queue": "default"}, {}),  # no token, no cookie
        ({"queue": "default"}, {"Cookie": f"taskforge_csrf={cookie}"}),  # cookie but no field
        ({"queue": "default", "csrf": "0" * 64}, {"Cookie": f"taskforge_csrf={cookie}"}),  # wrong token
        (
            {"queue": "default", "csrf": token},
            {"Cookie": f"taskforge_csrf={cookie}", "Origin": "http://evil.example"},
        ),  # another site
    ]
    for form, headers_sent in attempts:
        status, body, _ = http(url, urlencode(form).encode(), headers_sent)
        assert status == 403, (form, headers_sent)
        assert "refused" in body or "CSRF token" in body
        assert producer.job(job_id).status() is JobState.DEAD
    status, _, headers = http(
        url,
        urlencode({"queue": "default", "csrf": token}).encode(),
        {"Cookie": f"taskforge_csrf={cookie}", "Origin": board.base},
    )
    assert status == 303 and headers["location"] == f"/jobs/{job_id}?queue=default"
    assert producer.job(job_id).status() is JobState.PENDING
    assert http(f"{board.base}/jobs/{job_id}/retry", b"", {})[0] == 403  # GET-less and tokenless alike


def test_purge_needs_the_token_and_a_confirmation(start_dashboard, producer: TaskForge) -> None:
    dead_job(producer)
    board = start_dashboard()
    status, body, headers = http(f"{board.base}/queues/default/purge-dead")
    assert status == 200 and "deletes <strong>1</strong> dead job for good" in body
    cookie = re.search(r"taskforge_csrf=(\w+)", headers["set-cookie"])[1]
    jar = {"Cookie": f"taskforge_csrf={cookie}"}
    url = f"{board.base}/queues/default/purge-dead"
    assert http(url, urlencode({"confirm": "yes"}).encode(), jar)[0] == 403
    assert http(url, urlencode({"csrf": cookie}).encode(), jar)[0] == 200  # no confirmation: asks again
    assert producer.broker.inspection.counts("default")["dead"] == 1
    status, _, headers = http(url, urlencode({"csrf": cookie, "confirm": "yes"}).encode(), jar)
    assert status == 303 and producer.broker.inspection.counts("default")["dead"] == 0


def test_auth_blocks_anonymous_requests(start_dashboard, producer: TaskForge) -> None:
    job_id = dead_job(producer)
    board = start_dashboard("--auth", "ops:pa:ss")  # the password may hold a colon
    for path in ("/", "/workers", "/dead", "/scheduled", f"/jobs/{job_id}", "/api/status", "/static/dashboard.js"):
        status, _, headers = http(board.base + path)
        assert status == 401 and headers["www-authenticate"].startswith("Basic")
    assert http(f"{board.base}/jobs/{job_id}/retry", b"queue=default")[0] == 401
    good = {"Authorization": "Basic b3BzOnBhOnNz"}  # ops:pa:ss
    bad = {"Authorization": "Basic b3BzOndyb25n"}  # ops:wrong
    assert http(board.base + "/api/status", headers=bad)[0] == 401
    assert http(board.base + "/api/status", headers=good)[0] == 200
    assert producer.job(job_id).status() is JobState.DEAD


def test_the_api_serves_what_the_cli_prints(start_dashboard, producer: TaskForge, workdir, redis_url: str) -> None:
    job_id = dead_job(producer)
    producer.send("dashapp.add", 1, 2)
    board = start_dashboard()
    status, body, _ = http(board.base + "/api/status")
    api, cli = json.loads(body), cli_json(workdir, redis_url, "status", "dashapp:app")
    for doc in (api, cli):
        doc.pop("generated_at")
        for periodic in doc["periodic"]:
            periodic.pop("next_run")
    assert status == 200 and api == cli
    status, body, _ = http(f"{board.base}/api/jobs/{job_id}")
    assert status == 200 and json.loads(body) == cli_json(workdir, redis_url, "job", "dashapp:app", job_id)
    status, body, _ = http(board.base + "/api/queues/default/jobs?state=pending")
    page = json.loads(body)
    assert (page["total"], page["pages"], [j["task"] for j in page["jobs"]]) == (1, 1, ["dashapp.add"])
    history = json.loads(http(board.base + "/api/history")[1])
    assert history["minutes"] == 60 and sum(history["queues"]["default"]["failed"]) == 1
    assert json.loads(http(board.base + "/api/dead?limit=5")[1])[0]["id"] == job_id

    @producer.task(name="dashapp.regional", queue="mail/eu")
    def regional(): ...

    regional.delay()
    status, body, _ = http(board.base + "/api/queues/mail%2Feu/jobs?state=pending")
    assert status == 200 and json.loads(body)["total"] == 1
    status, body, _ = http(board.base + "/queues/mail%2Feu?state=pending")
    assert status == 200 and "dashapp.regional" in body
    assert http(board.base + "/queues/mail%2Feu/purge-dead")[0] == 200


def test_bad_input_gets_a_clear_error_page(start_dashboard, producer: TaskForge) -> None:
    board = start_dashboard()
    cases = [
        ("/jobs/nope?queue=default", 404, "no job nope"),
        ("/api/jobs/nope", 404, "no job nope in any queue"),
        ("/queues/default?state=lost", 400, "use one of pending, scheduled, running, dead"),
        ("/api/queues/default/jobs?page=0", 400, "page '0'"),
        ("/api/dead?limit=9999", 400, "limit '9999'"),
    ]
    for path, code, words in cases:
        status, body, _ = http(board.base + path)
        assert status == code and words in body.replace("&#39;", "'"), (path, status, body[:300])
    assert json.loads(http(board.base + "/api/jobs/nope")[1])["error"].startswith("no job nope")
    assert "(bound to 127.0.0.1: only this machine can reach it)" in board.output()


def test_a_malformed_auth_is_a_usage_error(workdir, redis_url: str) -> None:
    for auth in ("nocolon", ":pw", "user:"):
        out = run_cli(workdir, redis_url, "dashboard", "dashapp:app", "--auth", auth)
        assert out.returncode == 2 and "--auth: use USER:PASSWORD, both non-empty" in out.stderr
        assert auth.strip(":") not in out.stderr  # what was given is never echoed


def test_the_benchmark_script_runs(redis_url: str) -> None:
    root = Path(__file__).resolve().parents[2]
    out = subprocess.run(
        [
            sys.executable,
            "benchmarks/dashboard.py",
            "--jobs",
            "300",
            "--requests",
            "2",
            "--redis",
            admin_url(redis_url),
        ],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert "filled: 300 pending jobs" in out.stdout
    assert re.search(r"overview page +median +[\d.]+ ms +p95 +[\d.]+ ms +\(2 requests, 300 pending\)", out.stdout)


def test_a_taken_port_is_a_clear_error(start_dashboard, workdir, redis_url: str) -> None:
    board = start_dashboard()
    out = run_cli(workdir, redis_url, "dashboard", "dashapp:app", "--port", str(board.port))
    assert out.returncode == 1 and "choose another --port" in out.stderr
    assert f"cannot serve the dashboard on 127.0.0.1:{board.port}" in out.stderr


def test_the_overview_pauses_and_resumes_a_queue_with_the_token(start_dashboard, producer: TaskForge) -> None:
    producer.send("dashapp.add", 1, 2)
    board = start_dashboard()
    status, body, headers = http(board.base + "/")
    assert status == 200 and 'action="/queues/default/pause"' in body and ">paused<" not in body
    cookie = re.search(r"taskforge_csrf=(\w+)", headers["set-cookie"])[1]
    jar = {"Cookie": f"taskforge_csrf={cookie}", "Origin": board.base}
    url = f"{board.base}/queues/default/pause"
    assert http(url, b"", jar)[0] == 403  # no token
    assert producer.paused() == set()
    status, _, headers = http(url, urlencode({"csrf": cookie}).encode(), jar)
    assert status == 303 and headers["location"] == "/"
    assert producer.paused() == {"default"}
    body = http(board.base + "/")[1]
    assert ">paused<" in body and 'action="/queues/default/resume"' in body
    assert json.loads(http(board.base + "/api/status")[1])["queues"][0]["paused"] is True
    status, _, _ = http(f"{board.base}/queues/default/resume", urlencode({"csrf": cookie}).encode(), jar)
    assert status == 303 and producer.paused() == set()
    bad = http(f"{board.base}/queues/a%7Bb/pause", urlencode({"csrf": cookie}).encode(), jar)
    assert bad[0] == 400 and producer.paused() == set()


def test_held_jobs_show_on_the_overview_and_the_job_page_with_the_reason(start_dashboard, producer: TaskForge) -> None:
    @producer.task(name="dashapp.keyed", key="account", key_concurrency=1)
    def keyed(account: str) -> None: ...

    first, waiting = keyed.delay("acme"), keyed.delay("acme")
    claims = producer.broker.claims
    assert [c.id for c in claims.dequeue("default", 60_000, count=4).claims] == [first.id]
    assert claims.dequeue("default", 60_000, count=4).claims == []  # acme is at its cap: held
    board = start_dashboard()
    overview = http(board.base + "/")[1]
    assert ">1 held<" in overview
    page = http(f"{board.base}/jobs/{waiting.id}")[1]
    assert 'id="job-held"' in page and "key_concurrency=1 reached for key &#39;acme&#39; (1 running)" in page
    assert json.loads(http(board.base + "/api/status")[1])["queues"][0]["held"] == 1
