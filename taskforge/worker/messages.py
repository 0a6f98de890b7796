"""What a child and its supervisor tell each other through their pipes, one frozen class per kind.

The supervisor renews leases and enforces timeouts from outside the child,
so it must know which job each lane runs; these messages are how. They
replace positional tuples, whose layout lived in two files and was read by
index; the supervisor now matches on the class (``match message: case
JobStarted(...)``) and a field added here cannot be read at the wrong place.

One message goes per job, so they are kept cheap: ``__slots__``, and on
the pipe a plain tuple, the kind's number then the field values
(``wire``/``from_wire``): a tuple pickles in under half the time of a class
instance, and the supervisor gets the class back before it reads anything.
Nothing waits for them (children talk to Redis themselves): losing the pipe
only costs the supervisor its view of a child, which its sentinel covers.

One kind goes the other way, on a second pipe: ``CancelJob``, the
supervisor asking a child to cancel one async job (its timeout passed, or
someone aborted it) before it resorts to killing the child. A lane's job
cannot be cancelled from outside its thread, so lanes never get one.

Async jobs are reported like lane jobs, each under a slot id of its own:
lanes are numbered ``0 .. threads-1`` and the event loop's slots follow
(``threads .. threads+async-1``), so the supervisor tells them apart by
number and the wire layout of ``JobStarted`` stays as it was.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


class Message:
    """Base of every child-to-supervisor message."""

    __slots__ = ()

    def wire(self) -> tuple[Any, ...]:
        """What the child sends: the kind's number, then the field values in order."""
        return (KIND_NUMBER[type(self)], *map(self.__getattribute__, self.__slots__))


@dataclass(frozen=True, slots=True)
class Heartbeat(Message):
    """The child's loop is alive (sent at least every second while idle): the watchdog's evidence."""


@dataclass(frozen=True, slots=True)
class JobStarted(Message):
    """A lane took a job; this also ends the job that lane ran before, whose outcome is recorded."""

    lane: int
    job_id: str
    token: str
    queue: str
    task: str
    attempts: int
    timeout: float | None
    max_attempts: int = 0  # for the supervisor's log line when it records the run (0: not said)
    soft_timeout: float | None = None  # the worker's task definition's: the supervisor warns the task then
    # The first job of a batch (``batches.py``): the others claimed with it, not started yet, each as
    # (job id, task, attempts, timeout, max_attempts, soft_timeout). The supervisor renews their leases,
    # gives them back unrun if the child dies, and learns which runs from the child's board (``board.py``).
    batch: tuple[tuple[str, str, int, float | None, int, float | None], ...] = ()
    batch_no: int = 0  # the lane's count of batches: the number its board rows carry


@dataclass(frozen=True, slots=True)
class JobFinished(Message):
    """How a run ended (``state`` as the queue recorded it); sent only when the supervisor keeps metrics."""

    lane: int
    state: str | None
    duration: float


@dataclass(frozen=True, slots=True)
class LaneIdle(Message):
    """A lane has no job: the one it ran last is recorded, so the child exiting now is no crash."""

    lane: int


@dataclass(frozen=True, slots=True)
class Recycling(Message):
    """The child reached ``--max-jobs-per-child`` and will exit with EXIT_RECYCLE to be replaced.

    Said, not only shown by the exit code: a task may call ``os._exit`` with
    that same code, and that is a crash.
    """


@dataclass(frozen=True, slots=True)
class LoopBlocked(Message):
    """The child's event loop has not run for ``seconds``, held by this job (blank: by no job); for metrics."""

    job_id: str
    task: str
    queue: str
    seconds: float


@dataclass(frozen=True, slots=True)
class Released(Message):
    """A lane gave back jobs of its batch it had not started (a run of the batch turned out long)."""

    lane: int
    job_ids: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class CancelJob(Message):
    """Supervisor to child: cancel this async job (``reason``: ``timeout`` or ``abort``), or, with
    ``soft``, warn any job past its soft timeout (``SoftTimeout`` in a lane, cancellation on the loop).

    The job sees ``CancelledError``; if it has not ended ``CANCEL_GRACE``
    seconds later, the supervisor kills the child as it does for a lane.
    """

    job_id: str
    reason: str


# New kinds go at the end: a kind's number is its place here.
KINDS: tuple[type[Message], ...] = (
    Heartbeat,
    JobStarted,
    JobFinished,
    LaneIdle,
    Recycling,
    LoopBlocked,
    CancelJob,
    Released,
)
KIND_NUMBER = {kind: number for number, kind in enumerate(KINDS)}


def from_wire(raw: object) -> Message | object:
    """The message ``wire`` made, or ``raw`` itself when it is none (the supervisor logs it)."""
    if type(raw) is tuple and raw and type(raw[0]) is int and 0 <= raw[0] < len(KINDS):
        try:
            return KINDS[raw[0]](*raw[1:])
        except TypeError:  # the wrong number of fields for its kind
            return raw
    return raw
