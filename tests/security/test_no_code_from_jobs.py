"""A job names a task; it never names code. Nothing a job carries is unpickled, evaluated or imported.

A worker looks a job's task name up in its app's registry and nowhere else:
``os.system``, ``builtins.eval`` or the dotted path of a module that really is on
``sys.path`` end dead with ``UnknownTask``, and canary files they would create
never appear. A payload that is a pickle is only bytes that are not msgpack.
"""

from __future__ import annotations

import os
import pickle
import re
from pathlib import Path

import msgpack
import pytest
import redis

from taskforge import JobState, TaskForge
from taskforge.broker.keys import QueueKeys

from .procs import WORKER, PrivateRedis, Processes, report

PACKAGE = Path(__file__).resolve().parents[2] / "taskforge"

CANARY_MODULE = """
from pathlib import Path

Path(__file__).with_name("canary-imported").write_text("canarymod was imported")


def run(*args, **kwargs):
    Path(__file__).with_name("canary-called").write_text("canarymod.run was called")
"""


class Evil:
    """Unpickling this runs a shell command."""

    def __init__(self, command: str) -> None:
        self.command = command

    def __reduce__(self) -> tuple[object, tuple[str]]:
        return os.system, (self.command,)


def hostile_jobs(app_dir: Path) -> list[tuple[str, tuple[object, ...]]]:
    """(task name, args) pairs, each creating its own canary file if anything ran it."""

    def canary(n: int) -> str:
        return str(app_dir / f"canary-{n}")

    code = "__import__('pathlib').Path({path!r}).write_text('x')"
    return [
        ("os.system", (f"touch {canary(1)}",)),
        ("posix.system", (f"touch {canary(2)}",)),
        ("builtins.eval", (code.format(path=canary(3)),)),
        ("builtins.exec", (code.format(path=canary(4)),)),
        ("eval", (code.format(path=canary(5)),)),
        ("exec", (code.format(path=canary(6)),)),
        ("__import__", ("canarymod",)),
        ("builtins.__import__", ("canarymod",)),
        ("importlib.import_module", ("canarymod",)),
        ("subprocess.run", (["touch", canary(7)],)),
        ("subprocess.check_call", (["touch", canary(8)],)),
        ("pickle.loads", (pickle.dumps(Evil(f"touch {canary(9)}")),)),
        ("pathlib.Path.write_text", (canary(10), "x")),
        ("canarymod", ()),
        ("canarymod.run", ()),
        ("canarymod:run", ()),
        ("secapp.touch", (canary(11),)),  # the module path of a registered task (registered as "touch")
        ("secapp:touch", (canary(12),)),
        ("TOUCH", (canary(13),)),
        ("touch ", (canary(14),)),
        ("tests.security.test_no_code_from_jobs.Evil", (f"touch {canary(15)}",)),
    ]


@pytest.mark.redis
def test_job_names_are_looked_up_in_the_registry_only(processes: Processes, app_dir: Path) -> None:
    (app_dir / "canarymod.py").write_text(CANARY_MODULE)
    server = PrivateRedis(processes)
    url = f"redis://127.0.0.1:{server.port}/0"
    client = redis.Redis.from_url(url)
    server.start(client.ping)
    producer = TaskForge("producer", broker=url)
    jobs = [(producer.send(name, *args), name) for name, args in hostile_jobs(app_dir)]
    # A pickle where the msgpack payload should be, written by someone with access to Redis.
    q = QueueKeys("default")
    for n, body in enumerate(
        [
            pickle.dumps(Evil(f"touch {app_dir / 'canary-pickle'}")),
            msgpack.packb([[msgpack.ExtType(99, pickle.dumps(Evil("true")))], {}]),
        ]
    ):
        raw = producer.send("echo", "placeholder")
        client.hset(q.job(raw.id), "payload", body)
        jobs.append((raw, f"pickled payload #{n}"))
    assert producer.send("touch", str(app_dir / "legit")).id  # the one job that may run

    worker = processes.taskforge(*WORKER, "--burst", "--no-periodic", url=url, cwd=app_dir, timeout=60)
    assert worker.code == 0, worker.output[-3000:]
    canaries = sorted(p.name for p in app_dir.iterdir() if p.name.startswith("canary-"))
    assert canaries == [], f"job data ran code: {canaries}"
    assert (app_dir / "legit").read_text() == "ran"  # the worker did run jobs
    problems = []
    for handle, name in jobs:
        info = handle.info()
        expected = "CorruptPayload" if name.startswith("pickled") else "UnknownTask"
        if info.state is not JobState.DEAD or expected not in (info.error or ""):
            problems.append(f"{name!r}: {info.state.value}, {info.error!r}")
        elif expected == "UnknownTask" and repr(name) not in info.error:
            problems.append(f"{name!r}: the UnknownTask error does not name the task: {info.error!r}")
    report(problems)


# Whatever a job says is data: these would turn data into code.
FORBIDDEN = {
    "pickle": re.compile(r"\b(c?pickle|dill|cloudpickle|shelve|marshal|jsonpickle)\b"),
    "eval(": re.compile(r"(?<![\w.])eval\s*\("),
    "exec(": re.compile(r"(?<![\w.])exec\s*\("),
    "compile(": re.compile(r"(?<![\w.])compile\s*\("),
    "__import__": re.compile(r"__import__"),
    "importlib.import_module": re.compile(
        r"import_module|importlib\.(?!resources\b)|from importlib import (?!resources\b)"
    ),
    "yaml.load": re.compile(r"yaml\.(unsafe_)?load"),
    "pydoc.locate": re.compile(r"\blocate\s*\(|pkgutil\.resolve_name|resolve_name\s*\("),
}
ALLOWED = {"importlib.import_module": {"loader.py"}}  # loading the APP the operator names on the command line


def test_the_package_never_unpickles_evals_or_imports_by_name() -> None:
    sources = sorted(PACKAGE.rglob("*.py"))
    assert len(sources) > 20, f"found only {len(sources)} source files under {PACKAGE}"
    hits = []
    for path in sources:
        rel = path.relative_to(PACKAGE)
        for number, line in enumerate(path.read_text().splitlines(), start=1):
            for what, pattern in FORBIDDEN.items():
                if pattern.search(line) and str(rel) not in ALLOWED.get(what, set()):
                    hits.append(f"taskforge/{rel}:{number}: {what}: {line.strip()}")
    assert not hits, "\n".join(hits)


def test_the_loader_is_only_reached_from_the_command_line() -> None:
    """load_app imports a module by name; only the CLI (and the worker child it configures) may call it."""
    callers = sorted(
        str(p.relative_to(PACKAGE))
        for p in PACKAGE.rglob("*.py")
        if "load_app(" in p.read_text() and p.name != "loader.py"
    )
    assert set(callers) <= {"cli/common.py", "worker/child.py"}, callers
