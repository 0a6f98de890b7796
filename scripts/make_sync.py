"""Write the sync twin of every module under an ``_async/`` folder of the package into ``_sync/`` beside it.

Code that is the same but for ``await`` is written once, awaited, and its
sync side generated here with the ``unasync`` package (its token rules,
plus ``REPLACEMENTS``), each generated file opening with ``GENERATED``, the
line ``tests/test_twins.py`` knows generated files by. ``--check`` writes
nothing and fails, naming the files, when a generated file is missing,
stale or left without its source: CI runs it.

    python scripts/make_sync.py          # write the _sync files
    python scripts/make_sync.py --check  # fail if any is not what the script would write
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

import unasync

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "taskforge"
GENERATED = "# Generated from its async source by scripts/make_sync.py: do not edit."
# Names whose sync spelling is not the async one without its "a" (unasync's own rules drop async and await).
REPLACEMENTS = {"_arun": "_run", "asend_robust": "send_robust", "astep": "step", "_akeep": "_keep"}


def generated(source: Path) -> str:
    """What ``scripts/make_sync.py`` writes for the async module ``source``."""
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp, "_async", source.name)
        copy.parent.mkdir()
        shutil.copyfile(source, copy)
        unasync.unasync_files([str(copy)], [unasync.Rule("/_async/", "/_sync/", REPLACEMENTS)])
        text = Path(tmp, "_sync", source.name).read_text(encoding="utf-8")
    return f"{GENERATED}\n{text}"


def pairs() -> dict[Path, str]:
    """Each generated file's path and what it should hold (the folders' ``__init__.py`` are written by hand)."""
    wanted = {}
    for source in sorted(PACKAGE.rglob("_async/*.py")):
        if source.name != "__init__.py":
            wanted[source.parent.parent / "_sync" / source.name] = generated(source)
    return wanted


def main(argv: list[str]) -> int:
    wanted = pairs()
    if "--check" in argv:
        stale = [path for path, text in wanted.items() if not path.exists() or path.read_text(encoding="utf-8") != text]
        orphans = [
            path
            for path in PACKAGE.rglob("_sync/*.py")
            if path not in wanted and path.read_text(encoding="utf-8").startswith(GENERATED)
        ]
        for path in [*stale, *orphans]:
            print(f"{path.relative_to(ROOT)}: not what scripts/make_sync.py writes; run it", file=sys.stderr)
        return 1 if stale or orphans else 0
    for path, text in wanted.items():
        path.parent.mkdir(exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
