"""Queue a few emails and wait for a worker to send them: ``python producer.py``."""

import sys

from myapp import send_email

from taskforge import TaskforgeError


def main() -> int:
    handles = [send_email.delay(to) for to in ("ada@example.com", "grace@example.com")]
    handles.append(send_email.delay("linus@example.com", subject="release notes"))
    print(f"queued {len(handles)} emails: {', '.join(h.id for h in handles)}")
    try:
        for handle in handles:
            print(f"  {handle.id}: {handle.result(timeout=30)}")
    except TimeoutError:
        print("no result within 30 s: is a worker running? (taskforge worker myapp:app)", file=sys.stderr)
        return 1
    except TaskforgeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
