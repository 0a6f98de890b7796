"""How a user tests their tasks: the ``taskforge_app`` fixture, no Redis, no worker.

Run with:  python -m pytest examples/testing_kit
"""

import shop


def test_a_receipt_is_sent(taskforge_app):
    app = taskforge_app(shop.app)  # shop.app now uses a fresh in-memory broker
    handle = shop.send_receipt.delay(7, "a@example.com")
    [job] = app.drain()
    assert job.id == handle.id and job.state == "succeeded"
    assert handle.result() == "receipt 7 sent to a@example.com"
    assert job.progress == 0.5 and job.progress_message == "rendering"


def test_retries_play_out_without_waiting(taskforge_app):
    app = taskforge_app(shop.app)
    handle = shop.charge.delay(8)
    ran = app.drain(advance=3600)  # retries due within the hour run now
    assert [job.task for job in ran] == ["shop.charge"] * 3 + ["shop.send_receipt"]
    assert handle.result() == "charged" and handle.info().attempts == 3


def test_eager_mode_runs_at_delay(taskforge_app):
    taskforge_app(shop.app, eager=True)
    assert shop.send_receipt.delay(9, "e@example.com").result(timeout=1) == "receipt 9 sent to e@example.com"
