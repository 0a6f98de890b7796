"""Jobs that run later: apply_in (a delay) and apply_at (a time), and cancelling one.

Run a worker and this script, from this directory::

    taskforge worker scheduling:app -c 2    # terminal 1
    python scheduling.py                    # terminal 2
"""

import sys
from datetime import datetime, timedelta, timezone

from taskforge import TaskForge

app = TaskForge("scheduling")


@app.task
def remind(who):
    return f"reminded {who}"


def main() -> int:
    now = datetime.now(timezone.utc)
    soon = remind.apply_in(1.5, "ada")  # seconds, or a timedelta
    later = remind.apply_at(now + timedelta(seconds=2.5), "grace")  # naive datetimes mean UTC
    never = remind.apply_in(timedelta(hours=1), "nobody")
    print(f"queued: {soon.status()}, {later.status()}, {never.status()}")
    print("cancelled the one-hour reminder:", never.cancel(), never.status())
    for handle in (soon, later):
        result = handle.result(timeout=30)
        info = handle.info()
        late = (info.started_at - info.scheduled_at).total_seconds()
        print(f"{result}: due {info.scheduled_at:%H:%M:%S.%f}, started {late * 1000:.0f} ms after")
    return 0


if __name__ == "__main__":
    sys.exit(main())
