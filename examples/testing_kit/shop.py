"""A small app whose tasks the test next to it checks with taskforge's testing kit."""

from taskforge import Retry, TaskForge, current_job

app = TaskForge("shop")
SENT: list[str] = []


@app.task
def send_receipt(order_id: int, email: str) -> str:
    job = current_job()
    job.set_progress(0.5, "rendering")
    SENT.append(email)
    return f"receipt {order_id} sent to {email}"


@app.task(max_attempts=3, backoff=60)
def charge(order_id: int, attempts_before_success: int = 2) -> str:
    if current_job().attempt <= attempts_before_success:
        raise Retry(after=30, reason="payment gateway busy")
    send_receipt.delay(order_id, "buyer@example.com")
    return "charged"
