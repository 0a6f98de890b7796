"""``taskforge job`` shows what a job given ``depends_on`` waits for: each parent's id, state and queue."""

from __future__ import annotations

import pytest

from taskforge import TaskForge

pytestmark = pytest.mark.redis


def test_a_deferred_job_shows_what_it_waits_for(cli_app: TaskForge, invoke) -> None:
    add = cli_app.tasks["cliapp.add"]
    parent = add.delay(1, 2)
    child = add.apply_async((3, 4), depends_on=parent)
    text = invoke("job", "cliapp:app", child.id).stdout
    assert "deferred" in text
    assert f"waits for    {parent.id} (pending, queue default)" in text
    plain = invoke("job", "cliapp:app", parent.id).stdout
    assert "waits for" not in plain and "depended on" not in plain
