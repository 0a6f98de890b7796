"""How the suite runs in parallel: pytest-xdist workers, groups of tests that share one, long work first.

``python -m pytest`` starts ``WORKERS`` xdist worker processes unless told
otherwise (``-n N``, ``-n0``, ``-p no:xdist``, or only ``file::test`` ids on
the command line). This is chosen by tests/conftest.py's hooks rather than
``addopts``, so that ``-p no:xdist`` still works and a pytest that a test
starts (the Django and example runs) stays one process.

Groups: tests sharing a fixture wider than one test run in one worker, one
after another: the Redis Cluster and Sentinel sets (booted once per run), a
module-scoped fixture's module, a session-scoped fixture of the suite (the
dashboard's Chromium); tests/chaos is a group of its own, its three-minute
run first in it, so that worker takes nothing else until it ends. An
``xdist_group`` mark still names a group by hand.

Each worker writes the groups it collected to a file the controller names;
the scheduler (xdist's ``loadgroup``, reading that file instead of a suffix
on each test id, which pytest 9 no longer lets a plugin add) hands out the
groups and the other tests in the order collected here: the chaos group, the
tests marked ``long``, the cluster group, the other groups and the slow tests, then the rest.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest

WORKERS = 6  # the tests mostly wait (on workers, servers, subprocesses): more workers than cores
CLUSTER_GROUP = "redis-cluster-sentinel"
CHAOS_GROUP = "chaos"
SERVER_SETS = {"cluster", "sentinel"}  # the session fixtures of tests/conftest.py
GROUPS_KEY = "taskforge_groups"  # workerinput: the file each worker writes its groups to
_groups_dir = pytest.StashKey[str]()


def choose_distribution(config: pytest.Config, databases: int, databases_var: str) -> None:
    """Default to WORKERS workers (no more than there are test databases) and ``--dist loadgroup``."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        return  # a pytest started by a test of a parallel run: one process, on its worker's database
    option = config.option
    explicit_tests = bool(config.args) and all("::" in arg for arg in config.args)
    if option.numprocesses is None and not (option.usepdb or option.collectonly or explicit_tests):
        option.numprocesses = min(WORKERS, databases)
    if option.numprocesses and option.dist == "no" and not option.distload:
        option.dist = "loadgroup"
    if option.dist == "loadgroup":
        option.loadscopereorder = False  # keep the order of group_and_order: long work first
    workers = option.numprocesses if isinstance(option.numprocesses, int) else 0
    if workers > databases:
        raise pytest.UsageError(
            f"-n {workers}: only {databases} test databases ({databases_var}); use fewer workers or list more"
        )


def configure_node(node: Any) -> None:
    """Controller side, per worker: where to write the groups it collects."""
    config = node.config
    if config.option.dist != "loadgroup":
        return
    if _groups_dir not in config.stash:
        config.stash[_groups_dir] = tempfile.mkdtemp(prefix="taskforge-xdist-groups-")
    node.workerinput[GROUPS_KEY] = str(Path(config.stash[_groups_dir]) / "groups.json")


def clean_up(config: pytest.Config) -> None:
    if _groups_dir in config.stash:
        shutil.rmtree(config.stash[_groups_dir], ignore_errors=True)


def shared_group(item: pytest.Item) -> str | None:
    """The group ``item`` must run in, or None when it may run on any worker.

    A session- or package-scoped fixture of the suite groups its users by its
    name (they then run back to back, so a package-scoped one is torn down
    when they end); a module-scoped one, its module.
    """
    marker = item.get_closest_marker("xdist_group")
    if marker is not None:
        return str(marker.args[0] if marker.args else marker.kwargs.get("name", "default"))
    if item.path.parent.name == "chaos" and item.path.parent.parent.name == "tests":
        return CHAOS_GROUP
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return None
    if SERVER_SETS & set(info.names_closure):
        return CLUSTER_GROUP
    widest = None
    for name in info.names_closure:
        defs = info.name2fixturedefs.get(name)
        if not defs or not defs[-1].baseid:  # pytest's own (tmp_path_factory, ...): per process, cheap
            continue
        if defs[-1].scope in ("session", "package"):  # the dashboard's Chromium: one worker starts it
            return f"{defs[-1].scope}:{name}"
        if defs[-1].scope == "module":
            widest = f"module:{item.path.relative_to(item.config.rootpath)}"
    return widest


def rank(item: pytest.Item, group: str | None) -> int:
    """Long work first, so that no worker starts a three-minute test while the others finish."""
    if group == CHAOS_GROUP:
        return 0
    if item.get_closest_marker("long") is not None:  # the Django suites under another Python
        return 1
    if group == CLUSTER_GROUP:
        return 2
    if group is not None or item.get_closest_marker("slow") is not None:
        return 3
    return 4


def group_and_order(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Sort the tests long work first (slow ones first inside a group too); a worker also writes the groups."""
    groups = {item: shared_group(item) for item in items}
    order = {item: n for n, item in enumerate(items)}
    items.sort(key=lambda i: (rank(i, groups[i]), i.get_closest_marker("slow") is None, order[i]))
    target = getattr(config, "workerinput", {}).get(GROUPS_KEY)
    if target:
        grouped = {item.nodeid: group for item, group in groups.items() if group is not None}
        partial = f"{target}.{os.getpid()}"
        Path(partial).write_text(json.dumps(grouped))
        os.replace(partial, target)  # every worker writes the same: whole files only


def make_scheduler(config: pytest.Config, log: Any) -> Any:
    """xdist's LoadGroupScheduling, its groups read from the workers' file."""
    if config.getvalue("dist") != "loadgroup" or _groups_dir not in config.stash:
        return None
    from xdist.scheduler import LoadScopeScheduling

    path = Path(config.stash[_groups_dir]) / "groups.json"

    class FileGroupScheduling(LoadScopeScheduling):  # type: ignore[misc]
        groups: dict[str, str] | None = None

        def _split_scope(self, nodeid: str) -> str:
            if self.groups is None:  # read once every worker has collected (and written it)
                self.groups = json.loads(path.read_text()) if path.exists() else {}
            return self.groups.get(nodeid, nodeid)

    return FileGroupScheduling(config, log)
