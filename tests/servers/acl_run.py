"""The suite as the documented ACL user: what the code under test sends must be on its line.

    eval "$(python -m tests.servers.acl_run env ADMIN_URL)"   # CI: grant a user, export the test URLs
    python -m tests.servers.acl_run check ADMIN_URL            # CI, after the suite: the ACL LOG is empty
    python -m tests.servers.acl_run run [PYTEST ARGS ...]      # locally: a server of its own, a subset

``env`` creates a user (``taskforge-ci-<random>``) on the server ``ADMIN_URL``
names, granted exactly the rules of ``taskforge.broker.acl`` (the line of
``docs/reference/acl.md``), and prints the exports that make the suite run as it: every app,
worker and CLI the tests start connects as that user (``TASKFORGE_TEST_REDIS``);
only the tests' own housekeeping (flushing a database, reading a TTL,
damaging a key on purpose, the side keys where tasks leave their traces)
goes through the admin (``TASKFORGE_TEST_ADMIN_REDIS``, see tests/conftest.py).
A command the line lacks then fails the test that sent it; ``check`` reads
the server's ACL LOG afterwards, so a denial the code swallowed (a
``pcall``, an error it retried past) fails the run too. ``run`` does the
same on a ``redis-server`` of its own (the first on ``PATH``) for the
subsets below, or the pytest arguments given.
"""

from __future__ import annotations

import os
import secrets
import shutil
import sys
import tempfile
from pathlib import Path

import redis

from taskforge.broker.acl import acl_rules

from .matrix import run_pytest, start

# The memory:// halves do not touch the server; the browser halves of the dashboard run in the main suite.
SUBSETS = (
    [
        "tests/broker",
        "tests/workflows",
        "tests/test_durable_steps.py",
        "tests/test_streams.py",
        "tests/test_find_jobs.py",
        "-k",
        "not memory",
    ],
    ["tests/worker", "tests/dashboard", "--ignore=tests/dashboard/test_browser.py", "-k", "not memory and not browser"],
)
USER = "taskforge"


# Asked and done without when denied: the server check's CONFIG GET save (the RDB schedule, while the
# AOF is off), which the documented line leaves out because CONFIG GET can read secrets.
OPTIONAL = {"config|get", "config"}  # Redis 6.2 logs a subcommand under its command


def denials(admin: redis.Redis, user: str = USER) -> list[str]:
    """The user's entries in the ACL LOG: each a command (or key) the documented line did not grant."""
    entries = admin.acl_log(count=1000)
    mine = [e for e in entries if e.get("username") in (user, user.encode()) and e.get("object") not in OPTIONAL]
    return sorted({f"{e['reason']} {e['object']} ({e['context']})" for e in mine})


def grant(admin_url: str) -> tuple[str, str]:
    """Create a fresh minimal user on the server of ``admin_url``; returns its name and its test URL (database 15)."""
    admin = redis.Redis.from_url(admin_url)
    name, password = f"{USER}-ci-{secrets.token_hex(4)}", secrets.token_hex(12)
    admin.execute_command("ACL", "SETUSER", name, "reset", "on", f">{password}", *acl_rules())
    admin.execute_command("ACL", "LOG", "RESET")
    host, port = admin.connection_pool.connection_kwargs["host"], admin.connection_pool.connection_kwargs["port"]
    admin.close()
    return name, f"redis://{name}:{password}@{host}:{port}/15"


def main(argv: list[str]) -> int:
    if argv[:1] == ["env"] and len(argv) == 2:
        name, url = grant(argv[1])
        exports = {"TASKFORGE_TEST_REDIS": url, "TASKFORGE_TEST_ADMIN_REDIS": argv[1], "TASKFORGE_TEST_ACL_USER": name}
        print("export " + " ".join(f"{k}='{v}'" for k, v in exports.items()))
        return 0
    if argv[:1] == ["check"] and len(argv) == 2:
        name = os.environ.get("TASKFORGE_TEST_ACL_USER", USER)
        denied = denials(redis.Redis.from_url(argv[1]), name)
        print(f"ACL LOG of {name}:", "empty" if not denied else "\n  " + "\n  ".join(denied), flush=True)
        return 1 if denied else 0
    if argv[:1] == ["run"]:
        return run(argv[1:])
    print(__doc__)
    return 2


def run(argv: list[str]) -> int:
    subsets = [argv] if argv else [list(s) for s in SUBSETS]
    admin_password = secrets.token_hex(12)
    with tempfile.TemporaryDirectory(prefix="tf-acl-") as workdir:
        binary = shutil.which("redis-server")
        if binary is None:
            raise SystemExit("redis-server is not on PATH")
        extra = ("--requirepass", admin_password, "--acllog-max-len", "1000")
        proc, port = start(binary, Path(workdir), *extra, password=admin_password)
        try:
            admin_url = f"redis://:{admin_password}@127.0.0.1:{port}"
            name, url = grant(admin_url)
            env = {**os.environ, "CI": os.environ.get("CI", "true")}
            env |= {"TASKFORGE_TEST_REDIS": url, "TASKFORGE_TEST_ADMIN_REDIS": admin_url}
            failed = []
            for subset in subsets:
                print(f"== ACL user only: pytest {' '.join(subset)}", flush=True)
                code = run_pytest([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *subset], env)
                if code != 0:
                    failed.append(f"pytest {' '.join(subset)} (exit {code})")
            failed += [f"denied by the ACL: {d}" for d in denials(redis.Redis.from_url(admin_url), name)]
        finally:
            proc.terminate()
            proc.wait(timeout=15)
    print("ACL-only run:", "passed" if not failed else "FAILED\n  " + "\n  ".join(failed), flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
