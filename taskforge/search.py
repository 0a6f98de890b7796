"""Finding jobs: ``app.find_jobs``, ``taskforge jobs`` and the dashboard's search, on the queues' indexes.

Each queue keeps a search index (``broker/index.py``): every job listed
newest first by creation under its task, and apart by key, and while dead or
once cancelled. A query reads the one list that narrows it most (a key, then
a final state or a task, whichever ``ZLEXCOUNT`` says is shorter, else every
task's list, merged), a slice at a time, and checks what that list cannot say (the state, a
text) on the records it names, read in one pipeline per slice. Running,
scheduled and retrying jobs have sets of their own, usually small: a search
for those states reads the set whole when it holds at most ``SMALL_SET``. Queues are
merged by stamp (creation ms, then id), which is also the cursor: a page
goes on below the last job it showed, in every queue at once.

A page stops at ``limit`` jobs, or once it has looked at ``SCAN_BUDGET``
entries or spent ``TIME_BUDGET_S``: a rare text over a million jobs then
comes back as a short (even empty) page whose ``cursor`` goes on from where
the search got to, so no page keeps Redis or its caller busy for long. A
``cursor`` of None means nothing more matches.

``match`` is looked for, case-insensitively, in the id, task name, key and
error text of a job, and in its arguments: inside their strings (and dict
keys), and, for a text that could be one, a number's digits, ``true``,
``false`` or ``none``.
"""

from __future__ import annotations

import base64
import hashlib
import re
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from .broker import junk
from .broker.index import prefix_of
from .broker.keys import search_index, validate_queue_name
from .broker.record import job_info
from .errors import CorruptPayload
from .handle import known_queues, known_state
from .job import JobInfo, JobState
from .job_json import job_to_json
from .serialization import loads_call

if TYPE_CHECKING:
    from .broker.roles import BrokerRoles, IndexRole
    from .protocols import BrokerAccess

SCAN_BUDGET = 20_000  # index entries one page looks at, at most
TIME_BUDGET_S = 0.1  # and the time it spends looking
FIRST_SLICE = 200
MAX_SLICE = 1_000
MAX_LIMIT = 1_000
SMALL_SET = 5_000  # a running or scheduled set up to this size is read whole rather than searched for
STATES = ", ".join(s.value for s in JobState)
NON_STRING = re.compile(r"[-+0-9.e]+|true|false|none")  # a text a number or a constant renders as


@dataclass(frozen=True)
class JobPage:
    """One page of ``find_jobs``: its jobs, newest first, and where the next page starts (None: no more)."""

    jobs: list[JobInfo]
    cursor: str | None

    def to_dict(self) -> dict[str, Any]:
        """``{"jobs": [JobInfo fields...], "cursor": ...}``, as ``taskforge jobs --json`` prints it."""
        return {"jobs": [job_to_json(info) for info in self.jobs], "cursor": self.cursor}


@dataclass(frozen=True)
class Query:
    """A search's filters, checked: what every page of it and every bulk action over it share."""

    queues: tuple[str, ...]
    states: frozenset[JobState] | None = None
    task: str | None = None
    key: str | None = None
    match: str | None = None
    since_ms: int | None = None
    fingerprint: str = ""

    def narrowed(self, states: frozenset[JobState]) -> Query | None:
        """The same query kept to ``states`` (a bulk action's), or None when nothing can be left."""
        kept = states if self.states is None else self.states & states
        return (
            Query(self.queues, kept, self.task, self.key, self.match, self.since_ms, self.fingerprint) if kept else None
        )


@dataclass(frozen=True)
class Found:
    """One job a search found: its place in every index (``stamp``), queue, id and state."""

    stamp: bytes
    queue: str
    id: str
    state: JobState | None = None


