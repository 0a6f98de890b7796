"""The fault driver: a seeded sequence of kills, terminations, restarts and pauses.

The plan (which fault, in which order, how long, how far apart, and a number
in [0, 1) that picks the victim among whatever is alive at that moment) comes
from ``random.Random(seed)`` alone, so one seed replays the same sequence;
the interleaving with jobs still varies with the machine's timing.
"""

from __future__ import annotations

import os
import random
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import redis

from .procs import RedisServer, WorkerProcess, cmdline, group_pids, is_job_child, kill_group, tracebacks, wait_for

KINDS = ("child_kill", "worker_kill", "worker_term", "redis_restart", "redis_pause")
WORKER_ARGS = ["-c", "2", "--visibility-timeout", "3", "--grace", "2", "--log-level", "info"]
EXTRA_ARGS = os.environ.get("CHAOS_WORKER_ARGS", "").split()  # e.g. "--prefetch 1": the one-job path


def worker_args(number: int) -> list[str]:
    """Every other worker runs two lanes (threads) per child, so faults hit threaded children too."""
    return WORKER_ARGS + (["-t", "2"] if number % 2 else []) + EXTRA_ARGS


GRACE = 2.0
WORKERS = 2
# A child that had loaded the app and is alive this long after its supervisor's SIGKILL did
# not die with it.
ORPHAN_AFTER = 3.0
MAX_CRASHES = 8  # workers crashing this often: the package is broken, stop early and say why
LONG_PAUSE = 11.0  # past redis-py's socket_timeout of 10 s (taskforge/broker/connection.py)


@dataclass(frozen=True)
class PlannedFault:
    kind: str
    duration: float  # pause length / downtime; 0 for process faults
    gap: float  # quiet time after it
    pick: float  # chooses the victim among the candidates of the moment
    busy_bias: float  # below 0.85: prefer a process that runs a job right now


@dataclass
class Fault:
    number: int
    kind: str
    t_start: float
    t_end: float
    target: int | None = None  # pid signalled (child, supervisor) or redis-server
    worker: int | None = None  # supervisor pid involved
    children: list[int] = field(default_factory=list)  # job children of that supervisor at the time
    busy: dict[int, str] = field(default_factory=dict)  # child pid -> "token/task" it was running
    detail: str = ""

    def line(self) -> str:
        busy = ", ".join(f"{pid}:{job}" for pid, job in sorted(self.busy.items())) or "-"
        who = f" target={self.target}" if self.target else ""
        sup = f" supervisor={self.worker} children={self.children}" if self.worker else ""
        return (
            f"fault #{self.number} {self.kind} t={self.t_start:.3f}..{self.t_end:.3f}{who}{sup} "
            f"busy(pid:token/task)=[{busy}] {self.detail}"
        ).rstrip()


def plan_faults(rng: random.Random, per_kind: int, long_pauses: int) -> list[PlannedFault]:
    kinds = [k for k in KINDS for _ in range(per_kind)]
    rng.shuffle(kinds)
    pause_slots = [i for i, k in enumerate(kinds) if k == "redis_pause"]
    long_slots = set(rng.sample(pause_slots, min(long_pauses, len(pause_slots))))
    planned = []
    for i, kind in enumerate(kinds):
        if kind == "redis_pause":
            # Most pauses stall Redis for less than the socket timeout (some past the
            # 3 s visibility timeout, so leases expire); a few outlast the timeout.
            duration = LONG_PAUSE if i in long_slots else round(rng.uniform(0.3, 4.0), 3)
        elif kind == "redis_restart":
            duration = round(rng.uniform(0.2, 2.0), 3)
        else:
            duration = 0.0
        planned.append(PlannedFault(kind, duration, round(rng.uniform(0.1, 0.6), 3), rng.random(), rng.random()))
    return planned


def estimated_seconds(planned: list[PlannedFault]) -> float:
    return sum(p.duration + p.gap + (0.3 if p.kind == "redis_restart" else 0.0) for p in planned)


@dataclass
class WorkerExit:
    worker: WorkerProcess
    code: int | None  # None: still running (a crashed supervisor stuck joining its children)
    at: float
    refused: bool  # exited at startup because Redis was unreachable (documented), not a crash


