"""A tiny structural checker for the documented ``--json`` schemas (no jsonschema dependency).

A schema is a type, a tuple of types (any of them), a dict (exactly these
keys, each checked), or a one-item list (an array of that).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

ISO = "iso8601"  # a string datetime.fromisoformat reads, with an offset
NULLABLE_ISO = "iso8601|null"


def check(value: Any, schema: Any, path: str = "$") -> None:
    if schema in (ISO, NULLABLE_ISO):
        if value is None and schema == NULLABLE_ISO:
            return
        assert isinstance(value, str), f"{path}: expected an ISO 8601 string, got {value!r}"
        assert datetime.fromisoformat(value).tzinfo is not None, f"{path}: {value!r} has no UTC offset"
        return
    if isinstance(schema, dict):
        assert isinstance(value, dict), f"{path}: expected an object, got {value!r}"
        assert set(value) == set(schema), f"{path}: keys {sorted(value)} != documented {sorted(schema)}"
        for key, sub in schema.items():
            check(value[key], sub, f"{path}.{key}")
        return
    if isinstance(schema, list):
        assert isinstance(value, list), f"{path}: expected an array, got {value!r}"
        for i, item in enumerate(value):
            check(item, schema[0], f"{path}[{i}]")
        return
    types = schema if isinstance(schema, tuple) else (schema,)
    if int in types and bool not in types:
        assert not isinstance(value, bool), f"{path}: expected {types}, got a bool"
    assert isinstance(value, types), f"{path}: expected {types}, got {value!r}"


STATUS_SCHEMA = {
    "schema_version": int,
    "broker": str,
    "generated_at": ISO,
    "queues": [
        {
            "name": str,
            "pending": int,
            "pending_by_priority": {"critical": int, "high": int, "normal": int, "low": int},
            "scheduled": int,
            "retrying": int,
            "running": int,
            "dead": int,
            "estimated": bool,
            "next_due": NULLABLE_ISO,
            "expired_last_hour": int,
            "paused": bool,
            "held": int,
            "deferred": int,
        }
    ],
    "workers": [
        {
            "id": str,
            "host": str,
            "pid": int,
            "queues": [str],
            "concurrency": int,
            "jobs_done": int,
            "current": [{"id": str, "task": str, "queue": str, "started_at": NULLABLE_ISO}],
            "started_at": NULLABLE_ISO,
            "heartbeat": NULLABLE_ISO,
            "clock_offset_ms": int,
        }
    ],
    "jobs_done": int,
    "next_due": NULLABLE_ISO,
    "periodic": [{"task": str, "queue": str, "schedule": str, "next_run": ISO}],
    "workflows": {"running": int, "succeeded": int, "dead": int, "cancelled": int},
    "server": {"summary": [str], "warnings": [str]},
}

JSON_VALUE = (type(None), bool, int, float, str, list, dict)

JOB_SCHEMA = {
    "id": str,
    "task": str,
    "queue": str,
    "args": list,
    "kwargs": dict,
    "priority": str,
    "state": str,
    "attempts": int,
    "max_attempts": int,
    "created_at": NULLABLE_ISO,
    "scheduled_at": NULLABLE_ISO,
    "started_at": NULLABLE_ISO,
    "finished_at": NULLABLE_ISO,
    "error": (str, type(None)),
    "traceback": (str, type(None)),
    "result": JSON_VALUE,
    "progress": (float, int, type(None)),
    "progress_message": (str, type(None)),
    "headers": (dict,),
    "failure": (str, type(None)),
    "error_type": (str, type(None)),
    "progress_meta": JSON_VALUE,
    "key": (str, type(None)),
    "held": (str, type(None)),
    "steps": (dict,),
    "stream_length": (int,),
    "losses": (int,),
    "interrupted": (int,),
}
