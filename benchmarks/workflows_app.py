"""The app ``workflows.py`` runs: a no-op step, and two that time the gap between a step and the next."""

import os
import time

from taskforge import TaskForge

app = TaskForge("flows", os.environ["FLOWS_REDIS"])


@app.task
def noop(previous=None):
    return None


@app.task
def ended():
    return time.time()


@app.task
def started(ended_at):
    return time.time() - ended_at
