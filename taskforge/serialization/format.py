"""What the wire format fixes: the ext type codes, the nesting limit, and the type sets both directions walk."""

from __future__ import annotations

from typing import Final

from msgpack import ExtType, Timestamp

EXT_TUPLE: Final = 1
EXT_SET: Final = 2
EXT_FROZENSET: Final = 3
EXT_DATETIME: Final = 4
EXT_DATE: Final = 5
EXT_TIME: Final = 6
EXT_TIMEDELTA: Final = 7
EXT_UUID: Final = 8
EXT_DECIMAL: Final = 9

MAX_DEPTH: Final = 100
MAX_PAYLOAD: Final = 2**31 - 1  # what a msgpack Unpacker can buffer; Redis stops at 512 MiB

_CONTAINERS: Final = frozenset({list, tuple, dict, set, frozenset})
# Even with strict_types=True msgpack packs these itself, never asking `default`:
# bytearray and memoryview would come back as bytes, and ExtType / Timestamp
# objects would put raw ext codes of the caller's choosing into the payload.
_PACKED_WITHOUT_DEFAULT: Final = frozenset({bytearray, memoryview, ExtType, Timestamp})
_ENCODE_WALK_STOPS: Final = _CONTAINERS | _PACKED_WITHOUT_DEFAULT
_DECODE_WALK_STOPS: Final = _CONTAINERS | {Timestamp}
_STR_ONLY: Final = frozenset({str})
