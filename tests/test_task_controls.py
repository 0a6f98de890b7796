"""Task controls: retry filters, expiry and caller-chosen job ids, through ``app.drain()``.

Run on ``memory://`` and on real Redis; ``tests/worker/test_task_controls.py``
runs them in real worker processes.
"""

from __future__ import annotations

import time
from datetime import datetime, timedelta, timezone

import pytest

from taskforge import ConfigurationError, JobState, TaskForge, chain, status
from taskforge.job import FailureKind


class Transient(Exception):
    pass


def test_the_options_are_checked_at_decoration(app: TaskForge) -> None:
    def f() -> None:
        return None

    bad = [
        dict(retry_on=ValueError, dont_retry_on=KeyError),
        dict(retry_on="ValueError"),
        dict(dont_retry_on=(ValueError, 3)),
        dict(expires=0),
        dict(expires=datetime(2030, 1, 1)),  # naive
        dict(expires="1h"),
    ]
    for options in bad:
        with pytest.raises(ConfigurationError):
            app.task(name=f"bad{len(app.tasks)}", **options)(f)  # type: ignore[call-overload]
    task = app.task(name="ok")(f)
    for job_id in ("", "has space", "x" * 201, "tab\there", "bell\x07"):
        with pytest.raises(ConfigurationError, match="job_id"):
            task.with_options(job_id=job_id)
    with pytest.raises(ConfigurationError):
        task.with_options(retry_on=ValueError, dont_retry_on=KeyError)
    with pytest.raises(ConfigurationError, match="delay_many"):
        task.with_options(job_id="one").delay_many([(), ()])
    with pytest.raises(ConfigurationError, match="workflow steps"):
        chain(task.s(), task.with_options(job_id="fixed").si()).delay()
    assert app.broker.inspection.counts("default")["pending"] == 0


def test_retry_filters_end_a_job_at_once_and_say_why(app: TaskForge) -> None:
    runs: list[str] = []

    @app.task(name="only_transient", retry_on=Transient, max_attempts=5, backoff=0)
    def only_transient(kind: str) -> None:
        runs.append(f"only:{kind}")
        raise Transient("again") if kind == "transient" else KeyError(kind)

    @app.task(name="not_value", dont_retry_on=(ValueError,), max_attempts=5, backoff=0)
    def not_value(kind: str) -> None:
        runs.append(f"not:{kind}")
        raise ValueError(kind) if kind == "value" else Transient(kind)

    @app.task(name="plain", max_attempts=3, backoff=0)
    def plain() -> None:
        runs.append("plain")
        raise KeyError("plain")

    handles = [
        only_transient.delay("transient"),
        only_transient.delay("key"),
        not_value.delay("value"),
        not_value.delay("other"),
        plain.with_options(dont_retry_on=KeyError).delay(),  # chosen per call: stored with the job
        not_value.with_options(retry_on=ValueError).delay("value"),  # the call's filters replace the task's
    ]
    app.drain()
    infos = [h.info() for h in handles]
    assert [i.state for i in infos] == [JobState.DEAD] * 6
    assert [i.attempts for i in infos] == [5, 1, 1, 5, 1, 5]
    assert "KeyError: 'key' (KeyError is not retried)" == infos[1].error
    assert infos[2].error == "ValueError: value (ValueError is not retried)"
    assert infos[4].error == "KeyError: 'plain' (KeyError is not retried)"
    assert infos[3].error is not None and "not retried" not in infos[3].error
    assert runs.count("plain") == 1


def test_an_expired_job_is_cancelled_unrun_from_pending_and_from_scheduled(app: TaskForge) -> None:
    ran: list[str] = []

    @app.task(name="sale", expires=0.3)
    def sale(n: str) -> None:
        ran.append(n)

    @app.task(name="fresh")
    def fresh(n: str) -> None:
        ran.append(n)

    stale = [sale.delay("pending"), sale.apply_in(0.5, "scheduled")]
    past = fresh.with_options(expires=datetime.now(timezone.utc) - timedelta(seconds=1)).delay("past")
    later = fresh.with_options(expires=timedelta(hours=1)).delay("later")
    kept = fresh.with_options(expires=60).apply_in(0.2, "kept")
    time.sleep(0.8)
    app.drain()
    assert sorted(ran) == ["kept", "later"]
    for handle in (*stale, past):
        info = handle.info()
        assert (info.state, info.error, info.failure) == (JobState.CANCELLED, "expired", FailureKind.EXPIRED)
    assert later.status() is kept.status() is JobState.SUCCEEDED
    assert app.broker.inspection.counts("default")["pending"] == 0
    assert status.queue_status(app, "default").expired_last_hour == 3
    assert status.queue_status(app, "default").to_dict()["expired_last_hour"] == 3


def test_a_caller_chosen_job_id_stores_one_job_while_it_exists(app: TaskForge) -> None:
    ran: list[int] = []

    @app.task(name="receipt")
    def receipt(order: int) -> int:
        ran.append(order)
        return order

    first = receipt.with_options(job_id="receipt-order-42").delay(42)
    again = receipt.with_options(job_id="receipt-order-42").delay(43)  # a retry after a lost reply, say
    assert first.id == again.id == "receipt-order-42"
    assert app.job("receipt-order-42").status() is JobState.PENDING
    assert app.broker.inspection.counts("default")["pending"] == 1
    app.drain()
    assert ran == [42]
    # Finished and still retained: nothing is stored, the same job comes back.
    assert receipt.with_options(job_id="receipt-order-42").delay(44).result(timeout=5) == 42
    app.drain()
    assert ran == [42]
