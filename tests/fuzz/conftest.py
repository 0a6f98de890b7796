"""Fuzz fixtures: the worker fixtures of tests/worker (real ``taskforge worker`` subprocesses in
their own process group, orphan check), running the fuzz app below instead of the worker tests' app.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.worker.conftest import side, start_worker  # noqa: F401

# Copied into the worker's directory as userapp.py (the module tests/worker's Worker runs).
FUZZ_APP = '''
import os

import redis

from taskforge import TaskForge

app = TaskForge("fuzzapp")
side = redis.Redis.from_url(os.environ["SIDE_REDIS"])


@app.task(name="noop", queue="fuzz")
def noop(tag=None, *args, **kwargs):
    """Records that it ran (the tag is the job's own id, for jobs seeded by the tests)."""
    if isinstance(tag, str):
        side.rpush("fuzz:ran", tag)


@app.task(name="big_result", queue="fuzz", max_attempts=1)
def big_result(size):
    return b"x" * size


@app.task(name="small_result", queue="fuzz")
def small_result():
    return "fits"
'''


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    (tmp_path / "userapp.py").write_text(FUZZ_APP)
    return tmp_path


# Bugs these tests found that are not fixed yet. Each is listed by its test id
# and stays visible as an xfail (with the reason) until fixed; remove the line
# with the fix. Found: damaged queue keys (a string or list where a zset or hash
# belongs) make scripts raise WRONGTYPE instead of a clear error; non-numeric
# attempts/priority fields make dequeue raise; max_job_size counts the
# arguments but not the whole stored record.
KNOWN_BUGS = {
    'tests/fuzz/test_bad_data.py::test_every_bad_item_ends_visibly_and_no_broker_call_raises[memory]',
    'tests/fuzz/test_bad_data.py::test_every_bad_item_ends_visibly_and_no_broker_call_raises[redis]',
    'tests/fuzz/test_bad_data.py::test_any_field_value_leaves_the_job_finished_never_stranded',
    'tests/fuzz/test_bad_data.py::test_a_damaged_queue_key_gives_a_clear_error_and_stores_nothing[memory-pending-is-a-string]',
    'tests/fuzz/test_bad_data.py::test_a_damaged_queue_key_gives_a_clear_error_and_stores_nothing[memory-scheduled-is-a-list]',
    'tests/fuzz/test_bad_data.py::test_a_damaged_queue_key_gives_a_clear_error_and_stores_nothing[memory-running-is-a-hash]',
    'tests/fuzz/test_bad_data.py::test_a_damaged_queue_key_gives_a_clear_error_and_stores_nothing[memory-dead-is-a-string]',
    'tests/fuzz/test_bad_data.py::test_a_damaged_queue_key_gives_a_clear_error_and_stores_nothing[memory-seq-is-a-hash]',
    'tests/fuzz/test_bad_data.py::test_a_damaged_queue_key_gives_a_clear_error_and_stores_nothing[memory-seq-is-not-a-number]',
    'tests/fuzz/test_bad_data.py::test_a_damaged_queue_key_gives_a_clear_error_and_stores_nothing[memory-seq-at-its-maximum]',
    'tests/fuzz/test_bad_data.py::test_a_damaged_queue_key_gives_a_clear_error_and_stores_nothing[memory-wake-is-a-string]',
    'tests/fuzz/test_bad_data.py::test_a_damaged_queue_key_gives_a_clear_error_and_stores_nothing[memory-limits-is-a-string]',
    'tests/fuzz/test_bad_data.py::test_a_damaged_queue_key_gives_a_clear_error_and_stores_nothing[memory-queues-is-a-string]',
    'tests/fuzz/test_bad_data.py::test_a_damaged_queue_key_gives_a_clear_error_and_stores_nothing[redis-pending-is-a-string]',
    'tests/fuzz/test_bad_data.py::test_a_damaged_queue_key_gives_a_clear_error_and_stores_nothing[redis-scheduled-is-a-list]',
    'tests/fuzz/test_bad_data.py::test_a_damaged_queue_key_gives_a_clear_error_and_stores_nothing[redis-running-is-a-hash]',
    'tests/fuzz/test_bad_data.py::test_a_damaged_queue_key_gives_a_clear_error_and_stores_nothing[redis-dead-is-a-string]',
    'tests/fuzz/test_bad_data.py::test_a_damaged_queue_key_gives_a_clear_error_and_stores_nothing[redis-seq-is-a-hash]',
    'tests/fuzz/test_bad_data.py::test_a_damaged_queue_key_gives_a_clear_error_and_stores_nothing[redis-seq-is-not-a-number]',
    'tests/fuzz/test_bad_data.py::test_a_damaged_queue_key_gives_a_clear_error_and_stores_nothing[redis-seq-at-its-maximum]',
    'tests/fuzz/test_bad_data.py::test_a_damaged_queue_key_gives_a_clear_error_and_stores_nothing[redis-wake-is-a-string]',
    'tests/fuzz/test_bad_data.py::test_a_damaged_queue_key_gives_a_clear_error_and_stores_nothing[redis-limits-is-a-string]',
    'tests/fuzz/test_bad_data.py::test_a_damaged_queue_key_gives_a_clear_error_and_stores_nothing[redis-queues-is-a-string]',
    'tests/fuzz/test_bad_data.py::test_burst_worker_survives_the_whole_catalogue',
    'tests/fuzz/test_bad_data.py::test_workers_facing_damaged_keys_neither_crash_nor_hang',
    'tests/fuzz/test_limits.py::test_the_limit_covers_the_whole_job_not_only_its_arguments',
}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.nodeid in KNOWN_BUGS:
            item.add_marker(pytest.mark.xfail(reason="known bug found by the fuzz campaign; see conftest",
                                              strict=False))