def query(
    app: BrokerAccess,
    *,
    queue: str | None = None,
    state: JobState | str | None = None,
    task: str | None = None,
    key: str | None = None,
    match: str | None = None,
    since: timedelta | datetime | None = None,
) -> Query:
    """Check the filters (a ``ValueError`` naming the culprit) and fix ``since`` to a time."""
    spec = repr((queue, state.value if isinstance(state, JobState) else state, task, key, match, _since_spec(since)))
    fingerprint = hashlib.sha256(spec.encode()).hexdigest()[:12]
    known = known_queues(app)
    if queue is not None:
        queue = validate_queue_name(queue)
        if queue not in known:
            raise ValueError(f"unknown queue {queue!r}: the known queues are {', '.join(known) or 'none'}")
    states = None
    if state is not None:
        try:
            states = frozenset({JobState(state)})
        except ValueError:
            raise ValueError(f"unknown state {state!r}: one of {STATES}") from None
    for name, value in (("task", task), ("key", key), ("match", match)):
        if value is not None and (not isinstance(value, str) or not value):
            raise ValueError(f"{name} must be a non-empty string, not {value!r}")
    since_ms = None
    if since is not None:
        since_ms = int(_since_time(since).timestamp() * 1000)
    return Query(tuple([queue] if queue else known), states, task, key, match, since_ms, fingerprint)


def _since_spec(since: object) -> str | None:
    if since is None:
        return None
    if isinstance(since, timedelta):
        return f"{since.total_seconds()}s"
    if isinstance(since, datetime):
        return since.isoformat()
    raise ValueError(f"since must be a timedelta or an aware datetime, not {since!r}")


def _since_time(since: timedelta | datetime) -> datetime:
    if isinstance(since, timedelta):
        if since <= timedelta(0):
            raise ValueError(f"since must be a positive timedelta, not {since!r}")
        return datetime.now().astimezone() - since
    if since.tzinfo is None or since.utcoffset() is None:
        raise ValueError(f"since must be an aware datetime (one with a time zone), not {since.isoformat()}")
    return since


def encode_cursor(q: Query, stamp: bytes) -> str:
    return f"{q.fingerprint}.{base64.urlsafe_b64encode(stamp).decode().rstrip('=')}"


def decode_cursor(q: Query, cursor: str) -> bytes:
    """The stamp a page ended at; a ``ValueError`` for a cursor of another query, or not a cursor at all."""
    fingerprint, _, raw = str(cursor).partition(".")
    if fingerprint != q.fingerprint:
        raise ValueError("this cursor belongs to another query: pass the same filters as the page it came from")
    try:
        stamp = base64.urlsafe_b64decode(raw + "=" * (-len(raw) % 4))
        parse_stamp(stamp)
    except (ValueError, TypeError):
        raise ValueError(f"{cursor!r} is not a cursor taskforge made") from None
    return stamp


def parse_stamp(raw: bytes) -> tuple[str, bytes, bytes]:
    """An entry without its prefix: the job's id, its stamp, and what follows (nothing, in an entry of this version)."""
    colon = raw.index(b":", 13)
    end = colon + 1 + int(raw[13:colon])
    if not raw[:13].isdigit() or end > len(raw):
        raise ValueError(f"not an index entry: {raw!r}")
    return raw[colon + 1 : end].decode(errors="replace"), raw[:end], raw[end:]


def entry(raw: bytes, queue: str) -> tuple[str, bytes, bytes]:
    """``parse_stamp``; junk is set aside (id ''), its bytes as its stamp, so the page goes on past it."""
    try:
        return parse_stamp(raw)
    except ValueError:
        junk.set_aside(search_index(queue), f"an entry that is not an index entry ({raw[:40]!r})")
        return "", raw, b""


@dataclass
class Source:
    """One queue's list to read (``prefix``), and how far down it the search has read (``below``).

    ``listed``: the stamps of a small set read whole (the running or the
    scheduled jobs), newest first, read from here instead of the index.
    ``kept``: entries read but not yet looked at (below another list's
    place), looked at next round rather than read again: a search of every
    job merges one list per task.
    """

    queue: str
    prefix: bytes
    below: bytes | None
    done: bool = False
    batch: list[tuple[str, bytes, bytes]] = field(default_factory=list)  # (id, stamp, rest)
    listed: list[bytes] | None = None
    kept: list[tuple[str, bytes, bytes]] = field(default_factory=list)
    ended: bool = False  # a read came back short: nothing is left below what it read

    def read(self, index: IndexRole, since: bytes, size: int) -> list[bytes]:
        if self.listed is None:
            return index.entries(self.queue, self.prefix, self.below, since, size)
        below = self.below
        return [s for s in self.listed if (below is None or s < below) and s >= since][:size]


