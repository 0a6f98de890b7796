"""Retries with backoff, Retry(after=...), and the dead-letter set.

Run a worker and this script, from this directory::

    taskforge worker retries_and_dead_letters:app -c 2    # terminal 1
    python retries_and_dead_letters.py                    # terminal 2

Importing the module only defines the app and its tasks; ``main()`` queues.
"""

import sys
import time

from taskforge import Retry, TaskFailed, TaskForge

app = TaskForge("retries")


@app.task(max_attempts=5, backoff=0.2)
def fetch_exchange_rate(currency, down_until):
    """An upstream that is down until ``down_until``: each failure is retried after a growing backoff."""
    if time.time() < down_until:
        raise ConnectionError("rates.example.com is not answering")
    return {"currency": currency, "rate": 1.08}


@app.task(max_attempts=20)
def wait_for_export(export_id, ready_at):
    """Polls without failing: Retry(after=...) asks for another attempt at a chosen time."""
    if time.time() < ready_at:
        raise Retry(after=0.2, reason=f"export {export_id} not ready yet")
    return f"export {export_id} downloaded"


@app.task(max_attempts=3, backoff=0.1)
def import_invoice(path):
    """Fails on every attempt: after max_attempts runs the job is dead, kept for inspection."""
    raise ValueError(f"{path}: not a valid invoice")


def main() -> int:
    flaky = fetch_exchange_rate.delay("EUR", down_until=time.time() + 0.4)
    print("flaky upstream:", flaky.result(timeout=30), f"after {flaky.info().attempts} attempts")

    export = wait_for_export.delay(7, ready_at=time.time() + 0.5)
    print("polling task:  ", export.result(timeout=30), f"after {export.info().attempts} attempts")

    doomed = import_invoice.delay("broken.pdf")
    try:
        doomed.result(timeout=30)
    except TaskFailed as exc:
        info = doomed.info()
        print(f"dead job:       {info.id} is {info.state} after {info.attempts} attempts: {exc.error}")
    else:
        print("import_invoice was expected to fail", file=sys.stderr)
        return 1
    print("inspect it:     taskforge dead retries_and_dead_letters list")
    print(f"run it again:   taskforge dead retries_and_dead_letters retry {doomed.id}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
