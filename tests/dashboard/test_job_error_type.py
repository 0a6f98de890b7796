"""The dashboard's job page shows the class path of a failure's error and a job's progress meta."""

from __future__ import annotations

import html
import re

import pytest

from taskforge import TaskForge
from taskforge.job import FailureKind
from taskforge.serialization import dumps

from .conftest import http

pytestmark = [pytest.mark.redis, pytest.mark.slow]


def test_the_job_page_shows_error_type_and_progress_meta(start_dashboard, producer: TaskForge) -> None:
    failed, running, fine = (producer.send("dashapp.add", n, 1) for n in range(3))
    claims = {}
    while len(claims) < 2:
        for claim in producer.broker.claims.dequeue("default", 30_000)[0]:
            claims[claim.id] = claim
    assert set(claims) == {failed.id, running.id}
    claim = claims[failed.id]
    producer.broker.claims.fail(
        "default", claim.id, claim.token, "KeyError: 'k'", "", None, FailureKind.EXCEPTION, "builtins.KeyError"
    )
    claim = claims[running.id]
    assert producer.broker.claims.progress(
        "default", claim.id, claim.token, 0.3, "fetching", dumps({"done": 3, "total": 10})
    )
    board = start_dashboard()
    status, body, _ = http(f"{board.base}/jobs/{failed.id}?queue=default")
    shown = re.search(r'<dd class="mono" id="error-type">([^<]*)</dd>', body)
    assert status == 200 and shown is not None and shown[1] == "builtins.KeyError", body
    status, body, _ = http(f"{board.base}/jobs/{running.id}?queue=default")
    shown = re.search(r'<pre class="code" id="progress-meta">([^<]*)</pre>', body, re.S)
    assert status == 200 and shown is not None, body
    assert html.unescape(shown[1]).split() == ["{", '"done":', "3,", '"total":', "10", "}"]
    status, body, _ = http(f"{board.base}/jobs/{fine.id}?queue=default")
    assert status == 200 and 'id="error-type"' not in body and 'id="progress-meta"' not in body