class FaultDriver:
    def __init__(
        self,
        server: RedisServer,
        side: redis.Redis,
        prefix: str,
        start_worker: Callable[[], WorkerProcess],
        log: Callable[[str], None],
    ) -> None:
        self.server = server
        self.side = side
        self.prefix = prefix
        self.start_worker = start_worker
        self.log = log
        self.workers: list[WorkerProcess] = []
        self.faults: list[Fault] = []
        self.unexpected: list[WorkerExit] = []
        self.seen_exit: set[int] = set()
        self.orphans_seen: list[str] = []  # children that outlived a SIGKILLed supervisor

    # -- workers -----------------------------------------------------------

    def spawn(self) -> WorkerProcess:
        worker = self.start_worker()
        self.workers.append(worker)
        self.log(f"started {worker}")
        return worker

    def keep_workers(self) -> None:
        """Notice workers that exited or crashed without being told to, and keep WORKERS of them running."""
        for worker in self.workers:
            if worker.pid in self.seen_exit:
                continue
            if worker.signalled is None and not worker.alive():
                self.seen_exit.add(worker.pid)
                out = worker.output()
                refused = (
                    worker.proc.returncode == 1
                    and "cannot reach the broker" in out
                    and "Traceback" not in out
                    and "children on queues" not in out
                )
                self.unexpected.append(WorkerExit(worker, worker.proc.returncode, time.time(), refused))
                what = "refused to start (Redis unreachable)" if refused else "EXITED UNEXPECTEDLY"
                self.log(
                    f"{worker} {what} with code {worker.proc.returncode}; last output:\n"
                    + "\n".join(out.splitlines()[-15:])
                )
            elif worker.alive() and worker.new_traceback():
                crashed = [t for t in tracebacks(worker.output()) if t[0] == "supervisor"]
                if crashed and worker.signalled is None:
                    # A supervisor with an uncaught error may not even exit (multiprocessing's
                    # atexit handler joins the children, which go on taking jobs with nobody
                    # renewing their leases): put it down, and count it as a crash.
                    self.seen_exit.add(worker.pid)
                    self.unexpected.append(WorkerExit(worker, None, time.time(), False))
                    self.log(f"{worker} SUPERVISOR CRASHED at {crashed[0][1]}: {crashed[0][2]}; killing its group")
                    worker.signalled = "crashed"
                    kill_group(worker.pid)
        crashes = [x for x in self.unexpected if not x.refused]
        if len(crashes) >= MAX_CRASHES:
            last = crashes[-1].worker
            raise AssertionError(
                f"{len(crashes)} workers crashed; the last, {last}, said:\n"
                + "\n".join(last.output().splitlines()[-20:])
            )
        while sum(w.active for w in self.workers) < WORKERS:
            self.spawn()

    def busy(self) -> dict[int, str]:
        """Live job children -> the token each is running (the tasks keep this in the side Redis)."""
        try:
            raw = self.side.hgetall(f"{self.prefix}busy")
        except redis.RedisError:
            return {}
        live = {c for w in self.workers if w.alive() for c in w.job_children()}
        return {int(k): v.decode() for k, v in raw.items() if int(k) in live}

    def candidates(self) -> list[WorkerProcess]:
        """Active workers whose job children are up (so a kill hits a real worker)."""
        self.keep_workers()
        return [w for w in self.workers if w.active and w.job_children()]

    def choose_worker(self, planned: PlannedFault, prefer: str = "") -> WorkerProcess:
        """Mostly one whose children run jobs (``prefer``: a job of that task, if any does)."""
        ready = wait_for(self.candidates, 30, "an active worker with children to inject a fault into", 0.1)
        busy = self.busy()
        working = [w for w in ready if any(c in busy for c in w.job_children())]
        preferred = [w for w in working if any(busy.get(c, "").endswith(f"/{prefer}") for c in w.job_children())]
        pool = ready
        if planned.busy_bias < 0.85:
            pool = preferred or working or ready
        return pool[int(planned.pick * len(pool))]

    # -- faults ------------------------------------------------------------

    def run(self, planned: list[PlannedFault], budget: float) -> None:
        deadline = time.monotonic() + budget
        for number, p in enumerate(planned, 1):
            if time.monotonic() > deadline:
                raise AssertionError(f"the fault phase overran its {budget:.0f} s budget at fault #{number}")
            self.keep_workers()
            fault = getattr(self, p.kind)(number, p)
            self.faults.append(fault)
            self.log(fault.line())
            time.sleep(p.gap)
        self.keep_workers()

    def child_kill(self, number: int, p: PlannedFault) -> Fault:
        worker = self.choose_worker(p)
        children = worker.job_children()
        busy = self.busy()
        working = [c for c in children if c in busy]
        pool = working if working and p.busy_bias < 0.85 else children
        victim = pool[int(p.pick * len(pool))]
        t = time.time()
        try:
            os.kill(victim, signal.SIGKILL)
        except ProcessLookupError:
            pass
        return Fault(
            number, "child_kill", t, t, victim, worker.pid, children, {victim: busy[victim]} if victim in busy else {}
        )

    def worker_kill(self, number: int, p: PlannedFault) -> Fault:
        worker = self.choose_worker(p)
        children = worker.job_children()
        busy = self.busy()
        t = time.time()
        worker.send(signal.SIGKILL)
        detail = self.children_die_with(worker, t)
        # The children die when the kernel has finished the supervisor's exit (PDEATHSIG), which on a
        # loaded machine comes hundreds of ms after the signal: until then a lane may still claim a job.
        gone = time.time()
        self.spawn()
        return Fault(
            number,
            "worker_kill",
            t,
            gone,
            worker.pid,
            worker.pid,
            children,
            {c: busy[c] for c in children if c in busy},
            detail,
        )

    def children_die_with(self, worker: WorkerProcess, killed_at: float) -> str:
        """docs/failures.md: a SIGKILLed supervisor's children die with it (PDEATHSIG), i.e. at once.

        Only a child that got as far as loading the app is held to "at once": one
        still starting up (importing, slow under load) can only die when our code
        first runs in it; that it then never takes a job is check_orphans' business.
        """
        worker.proc.wait(timeout=10)
        deadline = time.monotonic() + ORPHAN_AFTER
        while group_pids(worker.pid) and time.monotonic() < deadline:
            time.sleep(0.01)
        left = group_pids(worker.pid)
        if not left:
            return f"its group was gone {1000 * (time.time() - killed_at):.0f} ms later"
        loaded = self.app_loaders()  # spawned children that imported the app; forked ones have it from birth
        running = [pid for pid in left if pid in loaded or is_job_child(pid) and "spawn_main" not in cmdline(pid)]
        if running:
            described = {pid: cmdline(pid)[:60] for pid in running}
            self.orphans_seen.append(
                f"{worker}: children {described}, which had loaded the app, still alive "
                f"{ORPHAN_AFTER} s after their supervisor was SIGKILLed"
            )
            return f"ORPHANS {sorted(running)} alive {ORPHAN_AFTER} s later"
        return f"{sorted(left)} still starting up (or the resource tracker) {ORPHAN_AFTER} s later"

    def app_loaders(self) -> set[int]:
        """Pids of the processes that imported the app so far (chaosapp records itself)."""
        try:
            return {int(raw.split(b":")[0]) for raw in self.side.lrange(f"{self.prefix}imports", 0, -1)}
        except redis.RedisError:
            return set()

    def worker_term(self, number: int, p: PlannedFault) -> Fault:
        worker = self.choose_worker(p, prefer="long")  # the case where the grace period matters
        children = worker.job_children()
        busy = self.busy()
        t = time.time()
        worker.send(signal.SIGTERM)
        self.spawn()
        return Fault(
            number, "worker_term", t, t, worker.pid, worker.pid, children, {c: busy[c] for c in children if c in busy}
        )

    def redis_restart(self, number: int, p: PlannedFault) -> Fault:
        busy = self.busy()
        t = time.time()
        old = self.server.pid
        self.server.kill()
        time.sleep(p.duration)
        self.server.start()
        return Fault(
            number,
            "redis_restart",
            t,
            time.time(),
            old,
            busy=busy,
            detail=f"down {p.duration:.2f} s, new pid {self.server.pid}",
        )

    def redis_pause(self, number: int, p: PlannedFault) -> Fault:
        busy = self.busy()
        t = time.time()
        self.server.pause()
        try:
            time.sleep(p.duration)
        finally:
            self.server.resume()
        return Fault(
            number, "redis_pause", t, time.time(), self.server.pid, busy=busy, detail=f"SIGSTOP for {p.duration:.2f} s"
        )

    # -- the end -----------------------------------------------------------

    def orphans(self) -> dict[str, list[int]]:
        """Processes still alive in the group of a worker whose supervisor has exited."""
        left = {}
        for worker in self.workers:
            if not worker.alive():
                pids = group_pids(worker.pid)
                if pids:
                    left[repr(worker)] = pids
        return left
