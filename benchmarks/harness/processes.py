"""Worker and driver processes: each in its own process group, always stopped, every wait bounded.

A worker is started in a new process group (``process_group=0``; extra
copies join it), so that its supervisor and every child it forks or spawns
share one process group, which ``stop()``
signals as a whole: SIGTERM, a bounded wait, then SIGKILL, whatever state
the harness is in. Live groups are also written to a file in the cache, so
a harness that was itself SIGKILLed cleans up after itself on the next run
(only groups whose leader is still a process of ours, started in our cwd).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

LIVE: dict[int, Worker] = {}


class Worker:
    """A library's worker command line (possibly several copies), as one process group."""

    def __init__(
        self, argv: Sequence[str], copies: int, env: dict[str, str], cwd: Path, log: Path, registry: Path
    ) -> None:
        self.argv = list(argv)
        self.copies = copies
        self.env = env
        self.cwd = cwd
        self.log_path = log
        self.registry = registry
        self.procs: list[subprocess.Popen[bytes]] = []
        self.pgid: int | None = None
        self.started_at = 0.0

    def start(self) -> float:
        """Start the worker; returns the wall-clock time (time.time()) just before the exec."""
        log = self.log_path.open("ab")
        self.started_at = time.time()
        try:

            def spawn(group: int) -> subprocess.Popen[bytes]:
                return subprocess.Popen(
                    self.argv,
                    cwd=self.cwd,
                    env=self.env,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    process_group=group,
                )

            # A new process group (not a new session: copies must be able to join it).
            first = spawn(0)
            self.procs.append(first)
            self.pgid = first.pid
            LIVE[self.pgid] = self
            self._record()
            self.procs.extend(spawn(self.pgid) for _ in range(self.copies - 1))
        finally:
            log.close()
        return self.started_at

    def exited(self) -> str | None:
        """Why the worker is gone (first copy that exited), or None while all copies run."""
        for proc in self.procs:
            code = proc.poll()
            if code is not None:
                return f"worker exited with code {code}"
        return None

    def log_tail(self, lines: int = 8) -> str:
        try:
            text = self.log_path.read_text(errors="replace").strip().splitlines()
        except OSError:
            return ""
        return " | ".join(text[-lines:])

    def stop(self, grace: float = 5.0) -> None:
        """SIGTERM the group, wait up to ``grace`` seconds, then SIGKILL whatever is left."""
        if self.pgid is None:
            return
        _killpg(self.pgid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        for proc in self.procs:
            try:
                proc.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                break
        # Always: children of a leader that exited cleanly may still be alive.
        _killpg(self.pgid, signal.SIGKILL)
        for proc in self.procs:
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                pass
        LIVE.pop(self.pgid, None)
        self.pgid = None
        self._record()

    def _record(self) -> None:
        groups = {str(pgid): str(w.cwd) for pgid, w in LIVE.items()}
        self.registry.write_text(json.dumps(groups))


def _killpg(pgid: int, signum: int) -> None:
    try:
        os.killpg(pgid, signum)
    except (ProcessLookupError, PermissionError):
        pass


def stop_all() -> None:
    for worker in list(LIVE.values()):
        worker.stop(grace=2.0)


def reap_leftovers(registry: Path) -> list[int]:
    """Kill worker groups a previous, killed harness run left behind; returns their ids."""
    if not registry.exists():
        return []
    try:
        groups = json.loads(registry.read_text())
    except ValueError:
        groups = {}
    killed = []
    for pgid_text, cwd in groups.items():
        pgid = int(pgid_text)
        try:
            same = os.readlink(f"/proc/{pgid}/cwd") == cwd and os.getpgid(pgid) == pgid
        except OSError:
            continue
        if same:
            _killpg(pgid, signal.SIGKILL)
            killed.append(pgid)
    registry.write_text("{}")
    return killed


def run_bounded(
    argv: Sequence[str], env: dict[str, str], cwd: Path, timeout: float
) -> subprocess.CompletedProcess[str]:
    """Run a driver to completion in its own group; on timeout kill the group and raise TimeoutError."""
    proc = subprocess.Popen(
        argv,
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise TimeoutError(f"{' '.join(argv[1:3])} did not finish within {timeout:g} s") from None
    except BaseException:
        _killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        raise
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)
