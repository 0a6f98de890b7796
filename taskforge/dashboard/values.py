"""Big values cut to a preview: a job page and the API stay small whatever a job carries.

A job's arguments, result, error and traceback can be any size a producer
or a task made them (a 100 MB argument is a 100 MB record); printed whole,
the job page would be as big, and it refreshes itself every 3 s. So the
page and the API show the first ``PREVIEW_CHARS`` characters of each such
value, with its full size and a link to ``GET /download/<field>/<id>``,
which sends the whole value once, as a file, and never refreshes. A job
page with a cut value does not refresh itself either: each refresh would
read the whole record from Redis again.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlencode

from ..job import JobInfo
from ..job_json import jsonable

PREVIEW_CHARS = 64 * 1024
DATA_FIELDS = ("args", "kwargs", "result")  # JSON documents; the others are text
TEXT_FIELDS = ("error", "traceback")
FIELDS = DATA_FIELDS + TEXT_FIELDS


@dataclass(frozen=True)
class Shown:
    """What the page prints of one value: ``text`` (whole, or its first ``PREVIEW_CHARS``), and how long it is."""

    text: str
    chars: int
    download: str

    @property
    def cut(self) -> bool:
        return self.chars > len(self.text)


def as_text(field: str, value: Any) -> str:
    """A value as the page prints it and the download sends it: JSON (indented) for data, itself for text."""
    if field in DATA_FIELDS:
        return json.dumps(jsonable(value), indent=2, ensure_ascii=False)
    return "" if value is None else str(value)


def download_url(field: str, job_id: str, queue: str | None = None) -> str:
    where = f"?{urlencode({'queue': queue})}" if queue else ""
    return f"/download/{field}/{quote(job_id, safe='')}{where}"


def cut(text: str, url: str) -> dict[str, Any]:
    """What the API gives in place of a value longer than the preview."""
    return {"cut": True, "preview": text[:PREVIEW_CHARS], "chars": len(text), "download": url}


def shown(info: JobInfo) -> dict[str, Shown]:
    """Each of the job's values as the page prints it."""
    found: dict[str, Shown] = {}
    for field in FIELDS:
        text = as_text(field, getattr(info, field))
        found[field] = Shown(text[:PREVIEW_CHARS], len(text), download_url(field, info.id, info.queue))
    return found


def cut_json(doc: dict[str, Any]) -> dict[str, Any]:
    """A ``job --json`` document with each value longer than the preview replaced by
    ``{"cut": true, "preview": <its first characters as text>, "chars": <its length>, "download": <url>}``."""
    out = dict(doc)
    for field in FIELDS:
        text = as_text(field, doc.get(field))
        if len(text) > PREVIEW_CHARS:
            out[field] = cut(text, download_url(field, str(doc["id"]), str(doc["queue"])))
    return out


def cut_each(doc: dict[str, Any], key: str) -> dict[str, Any]:
    """``doc`` with each job document of its list ``key`` (a page's jobs, a workflow's steps) cut."""
    return {**doc, key: [cut_json(job) for job in doc[key]]}


def cut_workflow(doc: dict[str, Any]) -> dict[str, Any]:
    """A ``workflow --json`` document with its steps cut, and its error (the failed step's, whose download it is)."""
    out = cut_each(doc, "steps")
    error, step = doc.get("error") or "", doc.get("failed_step")
    if len(error) > PREVIEW_CHARS and step:
        out["error"] = cut(error, download_url("error", str(step)))
    return out
