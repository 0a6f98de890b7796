"""The supervisor signals a child only while the child's pid is still its own.

multiprocessing reaps every ended child whenever another starts; after that
the pid is free, and on a busy machine (pid_max 32768 here) soon another
process's. A stop or kill sent to the old slot would then hit that process:
in a test run, it once took down a test runner's own worker.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import subprocess
import sys
import time
from types import SimpleNamespace

from taskforge.worker import pool as pool_module


def idle() -> None:
    time.sleep(30)


def test_a_reaped_child_is_not_signalled_and_a_live_one_is(monkeypatch) -> None:
    ctx = multiprocessing.get_context("spawn")
    ended = ctx.Process(target=time.sleep, args=(0,))
    ended.start()
    ended.join(10)
    assert ended.exitcode == 0  # reaped: the pid is free now
    live = ctx.Process(target=idle)
    live.start()
    sent: list[tuple[int, int]] = []
    real_kill = os.kill

    def kill(pid: int, signum: int) -> None:
        sent.append((pid, signum))
        if pid == live.pid:  # never the freed pid: that is what is under test
            real_kill(pid, signum)

    monkeypatch.setattr(pool_module.os, "kill", kill)
    try:
        pool_module.signal_child(SimpleNamespace(process=ended), signal.SIGKILL)  # type: ignore[arg-type]
        assert sent == []
        pool_module.signal_child(SimpleNamespace(process=live), signal.SIGKILL)  # type: ignore[arg-type]
        assert sent == [(live.pid, signal.SIGKILL)]
        live.join(10)
        assert live.exitcode == -signal.SIGKILL
    finally:
        if live.is_alive():
            live.kill()
            live.join(10)


def test_a_child_whose_supervisor_is_gone_exits_quietly_when_it_next_reports() -> None:
    # Between the supervisor's death and the kernel's parent-death signal, a child's report meets
    # a closed pipe: it must leave as that signal would, not print a traceback of a "crash".
    code = (
        "import multiprocessing, threading, types\n"
        "from taskforge.worker.child import Child\n"
        "from taskforge.worker.messages import Heartbeat\n"
        "reader, writer = multiprocessing.Pipe(duplex=False)\n"
        "reader.close()\n"
        "child = types.SimpleNamespace(lock=threading.Lock(), pipe=writer)\n"
        "Child.send(child, Heartbeat())\n"
        "print('still here')\n"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert run.returncode == 1 and run.stdout == "" and run.stderr == "", run
