"""The app the cluster benchmark's workers run: one trivial task, sent to twenty queues."""

import os

from taskforge import TaskForge

app = TaskForge("bench-cluster", durability=os.environ.get("BENCH_DURABILITY", "async"))
QUEUES = [f"bench{i:02d}" for i in range(20)]


@app.task(queue=QUEUES[0])
def noop(n):
    return n
