"""The taskforge wire format: msgpack plus nine extension types.

This is the only package that knows how job arguments and results become bytes,
so that a producer, a worker and a non-Python tool reading Redis all agree.
Its modules split that by responsibility: ``format`` fixes the ext codes and
limits, ``codec`` turns values into msgpack and back (the extension types,
per-thread packers), ``framing`` is the public entry points (a value, a job's
call, a result), and ``messages`` words every error so it names the culprit.

Wire format
-----------
A payload is exactly one msgpack object (https://github.com/msgpack/msgpack/blob/master/spec.md)
with no trailing bytes. These Python types use native msgpack types::

    None   nil                  str    str (UTF-8)
    bool   true / false         bytes  bin
    int    int / uint family,   list   array
           -2**63 .. 2**64-1    dict   map, in insertion order; keys may be ANY
    float  float 64 (float 32          supported hashable value (int, nil, bin,
           is read as a float)         ext...), not only strings

Every other supported type is an ext object with one of these application
codes. "array [...]" means the ext data is itself one complete msgpack object,
encoded with these same rules (a tuple of datetimes nests ext inside ext)::

    code  Python type         ext data
    ----  ------------------  ------------------------------------------------------
       1  tuple               array of the items
       2  set                 array of the items (in iteration order, which means nothing)
       3  frozenset           array of the items
       4  datetime.datetime   array [year, month, day, hour, minute, second, microsecond,
                              fold, offset]: the local wall time; offset is nil when
                              naive, else the UTC offset in microseconds (east > 0)
       5  datetime.date       array [year, month, day]
       6  datetime.time       array [hour, minute, second, microsecond, fold, offset],
                              offset as for datetime
       7  datetime.timedelta  array [days, seconds, microseconds], normalised as Python
                              does: 0 <= seconds < 86400, 0 <= microseconds < 10**6 and
                              the sign in days (minus one microsecond is [-1, 86399, 999999])
       8  uuid.UUID           the 16 bytes of the UUID in RFC 4122 (big-endian) order
       9  decimal.Decimal     ASCII text in the General Decimal Arithmetic
                              to-scientific-string form: "-0", "1.50", "1E+999999",
                              "-Infinity", "NaN", "sNaN12" (the exponent letter may be e)

All fields of 4-7 are ints. Any other ext code, including msgpack's own
timestamp (-1), makes the payload corrupt. A job (``dumps_call``) is the array
``[args, kwargs]``: args an array (not a tuple ext), kwargs a map with str keys.
So ``dumps_call((1, "a"), {"to": "x@y.z"})`` is ``92 92 01 a1 61 81 a2 74 6f a5
78 40 79 2e 7a`` and ``dumps((1, 2))`` is ``c7 03 01 92 01 02``.

Deliberate losses: only the UTC offset of a tzinfo travels, so a ``ZoneInfo``
comes back as the fixed ``datetime.timezone`` offset it had at that instant,
without its name (``fold`` is kept). A tzinfo whose ``utcoffset()`` is None
(a ``time`` with a ``ZoneInfo``, say) makes the value naive by Python's own
definition, and it travels as naive. ``UUID.is_safe`` is not carried.

Values may nest at most ``MAX_DEPTH`` containers deep, and ``loads`` refuses
ext data nested deeper: decoding ext inside ext is recursive, and a crafted
payload would otherwise exhaust the C stack (a segfault, not an exception)
before Python's recursion limit noticed. Anything ``dumps`` accepts, ``loads``
reads back, on any thread with a stack of 256 KiB or more.
"""

from .format import (
    EXT_DATE,
    EXT_DATETIME,
    EXT_DECIMAL,
    EXT_FROZENSET,
    EXT_SET,
    EXT_TIME,
    EXT_TIMEDELTA,
    EXT_TUPLE,
    EXT_UUID,
    MAX_DEPTH,
)
from .framing import dumps, dumps_call, dumps_result, loads, loads_call

__all__ = [
    "EXT_DATE",
    "EXT_DATETIME",
    "EXT_DECIMAL",
    "EXT_FROZENSET",
    "EXT_SET",
    "EXT_TIME",
    "EXT_TIMEDELTA",
    "EXT_TUPLE",
    "EXT_UUID",
    "MAX_DEPTH",
    "dumps",
    "dumps_call",
    "dumps_result",
    "loads",
    "loads_call",
]
