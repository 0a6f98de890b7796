"""The quickstart app: one task, importable by a worker and by the producer.

Importing this module queues nothing and opens no connection; the broker is
TASKFORGE_BROKER_URL, else redis://localhost:6379/0.
"""

import time

from taskforge import TaskForge

app = TaskForge("quickstart")


@app.task(priority="high", max_attempts=5, timeout=30, queue="mail")
def send_email(to, subject="hello"):
    time.sleep(0.1)  # pretend to talk to an SMTP server
    return f"sent {subject!r} to {to}"
