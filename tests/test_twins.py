"""Producer-side code is written once: no new sync/async twin, and the known ones only go away.

``tests/twin_finder.py`` finds every pair of a sync and an async function
of the package more than half alike over 6 or more lines, once ``await``,
``async`` and the ``a``/``aio_``/``Async`` prefixes are stripped: code a
reader must keep in step by hand, which drifted apart three times before
(``4c172bc``, ``c6b4e44``, ``002e192``). An operation is written once as a
plan (``taskforge/broker/plan.py``) that the sync and the async driver both
run, or generated from its async source; what is still written twice is
listed below, and the test asserts the found set *equals* the list: a new
twin fails it, and so does a twin removed without being struck from it, so
the list only ever shrinks, and honestly.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest

import taskforge
from tests.twin_finder import GENERATED, twins

PACKAGE = Path(taskforge.__file__).parent
# The two drivers of every plan, sync and async, written side by side on purpose: the one allowed twin.
DRIVERS = "taskforge/broker/drivers.py:"

# The twins that remain, (async, sync), by family: none. The last four went as follows: the
# version check on connect and the once-only retry are generated (broker/_async/handshake.py),
# the in-process drain is one set of passes its two entry points run, and a durable step's sync
# and async forms share their reads and writes (CurrentJob._replayed, CurrentJob._keep).
REMAINING: set[tuple[str, str]] = set()


def test_the_twins_of_the_package_are_exactly_the_listed_ones() -> None:
    found = {pair for pair in twins(PACKAGE) if not all(side.startswith(DRIVERS) for side in pair)}
    new = sorted(found - REMAINING)
    gone = sorted(REMAINING - found)
    assert not new, f"new sync/async twins: write the operation once as a plan (broker/plan.py) instead: {new}"
    assert not gone, f"twins no longer found: strike them from REMAINING in tests/test_twins.py: {gone}"
    assert len(REMAINING) == 0


def make_sync() -> Any:
    """``scripts/make_sync.py`` as a module (it is no part of the package)."""
    pytest.importorskip("unasync")  # in the test extra; CI runs the script's check too
    spec = importlib.util.spec_from_file_location("make_sync", PACKAGE.parent / "scripts" / "make_sync.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_generated_sync_modules_are_what_their_async_source_makes() -> None:
    """``scripts/make_sync.py --check``: every sync module generated from its async source is up to date."""
    script = make_sync()
    assert script.GENERATED == GENERATED
    assert script.pairs(), "no module is generated from an _async source"
    assert script.main(["--check"]) == 0


def test_the_check_fails_on_a_stale_generated_module_until_the_script_writes_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    script = make_sync()
    monkeypatch.setattr(script, "ROOT", tmp_path)
    monkeypatch.setattr(script, "PACKAGE", tmp_path / "pkg")
    write(tmp_path / "pkg" / "_async", "ops.py", "async def _arun(signal):\n    return await signal.asend_robust()\n")
    write(tmp_path / "pkg" / "_sync", "ops.py", f"{GENERATED}\ndef _run(signal):\n    return None\n")
    assert script.main(["--check"]) == 1
    assert script.main([]) == 0 and script.main(["--check"]) == 0
    assert (
        (tmp_path / "pkg" / "_sync" / "ops.py")
        .read_text()
        .endswith("def _run(signal):\n    return signal.send_robust()\n")
    )


LOOP = """
    items = []
    for name in names:
        if name.startswith("_"):
            continue
        item = {}
        item["name"] = name
        item["size"] = len(name)
        items.append(item)
    return items
"""


def write(root: Path, name: str, text: str) -> None:
    root.mkdir(parents=True, exist_ok=True)
    (root / name).write_text(text, encoding="utf-8")


def test_a_pair_alike_but_for_await_and_prefixes_is_a_twin(tmp_path: Path) -> None:
    pkg = tmp_path / "pkg"
    write(pkg, "listing.py", f"def collect(names):{LOOP}")
    awaited = LOOP.replace("items.append(item)", "await store.aappend(item)").replace("for name", "async for name")
    write(pkg, "aio_listing.py", f"async def acollect(names):{awaited}")
    write(pkg, "store.py", "def append(item):\n    return item\n")
    assert set(twins(pkg)) == {("pkg/aio_listing.py:acollect", "pkg/listing.py:collect")}


def test_methods_of_async_classes_pair_with_their_sync_classes_methods(tmp_path: Path) -> None:
    pkg = tmp_path / "pkg"
    write(pkg, "roles.py", f"class Flow:\n    def collect(self, names):{LOOP.replace(chr(10), chr(10) + '    ')}")
    body = LOOP.replace("\n", "\n    ")
    write(pkg, "aio_roles.py", f"class AsyncFlow:\n    async def collect(self, names):{body}")
    assert set(twins(pkg)) == {("pkg/aio_roles.py:AsyncFlow.collect", "pkg/roles.py:Flow.collect")}


def test_short_or_different_pairs_and_generated_files_are_not_twins(tmp_path: Path) -> None:
    pkg = tmp_path / "pkg"
    write(pkg, "short.py", "def get(k):\n    x = k\n    return x\nasync def aget(k):\n    x = k\n    return x\n")
    other = "\n    total = 0\n" + "    total += 1\n" * 3 + "    print(total)\n    return [total]\n"
    write(pkg, "differ.py", f"def collect(names):{LOOP}\nasync def acollect(names):{other}")
    write(pkg, "generated.py", f"{GENERATED}\ndef drain(names):{LOOP}")
    write(pkg, "aio_generated.py", f"async def adrain(names):{LOOP}")
    assert twins(pkg) == {}


@pytest.mark.parametrize(
    ("edits", "still_twins"),
    [
        ({'item["size"] = len(name)': 'item["size"] = 0'}, True),
        ({'item["name"]': 'item["label"]', 'item["size"]': 'item["length"]', "item = {}": "item = dict()"}, True),
        (
            {
                'item["name"]': 'item["label"]',
                'item["size"]': 'item["length"]',
                "item = {}": "item = dict()",
                "items.append(item)": "items.insert(0, item)",
                "continue": "break",
            },
            False,
        ),
    ],
)
def test_a_pair_half_rewritten_is_no_longer_a_twin(tmp_path: Path, edits: dict[str, str], still_twins: bool) -> None:
    pkg = tmp_path / "pkg"
    edited = LOOP
    for old, new in edits.items():
        edited = edited.replace(old, new)
    write(pkg, "mod.py", f"def collect(names):{LOOP}\nasync def acollect(names):{edited}")
    assert bool(twins(pkg)) == still_twins
