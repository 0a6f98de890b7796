"""The project's TaskForge app: the broker (TASKFORGE_BROKER_URL, or the embedded one) and taskforge's own tasks."""

from taskforge import TaskForge

app = TaskForge("mysite")


@app.task(max_attempts=3)
def send_receipt(order_id: int) -> str:
    """A taskforge task, queued with delay_on_commit once the order is saved."""
    return f"receipt for order {order_id} sent"