class Finder:
    """One query over the indexes of its queues."""

    def __init__(self, broker: BrokerRoles, q: Query) -> None:
        self.broker = broker
        self.q = q
        self.since = b"%013d" % q.since_ms if q.since_ms is not None else b""
        self.needle = q.match.casefold() if q.match else None
        self.fields = ["state", "task", "key", "error", "payload"] if q.match else ["state", "task", "key"]

    def choose(self, queue: str) -> list[bytes]:
        """The shortest list that holds every match: a key's, a final state's or a task's, else every task's."""
        options = []
        if self.q.key is not None:
            options.append(prefix_of("k", self.q.key))
        if self.q.states == frozenset({JobState.DEAD}):
            options.append(b"d")
        if self.q.states == frozenset({JobState.CANCELLED}):
            options.append(b"c")
        if self.q.task is not None:
            options.append(prefix_of("t", self.q.task))
        if len(options) <= 1:
            return options or self.broker.index.tasks(queue)
        return [min(options, key=lambda p: self.broker.index.count(queue, p, self.since))]

    def listed(self, queue: str) -> list[bytes] | None:
        """For running or scheduled jobs only: their set's stamps, newest first, when it is small."""
        states = self.q.states or frozenset()
        if not states or self.q.key is not None:
            return None
        if states <= {JobState.RUNNING}:
            ids = self.broker.index.live(queue, "running", SMALL_SET)
        elif states <= {JobState.SCHEDULED, JobState.RETRYING}:
            ids = self.broker.index.live(queue, "scheduled", SMALL_SET)
        else:
            return None
        if ids is None:
            return None
        rows = self.broker.index.fields(queue, ids, ["created_at"])
        stamps = [
            b"%013d%d:%s" % (int(row[0]), len(raw), raw)
            for job_id, row in zip(ids, rows, strict=True)
            if row[0] is not None and row[0].isdigit()
            for raw in [job_id.encode()]
        ]
        return sorted(stamps, reverse=True)

    def sources(self, queue: str, below: bytes | None) -> list[Source]:
        listed = self.listed(queue)
        if listed is not None:
            return [Source(queue, b"", below, listed=listed)]
        return [Source(queue, prefix, below) for prefix in self.choose(queue)]

    def scan(self, below: bytes | None, limit: int | None, budget: bool) -> tuple[list[Found], bytes | None]:
        """Matches newest first below ``below``: up to ``limit`` (None: all), and the stamp to go on from."""
        sources = [s for queue in self.q.queues for s in self.sources(queue, below)]
        found: list[Found] = []
        looked, began, size = (
            0,
            time.monotonic(),
            FIRST_SLICE if limit is None else min(FIRST_SLICE, max(50, 2 * limit)),
        )
        while True:
            active = [s for s in sources if not s.done]
            for s in active:
                want = size - len(s.kept)
                read = [] if s.ended or want <= 0 else s.read(self.broker.index, self.since, want)
                fresh = [entry(e, s.queue) for e in read]
                s.ended = s.ended or len(fresh) < want
                s.batch = s.kept + fresh
            full = [s.batch[-1][1] for s in active if not s.ended]
            floor = max(full) if full else None
            candidates = sorted(
                (
                    (Found(stamp, s.queue, job_id), rest)
                    for s in active
                    for job_id, stamp, rest in s.batch
                    if floor is None or stamp >= floor
                ),
                key=lambda c: c[0].stamp,
                reverse=True,
            )
            for match in self.check(candidates):
                found.append(match)
                if limit is not None and len(found) == limit:
                    return found, match.stamp
            if floor is None:
                return found, None
            looked += len(candidates)
            for s in active:
                s.kept = [e for e in s.batch if e[1] < floor]
                s.below = s.batch[-1][1] if s.batch else floor
                s.done = s.ended and not s.kept
            if budget and (looked >= SCAN_BUDGET or time.monotonic() - began > TIME_BUDGET_S):
                return found, floor
            size = min(2 * size, MAX_SLICE)

    def check(self, candidates: Sequence[tuple[Found, bytes]]) -> list[Found]:
        """The candidates that match, in their order: what the list could not say is read from the records."""
        wanted: dict[str, list[Found]] = {}
        for found, _ in candidates:
            if not found.id:
                continue  # junk
            wanted.setdefault(found.queue, []).append(found)
        kept: set[tuple[str, str]] = set()
        states: dict[tuple[str, str], JobState | None] = {}
        for queue, group in wanted.items():
            rows = self.broker.index.fields(queue, [f.id for f in group], self.fields)
            for f, row in zip(group, rows, strict=True):
                state = known_state(row[0])
                if row[0] is None or not self.wants(f.id, state, row):
                    continue
                kept.add((queue, f.id))
                states[(queue, f.id)] = state
        return [
            Found(f.stamp, f.queue, f.id, states[(f.queue, f.id)]) for f, _ in candidates if (f.queue, f.id) in kept
        ]

    def wants(self, job_id: str, state: JobState | None, row: list[bytes | None]) -> bool:
        if self.q.states is not None and state not in self.q.states:
            return False
        if self.q.task is not None and (row[1] or b"").decode(errors="replace") != self.q.task:
            return False
        if self.q.key is not None and (row[2] or b"").decode(errors="replace") != self.q.key:
            return False
        if self.needle is None:
            return True
        return self.text_matches(job_id, row)

    def text_matches(self, job_id: str, row: list[bytes | None]) -> bool:
        needle = self.needle or ""
        texts = [job_id, *((value or b"").decode(errors="replace") for value in row[1:4])]
        if any(needle in text.casefold() for text in texts):
            return True
        payload = row[4] or b""
        if (
            needle.encode() in payload.lower()
            if needle.isascii()
            else needle in payload.decode(errors="replace").casefold()
        ):
            return True
        if not NON_STRING.fullmatch(needle):
            return False
        try:
            args, kwargs = loads_call(payload)
        except CorruptPayload:
            return False
        return needle in repr((args, kwargs)).casefold()


