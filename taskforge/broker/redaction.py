"""Hiding the password of a broker URL: one function, for every message, log line, page and repr.

``redact(text)`` hides the credentials of every URL in ``text``, whatever
its scheme and however it is spelled (``REDIS://``, ``Rediss://``,
``redis+sentinel://``, ``unix://``, or a scheme taskforge refuses):

- the userinfo runs from ``scheme://`` to the *last* ``@`` of the URL, as
  the URL parsers read it (``urlsplit`` and ``scaled.py`` split the host
  from the credentials at the last ``@``), so an ``@``, ``:`` or ``,`` in the
  password, or several ``user:password@host`` items of a host list, are
  hidden whole; the user name before the first ``:`` stays, the rest
  becomes ``***``;
- a ``/``, ``?`` or ``#`` in the password ends the host part for those
  parsers; ``unsafe_userinfo`` finds such a URL so that ``connect`` refuses
  it before a parser shows a piece of the password as a host or a port;
- the values of query parameters naming a secret (``?password=``,
  ``ssl_password=``, ...) become ``***``, first, so that an ``@`` inside one
  is not taken for the end of a userinfo.

When in doubt it hides more (an ``@`` in a later part of the URL hides
what comes before it): a message shows less, never the password.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

# A scheme, not preceded by a letter of a longer word: "REDIS://", "redis+sentinel://", "unix://".
_SCHEME = re.compile(r"(?<![A-Za-z0-9+.\-])[A-Za-z][A-Za-z0-9+.\-]*://")
# Query parameters whose value is a secret: password, ssl_password, passwd, ...
_SECRET_PARAM = re.compile(r"(?P<key>[?&][^=&#?\s]*(?:password|passwd|pwd|secret|token)=)[^&#\s]*", re.IGNORECASE)
# Punctuation that closes a URL quoted or bracketed in a message rather than belonging to it.
_CLOSING = "'\")]>,.;"
HIDDEN = "***"


def redact(text: str) -> str:
    """``text`` with the password of every URL in it replaced by ``***`` (see the module's notes)."""
    found = list(_SCHEME.finditer(text))
    if not found:
        return text
    pieces = [text[: found[0].start()]]
    for i, match in enumerate(found):
        end = found[i + 1].start() if i + 1 < len(found) else len(text)
        pieces.append(match.group())
        pieces.append(_redact_rest(text[match.end() : end], whole=match.start() == 0 and i + 1 == len(found)))
    return "".join(pieces)


def _redact_rest(rest: str, whole: bool) -> str:
    """What follows ``scheme://``, redacted: the URL (up to the end of ``rest`` when the text is one
    URL, else up to the first blank or closing quote) and whatever text follows it, untouched."""
    if whole:
        url, tail = rest, ""
    else:
        blank = re.search(r"\s", rest)
        url, tail = (rest[: blank.start()], rest[blank.start() :]) if blank else (rest, "")
        stripped = url.rstrip(_CLOSING)
        url, tail = stripped, url[len(stripped) :] + tail
    url = _SECRET_PARAM.sub(lambda m: m["key"] + HIDDEN, url)
    userinfo, at, after = url.rpartition("@")
    if not at:
        return url + tail
    user, colon, _ = userinfo.partition(":")
    return f"{user}{colon and ':' + HIDDEN}@{after}{tail}"


def unsafe_userinfo(url: str) -> bool:
    """Whether the password of ``url`` holds a ``/``, ``?`` or ``#`` that is not %-escaped.

    The URL parsers end the host part there, so they would read the rest
    of the password as a host, a port or a path (and name it in their
    errors). Seen as this module sees it: a userinfo with a password
    reaches past the host part the parsers read.
    """
    match = _SCHEME.match(url)
    if match is None:
        return False
    rest = _SECRET_PARAM.sub(lambda m: m["key"] + HIDDEN, url[match.end() :])
    userinfo, at, _ = rest.rpartition("@")
    if not at or ":" not in userinfo:
        return False
    try:
        netloc = urlsplit(url).netloc
    except ValueError:
        return True
    # A unix socket's path may hold an '@' of its own: the userinfo the parsers read is complete then.
    return not netloc.endswith("@") and len(userinfo) > len(netloc)
