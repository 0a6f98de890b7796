"""The app benchmarks/dashboard.py fills and serves: one task, in the queue ``bench``."""

from taskforge import TaskForge

app = TaskForge("dashbench", max_size=0)


@app.task(queue="bench")
def work(n):
    return n
