"""What the async producer raises when Redis is gone, and what a user's type checker sees."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from taskforge import BrokerUnavailable, TaskForge
from taskforge.errors import ConfigurationError
from tests.conftest import skip_or_fail
from tests.worker.conftest import free_port

from .test_producer import define, run


def test_redis_down_is_brokerunavailable_quickly() -> None:
    app = TaskForge("down", broker=f"redis://127.0.0.1:{free_port()}/0")
    add, _ = define(app)

    async def main() -> None:
        for attempt in (lambda: add.adelay(1), lambda: app.job("some-id").aresult(timeout=1)):
            started = time.monotonic()
            with pytest.raises(BrokerUnavailable, match="cannot reach the broker"):
                await attempt()
            assert time.monotonic() - started < 10

    run(app, main)


def test_waiting_on_a_dead_broker_never_blocks_the_loop() -> None:
    app = TaskForge("down", broker=f"redis://127.0.0.1:{free_port()}/0")
    add, _ = define(app)

    async def main() -> None:
        beats = 0

        async def beat() -> None:
            nonlocal beats
            while True:
                await asyncio.sleep(0.01)
                beats += 1

        beating = asyncio.create_task(beat())
        started = time.monotonic()
        with pytest.raises(BrokerUnavailable):
            await add.adelay(1)  # three tries with back-off between them
        beating.cancel()
        assert beats >= int((time.monotonic() - started) / 0.01 / 4)

    run(app, main)


def test_an_unknown_scheme_is_a_configuration_error() -> None:
    app = TaskForge("odd", broker="amqp://localhost/")

    async def main() -> None:
        with pytest.raises(ConfigurationError, match="unknown scheme"):
            app.async_broker()

    run(app, main)


USER_CODE = """
from taskforge import TaskForge, chain

app = TaskForge("typed")


@app.task
def add(a: int, b: int) -> int:
    return a + b


async def main() -> None:
    h = await add.adelay(1, 2)
    reveal_type(h)
    reveal_type(await h.aresult(timeout=1))
    reveal_type(await add.adelay_many([(1, 2)]))
    reveal_type(await chain(add.s(1, 2)).adelay())
    await add.adelay("one", 2)
    await add.aapply_in(5, 1, b=2)
"""


@pytest.mark.slow
def test_the_async_api_is_typed_for_users(tmp_path: Path) -> None:
    try:
        from mypy import api as mypy_api
    except ImportError:  # the test extra installs it; skipping is for a bare checkout only
        skip_or_fail("mypy is not installed")
    user = tmp_path / "user.py"
    user.write_text(USER_CODE)
    out, err, _ = mypy_api.run([str(user), "--strict", "--no-error-summary", "--hide-error-context"])
    lines = out.splitlines()
    revealed = [  # older mypy spells builtins out
        line.split("Revealed type is ", 1)[1].replace("builtins.", "") for line in lines if "Revealed type" in line
    ]
    assert revealed == [
        '"taskforge.handle.JobHandle[int]"',
        '"int"',
        '"list[taskforge.handle.JobHandle[int]]"',
        '"taskforge.workflows.handle.WorkflowHandle[Any]"',
    ], out + err
    errors = [line for line in lines if ": error:" in line and f"{user.name}:" in line]
    assert len(errors) == 1 and '"adelay" of "Task" has incompatible type "str"' in errors[0], out
