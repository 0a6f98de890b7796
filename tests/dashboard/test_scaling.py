"""The depth an autoscaler reads (``/api/queues/{queue}/depth``), and the KEDA example that reads it."""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path

import pytest

from taskforge import TaskForge
from taskforge.broker.keys import QueueKeys

from .conftest import http

pytestmark = [pytest.mark.redis, pytest.mark.slow]

KEDA = Path(__file__).resolve().parents[2] / "examples" / "keda" / "keda.yaml"


def test_the_depth_counts_ready_due_and_running_jobs_and_none_while_paused(
    start_dashboard, producer: TaskForge
) -> None:
    add = producer.task_for("dashapp.add")
    for n in range(3):
        add.delay(n, 1)
    soon, later = add.apply_in(10, 1, 1), add.apply_in(3600, 2, 2)
    [running], _ = producer.broker.claims.dequeue("default", 30_000)
    # `soon` comes due with no worker left to promote it (its due time moved into the past); `later` is not due
    producer.broker.client.zadd(QueueKeys("default").scheduled, {soon.id: 1}, xx=True)
    board = start_dashboard()
    status, body, _ = http(f"{board.base}/api/queues/default/depth")
    assert status == 200, body
    assert json.loads(body) == {
        "queue": "default",
        "depth": 4,  # 2 pending + 1 due + 1 running: `later` waits its turn
        "pending": 2,
        "due": 1,
        "running": 1,
        "scheduled": 2,
        "paused": False,
    }
    producer.pause("default")
    status, body, _ = http(f"{board.base}/api/queues/default/depth")
    assert status == 200 and json.loads(body)["depth"] == 1  # paused: only the running job counts
    status, body, _ = http(f"{board.base}/api/queues/never-used/depth")
    assert status == 200 and json.loads(body)["depth"] == 0  # an empty queue: scale to zero
    status, body, _ = http(f"{board.base}/api/queues/bad%20name/depth")
    assert status == 400 and "error" in json.loads(body)
    assert soon.id != later.id != running.id


def test_the_keda_example_reads_the_depth_through_the_dashboards_auth(start_dashboard, producer: TaskForge) -> None:
    text = KEDA.read_text()
    url = re.search(r'url: "http://taskforge-dashboard:8080(/api/queues/([^/]+)/depth)"', text)
    assert url is not None, "the ScaledObject's metrics-api url"
    assert re.search(r'valueLocation: "depth"', text) and re.search(r'authMode: "basic"', text)
    assert re.search(r"minReplicaCount: 0\b", text) and re.search(r'activationTargetValue: "0"', text)
    assert "--auth" in text and "taskforge dashboard myapp:app" in text
    # KEDA asks for the Service's name: the dashboard must be told to answer to it (DNS rebinding defence).
    assert "--allow-host taskforge-dashboard " in text
    service = {"Host": "taskforge-dashboard:8080"}
    queue = url[2]
    for n in range(5):
        producer.task_for("dashapp.add").with_options(queue=queue).delay(n, n)
    board = start_dashboard("--allow-host", "taskforge-dashboard", "--auth", "keda:change-me")
    status, _, _ = http(f"{board.base}{url[1]}", headers=service)
    assert status == 401  # the scaler must authenticate, as the example's TriggerAuthentication does
    token = base64.b64encode(b"keda:change-me").decode()
    status, body, _ = http(f"{board.base}{url[1]}", headers={**service, "Authorization": f"Basic {token}"})
    assert status == 200 and json.loads(body)["depth"] == 5
