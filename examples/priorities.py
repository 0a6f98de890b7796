"""Priorities: a worker always takes the highest priority ready job; FIFO within one priority.

Run a worker with one child, so the order is easy to see, and this script::

    taskforge worker priorities:app -c 1    # terminal 1
    python priorities.py                    # terminal 2
"""

import sys
import time

from taskforge import Priority, TaskForge

app = TaskForge("priorities")


@app.task(priority="low")
def build_report(n):
    time.sleep(0.02)
    return "L"


@app.task  # normal
def resize_image(n):
    time.sleep(0.02)
    return "N"


@app.task(priority=Priority.CRITICAL)
def charge_card(n):
    time.sleep(0.02)
    return "C"


def main() -> int:
    # Lowest first: if priorities did nothing, the order would stay L... N... H... C...
    handles = build_report.delay_many([(i,) for i in range(15)])
    handles += resize_image.delay_many([(i,) for i in range(15)])
    handles += resize_image.with_options(priority="high").delay_many([(i,) for i in range(5)])
    handles += charge_card.delay_many([(i,) for i in range(5)])
    for handle in handles:
        handle.result(timeout=60)
    infos = sorted((h.info() for h in handles), key=lambda info: (info.started_at, info.id))
    order = "".join(info.priority.name[0] for info in infos)
    print("queued in the order  ", "".join(h.info().priority.name[0] for h in handles))
    print("started in the order ", order)
    print("(C critical, H high, N normal, L low; the first jobs may have started before the rest arrived)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
