"""The former name of ``taskforge.building``, kept so that code importing ``build_job`` from here still runs.

The module never defined ``NewJob`` (that is ``taskforge.broker.record``),
so it was renamed after what it does: building a job from a call.
"""

from __future__ import annotations

from .building import build_job, check_size

__all__ = ["build_job", "check_size"]
