"""The producer: enqueues the planned jobs while the faults happen.

An enqueue call that raises ``BrokerUnavailable`` is retried with a fresh
token (hence a fresh job id) until one call returns: "lost" is measured
against those acknowledged calls only.  A failed call may still have stored
its job (the reply, not the write, was lost); such "phantom" jobs are found
afterwards by their token and must merely finish like any other.
"""

from __future__ import annotations

import itertools
import threading
import time
import traceback
from collections.abc import Callable
from typing import Any

from taskforge import BrokerUnavailable, TaskForge

from .jobs import APP_MODULE, KEY_CAP, KINDS, PATIENT, SHARED_CAP, JobPlan

GIVE_UP_AFTER = 120.0  # one logical job that cannot be enqueued for this long fails the test


def _keyed_stand_in(token: int, account: str, seconds: float) -> None:
    """Never runs here: the producer's declaration of chaosapp's keyed tasks (their key and cap)."""


def _turns_stand_in(token: int, account: str) -> None:
    """Never runs here: the producer's declaration of chaosapp's keyed tasks without limits."""


def _shared_stand_in(token: int, seconds: float) -> None:
    """Never runs here: the producer's declaration of chaosapp's tasks sharing the "screens" limit."""


class Producer(threading.Thread):
    def __init__(self, url: str, jobs: list[JobPlan], pace: Callable[[], int], log: Callable[[str], None]) -> None:
        super().__init__(name="chaos-producer", daemon=True)
        self.app = TaskForge("chaos-producer", broker=url)
        # A job's key and its key's cap are decided where the call is made: the
        # producer declares the keyed tasks as the workers' app does.
        for name in ("keyed", "aio_keyed"):
            patient = {"max_attempts": PATIENT, "max_worker_losses": PATIENT}
            self.app.task(name=f"{APP_MODULE}.{name}", key="account", key_concurrency=KEY_CAP, **patient)(
                _keyed_stand_in
            )
        # The same for the tasks sharing a named limit: their jobs carry it, whether a worker published it yet or not.
        self.app.limit("screens", concurrency=SHARED_CAP)
        for name in ("screen_a", "screen_b", "aio_screen_a", "aio_screen_b"):
            patient = {"max_attempts": PATIENT, "max_worker_losses": PATIENT}
            self.app.task(name=f"{APP_MODULE}.{name}", limits=["screens"], **patient)(_shared_stand_in)
        for name in ("turns", "aio_turns"):
            patient = {"max_attempts": PATIENT, "max_worker_losses": PATIENT}
            self.app.task(name=f"{APP_MODULE}.{name}", key="account", **patient)(_turns_stand_in)
        self.jobs = jobs
        self.pace = pace  # how many jobs should have been enqueued by now
        self.log = log
        self.tokens = itertools.count(1)
        self.token_owner: dict[int, int] = {}  # token -> job index
        self.failed_calls = 0
        self.error: str | None = None
        self.stop = threading.Event()

    def run(self) -> None:
        try:
            i = 0
            while i < len(self.jobs) and not self.stop.is_set():
                if i >= self.pace():
                    time.sleep(0.02)
                    continue
                group = [self.jobs[i]]
                if group[0].batch:
                    while i + len(group) < len(self.jobs) and self.jobs[i + len(group)].batch == group[0].batch:
                        group.append(self.jobs[i + len(group)])
                self.enqueue(group)
                i += len(group)
        except BaseException:  # noqa: B036 - reported by the test, never lost in a thread
            self.error = traceback.format_exc()
        finally:
            self.app.broker.client.close()

    def enqueue(self, group: list[JobPlan]) -> None:
        first = group[0]
        deadline = time.monotonic() + GIVE_UP_AFTER
        pause = 0.05
        while True:
            tokens = [next(self.tokens) for _ in group]
            for job, token in zip(group, tokens, strict=True):
                job.tokens.append(token)
                self.token_owner[token] = job.index
            try:
                ids = self.call(group, tokens)
            except BrokerUnavailable as exc:
                self.failed_calls += 1
                if time.monotonic() > deadline or self.stop.is_set():
                    raise AssertionError(f"job {first.index} could not be enqueued for {GIVE_UP_AFTER} s") from exc
                self.log(f"producer: enqueue of token(s) {tokens} failed ({str(exc)[:80]}...); retrying")
                time.sleep(pause)
                pause = min(pause * 2, 1.0)
                continue
            for job, token, job_id in zip(group, tokens, ids, strict=True):
                job.token, job.job_id = token, job_id
            return

    def call(self, group: list[JobPlan], tokens: list[int]) -> list[str]:
        first = group[0]
        kind = KINDS[first.kind]
        if first.by_name:
            return [self.app.send(first.task, *first.args(tokens[0])).id]
        # Patient with the faults' kills (worker losses) as with attempts: only bad faults may end a job.
        options: dict[str, Any] = {"queue": kind.queue, "max_attempts": kind.max_attempts, "max_worker_losses": PATIENT}
        if first.priority:
            options["priority"] = first.priority
        task = self.app.task_for(first.task).with_options(**options)
        if len(group) > 1:
            return [h.id for h in task.delay_many([job.args(t) for job, t in zip(group, tokens, strict=True)])]
        if first.delay:
            return [task.apply_in(first.delay, *first.args(tokens[0])).id]
        if first.parents:  # sent in order: each parent's call was acknowledged before this one
            parents = [self.jobs[index].job_id or "" for index in first.parents]
            return [task.apply_async(first.args(tokens[0]), depends_on=parents, allow_failure=first.allow_failure).id]
        return [task.delay(*first.args(tokens[0])).id]
