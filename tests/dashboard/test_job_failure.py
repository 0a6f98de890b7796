"""The dashboard's job page names the failure kind of a job that failed, and nothing for one that did not."""

from __future__ import annotations

import html
import re

import pytest

from taskforge import TaskForge
from taskforge.job import FailureKind

from .conftest import http

pytestmark = [pytest.mark.redis, pytest.mark.slow]


def test_the_job_page_shows_the_failure_kind(start_dashboard, producer: TaskForge) -> None:
    failed, fine = producer.send("dashapp.fails_first", "x"), producer.send("dashapp.add", 1, 2)
    claims, _ = producer.broker.claims.dequeue("default", 30_000)
    error = "TimeoutError: the job ran longer than its timeout of 1 s and was killed"
    outcome = producer.broker.claims.fail(
        "default", claims[0].id, claims[0].token, error, "", None, FailureKind.TIMEOUT
    )
    assert claims[0].id == failed.id and outcome == "dead"
    board = start_dashboard()
    status, body, _ = http(f"{board.base}/jobs/{failed.id}?queue=default")
    assert status == 200
    shown = re.search(r'<dd class="mono" id="failure">([^<]*)</dd>', body)
    assert shown is not None and shown[1] == "timeout", body
    assert html.escape(error) in body
    status, body, _ = http(f"{board.base}/jobs/{fine.id}?queue=default")
    assert status == 200 and 'id="failure"' not in body and "Failure" not in body