def infos(broker: BrokerRoles, found: Sequence[Found]) -> list[JobInfo]:
    """The full records of what a page found, in its order (a record gone since is left out)."""
    by_queue: dict[str, list[Found]] = {}
    for f in found:
        by_queue.setdefault(f.queue, []).append(f)
    read: dict[tuple[str, str], JobInfo] = {}
    for queue, group in by_queue.items():
        records = broker.inspection.read_many(queue, [f.id for f in group])
        for f, record in zip(group, records, strict=True):
            if record:
                read[(queue, f.id)] = job_info(f.id, queue, record)
    return [read[(f.queue, f.id)] for f in found if (f.queue, f.id) in read]


def find_jobs(app: BrokerAccess, q: Query, limit: int = 100, cursor: str | None = None) -> JobPage:
    """One page of ``q``, newest first by creation."""
    if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= MAX_LIMIT:
        raise ValueError(f"limit must be an integer from 1 to {MAX_LIMIT}, not {limit!r}")
    below = decode_cursor(q, cursor) if cursor is not None else None
    found, end = Finder(app.broker, q).scan(below, limit, budget=True)
    return JobPage(infos(app.broker, found), encode_cursor(q, end) if end is not None else None)


def every_match(app: BrokerAccess, q: Query, slice_size: int = 100) -> Iterator[list[Found]]:
    """Every job matching ``q`` that was created before the call, newest first, in slices (for bulk actions)."""
    finder = Finder(app.broker, q)
    below: bytes | None = b"%013d" % (time.time_ns() // 1_000_000 + 1)
    while below is not None:
        found, below = finder.scan(below, slice_size, budget=False)
        if found:
            yield found
