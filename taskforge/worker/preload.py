"""What the fork server imports once, so that every child it forks starts with it loaded.

Children are forked from a fork server (``pool.children_context``): a
fresh, single-threaded process the supervisor starts at once, whose imports
run while the supervisor loads the app and talks to Redis. A child forked
from it starts in milliseconds instead of importing redis-py and taskforge
again (0.3 s here), yet inherits none of the supervisor's sockets, threads
or held locks. The app itself is not imported here: each child imports it
afresh, as SPEC says, so what an app opens at import is never shared.

The fork server ignores SIGTERM: a stop sent to the whole process group
(``systemd``'s default) must reach the supervisor and its children, not end
the server, whose death would SIGKILL the children (their parent-death
signal) before their grace period. Children install their own handler and
then read the pool's stop flag, so a SIGTERM that reached one before its
handler is not missed.
"""

from __future__ import annotations

import signal

from .. import app, loader  # noqa: F401  (what every child needs, imported once)
from . import child  # noqa: F401

signal.signal(signal.SIGTERM, signal.SIG_IGN)
