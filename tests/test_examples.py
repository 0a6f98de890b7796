"""Every example runs, against a real worker on real Redis, so the examples never rot."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.worker.conftest import group_pids, wait_for

pytestmark = [pytest.mark.redis, pytest.mark.slow]

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"

CASES = {
    "quickstart": (
        EXAMPLES / "quickstart",
        "myapp:app",
        "producer.py",
        ["-c", "2"],
        ["queued 3 emails", "sent 'release notes' to linus@example.com"],
    ),
    "retries_and_dead_letters": (
        EXAMPLES,
        "retries_and_dead_letters:app",
        "retries_and_dead_letters.py",
        ["-c", "2"],
        [
            "'rate': 1.08",
            "export 7 downloaded",
            "is dead after 3 attempts",
            "ValueError: broken.pdf: not a valid invoice",
        ],
    ),
    "scheduling": (
        EXAMPLES,
        "scheduling:app",
        "scheduling.py",
        ["-c", "2"],
        ["cancelled the one-hour reminder: True cancelled", "reminded ada", "reminded grace"],
    ),
    "workflows": (
        EXAMPLES,
        "workflows:app",
        "workflows.py",
        ["-c", "2"],
        [
            "summary: report: 360 words, 6 pictures",
            "steps: fetch=succeeded, count_words=succeeded, count_pictures=succeeded, summarize=succeeded",
            "workflow dead: workflows.publish failed: RuntimeError: the publishing service is down",
            "on_failure said: draft.pdf was not published",
        ],
    ),
    "durable": (
        EXAMPLES,
        "durable:app",
        "durable.py",
        ["-c", "2"],
        [
            "Jobs live in redis. A crash resumes after the last finished step. Readers see every token.",
            "job succeeded on attempt 2: {'retrieved_in_run': 1, 'answered_in_run': 2}",
            "steps kept with the job: outline, retrieve",
            "the first words reached the HTTP client while the job ran: True",
            "streamed 16 words; the client got 16",
        ],
    ),
    "fastapi": (
        EXAMPLES / "fastapi",
        "tasks:app",
        "demo.py",
        ["-c", "1"],
        [
            "enqueued 50 thumbnails",
            "the last one, awaited: succeeded, thumbs/64/photo-49.jpg",
            "made within the request: thumbs/256/cover.png (8192 bytes)",
            "20 requests awaited their results",
        ],
    ),
    "otel": (
        EXAMPLES / "otel",
        "tasks:app",
        "demo.py",
        ["-c", "1"],
        ["job headers:   {'traceparent': '00-", "same trace: True"],
    ),
    "priorities": (
        EXAMPLES,
        "priorities:app",
        "priorities.py",
        ["-c", "1"],
        ["queued in the order   LLLLLLLLLLLLLLLNNNNNNNNNNNNNNNHHHHHCCCCC", "started in the order"],
    ),
}


def start(app: str, args: list[str], cwd: Path, env: dict[str, str], log_path: Path) -> subprocess.Popen[bytes]:
    """``taskforge worker APP ARGS`` in a session of its own (so ``stop`` can reap every child)."""
    with log_path.open("wb") as log:
        return subprocess.Popen(
            [sys.executable, "-m", "taskforge", "worker", app, *args],
            cwd=cwd,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def stop(worker: subprocess.Popen[bytes]) -> None:
    if worker.poll() is None:
        worker.send_signal(signal.SIGTERM)
        try:
            worker.wait(20)
        except subprocess.TimeoutExpired:
            pass
    try:
        wait_for(lambda: not group_pids(worker.pid), 5, "the example's worker processes to exit")
    finally:
        try:
            os.killpg(worker.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        worker.wait(5)


@pytest.mark.parametrize("name", sorted(CASES))
def test_example_runs(name: str, redis_url: str, tmp_path: Path) -> None:
    cwd, app, script, worker_args, expected = CASES[name]
    env = {**os.environ, "TASKFORGE_BROKER_URL": redis_url, "PYTHONDONTWRITEBYTECODE": "1"}
    worker = start(app, worker_args, cwd, env, tmp_path / "worker.log")
    try:
        run = subprocess.run([sys.executable, script], cwd=cwd, env=env, capture_output=True, text=True, timeout=60)
    finally:
        stop(worker)
    worker_log = (tmp_path / "worker.log").read_text(errors="replace")
    assert run.returncode == 0, f"{run.stdout}\n{run.stderr}\nworker:\n{worker_log}"
    for text in expected:
        assert text in run.stdout, run.stdout
    assert worker.returncode == 0, worker_log


@pytest.mark.parametrize("name", sorted(CASES))
def test_importing_an_example_queues_nothing(name: str, tmp_path: Path) -> None:
    """Import-safe: with an unreachable broker, importing the app module must not even connect."""
    cwd, app, *_ = CASES[name]
    module = app.split(":")[0]
    code = f"import {module}; print(len({module}.app.tasks))"
    env = {**os.environ, "TASKFORGE_BROKER_URL": "redis://127.0.0.1:1/0", "PYTHONDONTWRITEBYTECODE": "1"}
    out = subprocess.run([sys.executable, "-c", code], cwd=cwd, env=env, capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    assert int(out.stdout) >= 1
