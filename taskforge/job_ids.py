"""New job ids that sort by when they were made (RFC 9562's UUID version 7, as 32 hex digits).

Two jobs at the same place in line (a new key's first job takes the turn at
the front, as do other keys' jobs: ``lua/lib/turns.lua``) are taken in the order
of their ids, so ids made in time order take such ties first come, first
served, and the claim reads their records in the order they were written
(random ids made a drain over 100,000 keys read 100,000 records in random
order: measurably slower). The layout: 48 bits of Unix time in ms, the
version, 12 bits counting ids made in the same ms by this process (so one
process's ids strictly increase), the variant, and 62 random bits (from the
OS: forked workers never share them), so ids never collide in practice.
"""

from __future__ import annotations

import os
import threading
import time

_lock = threading.Lock()
_last = [0, 0]  # the ms and the count of the last id this process made
_RANDOM = (1 << 62) - 1


def new_job_id() -> str:
    """A fresh job id: 32 lowercase hex digits, a valid UUID (version 7), later ids sorting after earlier ones."""
    now = time.time_ns() // 1_000_000
    with _lock:
        ms, count = _last
        if now > ms:
            ms, count = now, 0
        elif count < 0xFFF:
            count += 1
        else:  # 4,096 ids in one ms: borrow the next ms, as RFC 9562 allows
            ms, count = ms + 1, 0
        _last[0], _last[1] = ms, count
    rand = int.from_bytes(os.urandom(8), "big") & _RANDOM
    return f"{(ms << 80) | (0x7 << 76) | (count << 64) | (0b10 << 62) | rand:032x}"
