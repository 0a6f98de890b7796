"""``taskforge worker --metrics-port``: Prometheus counters that move while a real worker runs."""

from __future__ import annotations

import re
import socket
import urllib.request

import pytest

from taskforge import TaskForge

from .conftest import free_port, wait_for

pytestmark = [pytest.mark.redis, pytest.mark.slow]


def scrape(port: int) -> dict[str, float]:
    """Every sample of the exposition as {'name{labels}': value}; {} while the endpoint is not up."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
            text = response.read().decode()
    except OSError:
        return {}
    samples = {}
    for line in text.splitlines():
        match = re.fullmatch(r"([a-z_]+(?:\{.*\})?) (\S+)", line)
        if match:
            samples[match[1]] = float(match[2])
    return samples


def value(samples: dict[str, float], name: str, **labels: str) -> float:
    wanted = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    for key, number in samples.items():
        if key.split("{")[0] == name and ",".join(sorted(re.findall(r'\w+="[^"]*"', key))) == wanted:
            return number
    return 0.0


def test_scrapes_during_a_run_show_the_counters_moving(start_worker, redis_url: str) -> None:
    port = free_port()
    producer = TaskForge("producer", broker=redis_url)
    worker = start_worker("-c", "2", "--metrics-port", str(port))
    before = wait_for(lambda: scrape(port), 30, "the metrics endpoint")
    assert value(before, "taskforge_jobs_succeeded_total", queue="default", task="userapp.record") == 0
    assert value(before, "taskforge_broker_up") == 1

    for i in range(5):
        producer.send("userapp.record", f"m{i}")
    doomed = producer.send("userapp.always_crash", "boom")  # crashes its child 3 times (losses 2 + 1), then dead
    retried = producer.send("userapp.retry_me", "again")  # asks for a retry twice, then succeeds
    # Due after its expiry: the worker's promotion ends it unrun.
    late = producer.task_for("userapp.record").with_options(expires=0.2).apply_in(0.5, "late")

    def settled() -> dict[str, float] | None:
        now = scrape(port)
        done = value(now, "taskforge_jobs_succeeded_total", queue="default", task="userapp.record") == 5
        dead = value(now, "taskforge_jobs_dead_total", queue="default", task="userapp.always_crash") == 1
        return (
            now
            if done
            and dead
            and value(now, "taskforge_jobs_retried_total", queue="default", task="userapp.retry_me") == 2
            # Its second retry counts when it goes back to wait: settled is its third run's success.
            and value(now, "taskforge_jobs_succeeded_total", queue="default", task="userapp.retry_me") == 1
            and value(now, "taskforge_jobs_expired_last_hour", queue="default") == 1
            else None
        )

    # A child crashed three times and a retry's backoff: 3 s alone, 16 to 52 s beside a CI run (4889e4b
    # alike), and once past 60 s there: the bound is for a stuck counter, not a slow machine.
    after = wait_for(settled, 150, "counters to reach the run's totals", interval=0.3)
    assert doomed.status().value == "dead" and retried.result(timeout=20) == "third time"
    assert late.info().error == "expired"
    crash = {"queue": "default", "task": "userapp.always_crash"}
    assert value(after, "taskforge_jobs_started_total", **crash) == 3
    assert value(after, "taskforge_jobs_failed_total", **crash) == 3
    assert value(after, "taskforge_jobs_retried_total", **crash) == 2
    assert value(after, "taskforge_child_restarts_total", reason="crashed") == 3
    assert value(after, "taskforge_jobs_started_total", queue="default", task="userapp.record") == 5
    assert (
        value(
            after, "taskforge_job_duration_seconds_count", queue="default", task="userapp.record", outcome="succeeded"
        )
        == 5
    )
    assert value(after, "taskforge_queue_jobs", queue="default", state="dead") == 1
    assert value(after, "taskforge_queue_jobs", queue="default", state="pending") == 0
    assert value(after, "taskforge_workers_alive") == 1
    assert "metrics at http://127.0.0.1:" in worker.output()


def test_a_taken_metrics_port_is_a_clear_error(start_worker) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        worker = start_worker("-c", "1", "--metrics-port", str(taken.getsockname()[1]))
        assert worker.wait(30) == 1
    assert "cannot serve metrics on 127.0.0.1:" in worker.output()
    assert "choose another --metrics-port" in worker.output()


def test_a_lease_reclaim_is_counted(start_worker, redis_url: str) -> None:
    producer = TaskForge("producer", broker=redis_url)
    lost = start_worker("-c", "1", "--visibility-timeout", "1")
    handle = producer.send("userapp.sleepy", "r", 0.5)
    wait_for(lambda: handle.status().value == "running", 30, "the job to start")
    lost.kill_group()  # the whole worker vanishes mid-job: its lease will expire
    port = free_port()
    start_worker("-c", "1", "--visibility-timeout", "1", "--metrics-port", str(port))

    def reclaims() -> float:
        return value(scrape(port), "taskforge_lease_reclaims_total", queue="default")

    wait_for(lambda: reclaims() == 1, 30, "the reclaim to be counted", interval=0.3)
    assert handle.result(timeout=30) == 0.5
    assert reclaims() == 1


def test_unknown_task_names_share_one_label(start_worker, redis_url: str) -> None:
    """Job names the app never registered collapse into ``task="unknown"``: /metrics stays bounded."""
    port = free_port()
    producer = TaskForge("producer", broker=redis_url)
    start_worker("-c", "1", "--metrics-port", str(port))
    wait_for(lambda: scrape(port), 30, "the metrics endpoint")
    handles = [producer.send(f"madeup.name_{i}") for i in range(200)]

    wait_for(lambda: all(h.status().value == "dead" for h in handles), 90, "the 200 unknown jobs to end dead")

    def all_counted() -> dict[str, float] | None:
        now = scrape(port)
        started = sum(v for k, v in now.items() if k.startswith("taskforge_jobs_started_total{"))
        return now if started == 200 else None

    after = wait_for(all_counted, 30, "the 200 starts to be counted", interval=0.3)
    assert value(after, "taskforge_jobs_started_total", queue="default", task="unknown") == 200
    assert not [key for key in after if "madeup." in key]
    # One label's worth of series whatever the number of names (it was ~25 per name).
    assert len(after) < 150, len(after)
