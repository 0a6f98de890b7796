"""Jobs and workflows as JSON: ``job --json``, ``workflow --json``, ``jobs --json``, the dashboard's API.

On the API's side, so ``JobPage.to_dict()`` (``search.py``) and the operator
tools (``status``, the CLI, the dashboard) render a job alike without the API
importing an operator tool.

JSON rendering of job values (``jsonable``): None, bool, int, str and
finite floats as they are; NaN and infinities as the strings ``"NaN"``, ``"Infinity"``, ``"-Infinity"``;
list and tuple as arrays; set and frozenset as arrays sorted by their JSON
text; dict as an object whose non-string keys are rendered by these rules and
then, unless already a string, written as their JSON text (``1`` -> ``"1"``,
``None`` -> ``"null"``, ``(1, 2)`` -> ``"[1, 2]"``); datetime, date and time
as ISO 8601 strings (``isoformat()``, an aware datetime keeps its offset);
timedelta as a number of seconds; UUID and Decimal as their strings; bytes as
``{"$bytes": "<base64>"}``, the one tagged form, since bytes have no faithful
JSON text.
"""

from __future__ import annotations

import base64
import decimal
import json
import math
import uuid
from datetime import date, datetime, time, timedelta
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .job import JobInfo
    from .workflows.handle import WorkflowInfo


def jsonable(value: Any) -> Any:
    """``value`` as JSON-native data, by the rules in this module's docstring."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        if math.isfinite(value):
            return value
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, (list, tuple)):
        return [jsonable(item) for item in value]
    if isinstance(value, (set, frozenset)):
        return sorted((jsonable(item) for item in value), key=lambda item: json.dumps(item, sort_keys=True))
    if isinstance(value, dict):
        return {_json_key(key): jsonable(item) for key, item in value.items()}
    if isinstance(value, bytes):
        return {"$bytes": base64.b64encode(value).decode("ascii")}
    if isinstance(value, (datetime, date, time)):
        return value.isoformat()
    if isinstance(value, timedelta):
        return value.total_seconds()
    if isinstance(value, (uuid.UUID, decimal.Decimal)):
        return str(value)
    return repr(value)


def _json_key(key: Any) -> str:
    rendered = jsonable(key)
    return rendered if isinstance(rendered, str) else json.dumps(rendered, sort_keys=True)


def job_to_json(info: JobInfo) -> dict[str, Any]:
    """``JobInfo.to_dict()`` with args, kwargs and result made JSON-native (``job --json``)."""
    data = info.to_dict()
    for name in ("args", "kwargs", "result", "progress_meta", "steps"):
        data[name] = jsonable(data[name])
    return data


def workflow_to_json(info: WorkflowInfo) -> dict[str, Any]:
    """``WorkflowInfo.to_dict()`` with each step as ``job --json`` prints it (``workflow --json``)."""
    return {**info.to_dict(), "steps": [job_to_json(step) for step in info.steps]}
