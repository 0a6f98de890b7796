"""The dashboard's job page shows a job's finished durable steps and how many items it streamed."""

from __future__ import annotations

import html
import re

import pytest

from taskforge import TaskForge
from taskforge.serialization import dumps

from .conftest import http

pytestmark = [pytest.mark.redis, pytest.mark.slow]


def test_the_job_page_shows_steps_and_the_stream_length(start_dashboard, producer: TaskForge) -> None:
    stepped, plain = producer.send("dashapp.add", 1, 1), producer.send("dashapp.add", 2, 2)
    claims = {}
    while len(claims) < 2:
        for claim in producer.broker.claims.dequeue("default", 30_000)[0]:
            claims[claim.id] = claim
    claim = claims[stepped.id]
    steps = producer.broker.steps
    assert steps.store("default", claim.id, claim.token, "fetch", dumps({"user": 7}))
    assert steps.store("default", claim.id, claim.token, "summarize <b>", dumps("three words"))
    for index, word in enumerate(("never", "redo", "work"), 1):
        assert steps.append("default", claim.id, claim.token, dumps(word), index)
    board = start_dashboard()
    status, body, _ = http(f"{board.base}/jobs/{stepped.id}?queue=default")
    assert status == 200, body
    table = re.search(r'<table class="card" id="steps">(.*?)</table>', body, re.S)
    assert table is not None, body
    rows = re.findall(r'<td class="mono">([^<]*)</td><td><pre class="code">([^<]*)</pre>', table[1])
    assert [(html.unescape(name), html.unescape(value).split()) for name, value in rows] == [
        ("fetch", ["{", '"user":', "7", "}"]),
        ("summarize <b>", ['"three', 'words"']),
    ]
    assert re.search(r'<dd id="stream-length">3 items</dd>', body), body
    status, body, _ = http(f"{board.base}/jobs/{plain.id}?queue=default")
    assert status == 200 and 'id="steps"' not in body and 'id="stream-length"' not in body
