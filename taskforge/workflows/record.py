"""The workflow record's field names, declared once: a workflow's own hash, under its hash tag.

``launch.py`` writes the record (through ``workflow_create``), the
``workflow_*.lua`` scripts and the library's ``lua/lib/workflows.lua`` move it
along, and the handle, the resume and the reconciler read it. Every Python
side names a field through these two enums; ``tests/workflows/test_workflow_record.py``
checks that the names the scripts use are exactly the ones declared here, so
a field added or renamed on one side only fails a test instead of reading as
empty on the other. (A step's own job record is ``broker/record.py``'s.)
"""

from __future__ import annotations

import enum


class WorkflowField(str, enum.Enum):
    """A field of the record about the whole workflow; the value is the name Redis stores."""

    STATE = "state"  # running, succeeded, dead or cancelled
    CREATED_AT = "created_at"  # ms since the epoch (Redis's clock)
    FINISHED_AT = "finished_at"
    ERROR = "error"  # why it ended, when it did not succeed
    FAILED_STEP = "failed_step"  # the index of the step that ended it
    SETTLED = "settled"  # '1': its ending's stops are done and its on_failure sent (workflow_settle)
    STEPS = "steps"  # how many steps (an on_failure step is not one)
    ON_FAILURE = "on_failure"  # the index of its on_failure step, when it has one
    SHAPE = "shape"  # msgpack: the shape of its result (``plan.py``); only the client reads it

    @property
    def key(self) -> bytes:
        """The name as it comes back from HGETALL."""
        return self.value.encode()


class StepField(str, enum.Enum):
    """A field kept per step, ``<name>:<index>``."""

    SPEC = "spec"  # msgpack ``StepSpec`` (``spec.py``): the scripts hand it over unread
    QUEUE = "queue"  # the step's queue
    NEXT = "next"  # comma-separated: the steps that wait for this one
    AFTER = "after"  # comma-separated: the steps this one waits for
    INPUT = "input"  # comma-separated: the steps whose results this one receives
    RESULT = "result"  # msgpack: its result, once it succeeded

    def at(self, index: int | str) -> str:
        return f"{self.value}:{index}"

    def key(self, index: int | str) -> bytes:
        """The name of step ``index``'s field as it comes back from HGETALL."""
        return self.at(index).encode()


# Written and read by the client alone: no script names them (the contract test checks that too).
CLIENT_ONLY = frozenset({WorkflowField.SHAPE.value})
