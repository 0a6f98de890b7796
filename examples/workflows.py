"""Workflows: a chain with a group in it (a chord), and a chain that fails and says so.

An "upload" arrives; its pages are fetched, each page is scanned for words and
for pictures side by side, and a summary merges what the pages gave. Run a
worker and this script::

    taskforge worker workflows:app -c 2    # terminal 1
    python workflows.py                    # terminal 2
"""

import sys
import time

from taskforge import TaskFailed, TaskForge, chain, group

app = TaskForge("workflows")


@app.task
def fetch(upload):
    """The first step: its result comes first in the next step's arguments."""
    return {"upload": upload, "pages": 3}


@app.task
def count_words(document):
    return {"words": 120 * document["pages"]}


@app.task(queue="images", priority="high")
def count_pictures(document):
    return {"pictures": 2 * document["pages"]}


@app.task
def summarize(parts, title):
    """After a group: one argument with the members' results, in member order."""
    merged = {k: v for part in parts for k, v in part.items()}
    return f"{title}: {merged['words']} words, {merged['pictures']} pictures"


@app.task(max_attempts=2)
def publish(summary):
    raise RuntimeError("the publishing service is down")


@app.task
def alert(message):
    print(f"alert: {message}")
    return message


def main() -> int:
    pipeline = chain(fetch.s("report.pdf"), group(count_words.s(), count_pictures.s()), summarize.s(title="report"))
    handle = pipeline.delay()
    print("summary:", handle.result(timeout=60))
    print("steps:", ", ".join(f"{s.task.split('.')[-1]}={s.state}" for s in handle.info().steps))

    failing = chain(
        fetch.s("draft.pdf"),
        summarize.si([{"words": 1, "pictures": 0}], title="draft"),
        publish.s(),
        on_failure=alert.si("draft.pdf was not published"),
    )
    handle = failing.delay()
    try:
        handle.result(timeout=60)
    except TaskFailed as exc:
        print(f"workflow {handle.status()}: {exc.task} failed: {exc.error}")
    again = app.workflow(handle.id)  # any process can follow a workflow by its id
    print("on_failure said:", alert_of(again).result(timeout=60))
    return 0


def alert_of(workflow):
    """The on_failure step's job: it is sent right after the workflow ends, so look for it a little."""
    for _ in range(100):
        for step in workflow.info().steps:
            if step.task.endswith("alert"):
                return app.job(step.id)
        time.sleep(0.1)
    raise TimeoutError("on_failure was never sent")


if __name__ == "__main__":
    sys.exit(main())
