"""The app of tests/worker/test_logs.py; copied into a temp directory as logapp.py."""

import logging
import time

from taskforge import TaskForge

app = TaskForge("logapp")
log = logging.getLogger(__name__)


@app.task(max_attempts=2, backoff=lambda attempt: 1.75)
def flaky(key):
    raise ValueError(f"flaky {key} failed")


@app.task(max_attempts=1)
def doomed(key):
    raise RuntimeError(f"doomed {key} failed")


@app.task(max_attempts=1, timeout=1)
def too_slow():
    time.sleep(30)


@app.task
def chatty(word):
    log.info("the task says %s", word)
    log.warning("the task warns %s", word)
    return word
