"""``JobHandle``: what ``delay()`` returns, and what ``app.job(id)`` rebuilds elsewhere."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Generic, TypeVar

from .broker.record import job_info as job_info
from .errors import JobNotFound, TaskFailed
from .job import JobInfo, JobState
from .workflows.delivery import deliver_if_step

if TYPE_CHECKING:
    from .protocols import BrokerAccess

R = TypeVar("R")

# result() blocks on Redis in slices no longer than this, well under the
# client's socket timeout, so a long wait never looks like a dead connection.
WAIT_SLICE = 2.0


class JobHandle(Generic[R]):
    """A reference to one job by id; cheap, holds no state but the id and its queue.

    ``app`` is what the handle reads through: a ``TaskForge``, or anything with
    its broker and ``find_queue`` (the ``BrokerAccess`` protocol).
    """

    def __init__(self, app: BrokerAccess, job_id: str, queue: str | None = None) -> None:
        self.app = app
        self.id = job_id
        self._queue = queue

    def __repr__(self) -> str:
        return f"<JobHandle {self.id} queue={self._queue}>"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, JobHandle) and other.id == self.id

    def __hash__(self) -> int:
        return hash(self.id)

    @property
    def queue(self) -> str:
        """The job's queue, looked up once for handles made from a bare id."""
        if self._queue is None:
            self._queue = self.app.find_queue(self.id)
        return self._queue

    def _fields(self) -> dict[bytes, bytes]:
        fields = self.app.broker.read(self.queue, self.id)
        if fields is None:
            raise JobNotFound(self._missing())
        return fields

    def _missing(self) -> str:
        return (
            f"no job {self.id} in queue {self._queue!r}: it never existed, or it finished "
            "longer ago than the app's retention"
        )

    def status(self) -> JobState:
        state = self._fields().get(b"state", b"pending").decode()
        try:
            return JobState(state)
        except ValueError:
            return JobState.DEAD

    def info(self) -> JobInfo:
        return job_info(self.id, self.queue, self._fields())

    def cancel(self) -> bool:
        """True if the job was pending, scheduled or retrying and will now never run."""
        outcome = self.app.broker.cancel(self.queue, self.id)
        if outcome < 0:
            raise JobNotFound(self._missing())
        if outcome == 1:
            deliver_if_step(self.app.broker, self.queue, self.id)
        return outcome == 1

    def abort(self) -> bool:
        """Stop the job: cancelled now if not started; if running, its worker kills it.

        A running job is stopped at its supervisor's next lease check (within
        about a second) and ends ``cancelled``. Returns False when the job had
        already finished.
        """
        outcome = self.app.broker.abort(self.queue, self.id)
        if outcome < 0:
            raise JobNotFound(self._missing())
        if outcome == 1:  # cancelled before it started (a running one ends when its supervisor stops it)
            deliver_if_step(self.app.broker, self.queue, self.id)
        return outcome > 0

    def result(self, timeout: float | None = None) -> R:
        """Wait for the job to finish and return its value.

        Blocks on Redis (no polling loop spinning the CPU). Raises TaskFailed if
        the job ended dead or cancelled, TimeoutError if ``timeout`` seconds pass.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        broker = self.app.broker
        while True:
            state = broker.await_state(self.queue, self.id)
            if state is None:
                raise JobNotFound(self._missing())
            if state in (JobState.SUCCEEDED, JobState.DEAD, JobState.CANCELLED):
                return self._outcome()
            remaining = WAIT_SLICE if deadline is None else deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"job {self.id} did not finish within {timeout} s (state: {state})")
            broker.wait_done(self.queue, self.id, min(remaining, WAIT_SLICE))

    def _outcome(self) -> R:
        info = self.info()
        if info.state is JobState.SUCCEEDED:
            return info.result  # type: ignore[no-any-return]
        raise TaskFailed(self.id, info.state.value, info.error, info.traceback, info.failure)
