"""``taskforge worker`` stopped while it still imports its modules exits 0, not 143.

A ``sitecustomize`` module (on PYTHONPATH, so Python runs it first) holds the
import of ``click`` (or of redis-py, the heaviest import, which ``import
taskforge`` itself must not pull in) until the test has seen it start and sent
SIGTERM: the stop request then lands exactly while the command loads, every time.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.worker.conftest import wait_for

HOLD_IMPORT = """
import importlib.abc, os, sys, time

class Hold(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == os.environ["HOLD"]:
            sys.meta_path.remove(self)
            open(os.environ["MARKER"], "w").close()
            time.sleep(30)  # SIGTERM arrives here
        return None

sys.meta_path.insert(0, Hold())
"""


@pytest.mark.parametrize("held", ["click", "redis"])
def test_sigterm_while_the_worker_command_loads_exits_0(tmp_path: Path, held: str) -> None:
    (tmp_path / "sitecustomize.py").write_text(HOLD_IMPORT)
    marker = tmp_path / f"importing-{held}"
    env = {**os.environ, "PYTHONPATH": str(tmp_path), "MARKER": str(marker), "HOLD": held}
    argv = [sys.executable, "-m", "taskforge", "worker", "nosuchapp:app"]
    proc = subprocess.Popen(argv, env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        wait_for(marker.exists, 30, f"the worker command to start importing {held}")
        proc.send_signal(signal.SIGTERM)
        output = proc.communicate(timeout=20)[0].decode(errors="replace")
    finally:
        proc.kill()
        proc.wait(timeout=10)
    assert proc.returncode == 0, f"exit {proc.returncode}: {output[-1000:]}"
