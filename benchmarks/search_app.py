"""The app benchmarks/search.py fills and searches: four tasks, one keyed by customer."""

import os

from taskforge import TaskForge

app = TaskForge("searchbench", broker=os.environ.get("TASKFORGE_BROKER_URL", "redis://127.0.0.1:6379/0"))


@app.task(key=lambda customer, amount: customer)
def charge(customer, amount):
    return amount


@app.task
def send_receipt(email, order):
    return None


@app.task
def sync_inventory(sku, count):
    return count


@app.task
def build_report(day, rows):
    return rows
