"""django-tasks' database backend tests that hold for any backend, on ``TaskforgeBackend`` with real workers.

Ported from django-tasks at 17bd95f3594257c091c7c296b8bdc3888b71d342,
``tests/tests/test_database_backend.py`` (BSD-3-Clause, see LICENSE in this
folder). The original stored tasks in a table and ran them with its
``db_worker`` command, in-process (``run_worker``) or as subprocesses; here
the package's real ``taskforge worker`` runs them (``run_worker(result)``
waits for it), and where a test needs a worker of its own (queues, exit
codes, signals), it runs ``taskforge worker ... --burst`` or a long-running
worker as a subprocess, on a queue of the test's own. Query counts and table
reads are taskforge's job records. The tests about the table, its indexes,
locks, migrations, id functions, ``db_worker``'s options and the
``prune_db_task_results`` command have no taskforge meaning: they are in
``NOT_APPLICABLE`` below, each with its reason (and in the differences table
of ``docs/tutorials/django.md``).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import uuid
from collections import Counter
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.core.exceptions import SuspiciousOperation
from django.db import transaction
from django.tasks import TaskResultStatus, default_task_backend, task_backends
from django.tasks.exceptions import InvalidTask, TaskResultDoesNotExist
from django.tasks.signals import task_enqueued
from django.test import SimpleTestCase, override_settings
from django.urls import reverse
from django.utils import timezone

from taskforge import TaskForge
from taskforge.contrib.django import RUN, TaskforgeBackend
from taskforge.job import JobState
from tests.conftest import REDIS_URL
from tests.worker.conftest import child_pids, wait_for

from . import tasks as test_tasks
from .support import (
    BACKEND,
    ROOT,
    difference,
    documented_differences,
    finished,
    fresh_queue,
    run_burst,
    tasks_setting,
    worker_command,
    worker_env,
)

pytestmark = [pytest.mark.redis, pytest.mark.slow]

MEMORY = {"default": {"BACKEND": BACKEND, "QUEUES": [], "OPTIONS": {"BROKER": "memory://"}}}


@override_settings(TASKS=tasks_setting(["default", "queue-1", "unserved"]))
class DatabaseBackendTestCase(SimpleTestCase):
    databases = {"default"}

    @contextlib.contextmanager
    def _capture_task_enqueued_signal(self) -> Iterator[list[tuple[type, Any]]]:
        received: list[tuple[type, Any]] = []

        def capture_signal(sender: type, task_result: Any, **kwargs: Any) -> None:
            received.append((sender, task_result))

        task_enqueued.connect(capture_signal, dispatch_uid="db_enqueue_signal", weak=False)
        try:
            yield received
        finally:
            task_enqueued.disconnect(capture_signal, dispatch_uid="db_enqueue_signal")

    def test_using_correct_backend(self) -> None:
        self.assertEqual(default_task_backend, task_backends["default"])
        self.assertIsInstance(task_backends["default"], TaskforgeBackend)
        self.assertEqual(default_task_backend.alias, "default")
        self.assertEqual(default_task_backend.options, {"BROKER": REDIS_URL})

    def test_enqueue_task(self) -> None:
        for task in [test_tasks.noop_task, test_tasks.noop_task_async]:
            with self.subTest(task):
                with self._capture_task_enqueued_signal() as received:
                    result = task.enqueue(1, two=3)

                self.assertEqual(uuid.UUID(result.id).version, 4)
                self.assertEqual(result.status, TaskResultStatus.READY)
                self.assertFalse(result.is_finished)
                self.assertIsNone(result.started_at)
                self.assertIsNone(result.last_attempted_at)
                self.assertIsNone(result.finished_at)
                with self.assertRaisesMessage(ValueError, "Task has not finished yet"):
                    result.return_value  # noqa:B018
                self.assertEqual(result.task, task)
                self.assertEqual(result.args, [1])
                self.assertEqual(result.kwargs, {"two": 3})
                self.assertEqual(result.attempts, 0)

                self.assertEqual(received, [(TaskforgeBackend, result)])

    async def test_enqueue_task_async(self) -> None:
        for task in [test_tasks.noop_task, test_tasks.noop_task_async]:
            with self.subTest(task):
                with self._capture_task_enqueued_signal() as received:
                    result = await task.aenqueue()

                self.assertEqual(uuid.UUID(result.id).version, 4)
                self.assertEqual(result.status, TaskResultStatus.READY)
                self.assertFalse(result.is_finished)
                self.assertIsNone(result.started_at)
                self.assertIsNone(result.last_attempted_at)
                self.assertIsNone(result.finished_at)
                with self.assertRaisesMessage(ValueError, "Task has not finished yet"):
                    result.return_value  # noqa:B018
                self.assertEqual(result.task, task)
                self.assertEqual(result.args, [])
                self.assertEqual(result.kwargs, {})
                self.assertEqual(result.attempts, 0)

                self.assertEqual(received, [(TaskforgeBackend, result)])

    def test_get_result(self) -> None:
        result = default_task_backend.enqueue(test_tasks.noop_task.using(queue_name="unserved"), [], {})

        new_result = default_task_backend.get_result(result.id)

        self.assertEqual(result, new_result)

    async def test_get_result_async(self) -> None:
        result = await default_task_backend.aenqueue(test_tasks.noop_task.using(queue_name="unserved"), [], {})

        new_result = await default_task_backend.aget_result(result.id)

        self.assertEqual(result, new_result)

    def test_refresh_result(self) -> None:
        # The original wrote SUCCESSFUL into the table by hand; here the worker runs the task.
        result = default_task_backend.enqueue(test_tasks.calculate_meaning_of_life, (), {})

        self.assertEqual(result.status, TaskResultStatus.READY)
        self.assertFalse(result.is_finished)
        self.assertIsNone(result.started_at)
        self.assertIsNone(result.last_attempted_at)
        self.assertIsNone(result.finished_at)
        self.assertEqual(result.attempts, 0)

        finished(result)  # refresh() until finished

        self.assertIsNotNone(result.started_at)
        self.assertIsNotNone(result.last_attempted_at)
        self.assertIsNotNone(result.finished_at)
        self.assertEqual(result.status, TaskResultStatus.SUCCESSFUL)
        self.assertTrue(result.is_finished)
        self.assertEqual(result.return_value, 42)
        self.assertEqual(result.attempts, 1)

    async def test_refresh_result_async(self) -> None:
        import asyncio

        result = await default_task_backend.aenqueue(test_tasks.calculate_meaning_of_life, (), {})

        self.assertEqual(result.status, TaskResultStatus.READY)
        self.assertFalse(result.is_finished)
        self.assertIsNone(result.started_at)
        self.assertIsNone(result.last_attempted_at)
        self.assertIsNone(result.finished_at)
        self.assertEqual(result.attempts, 0)

        for _ in range(600):
            await result.arefresh()
            if result.is_finished:
                break
            await asyncio.sleep(0.05)

        self.assertIsNotNone(result.started_at)
        self.assertIsNotNone(result.last_attempted_at)
        self.assertIsNotNone(result.finished_at)
        self.assertEqual(result.status, TaskResultStatus.SUCCESSFUL)
        self.assertTrue(result.is_finished)
        self.assertEqual(result.return_value, 42)
        self.assertEqual(result.attempts, 1)

    def test_get_missing_result(self) -> None:
        with self.assertRaises(TaskResultDoesNotExist):
            default_task_backend.get_result(str(uuid.uuid4()))

    async def test_async_get_missing_result(self) -> None:
        with self.assertRaises(TaskResultDoesNotExist):
            await default_task_backend.aget_result(str(uuid.uuid4()))

    def test_invalid_uuid(self) -> None:
        with self.assertRaises(TaskResultDoesNotExist):
            default_task_backend.get_result("123")

    async def test_async_invalid_uuid(self) -> None:
        with self.assertRaises(TaskResultDoesNotExist):
            await default_task_backend.aget_result("123")

    @override_settings(TASKS=MEMORY, ROOT_URLCONF="tests.contrib.django_port.urls")
    def test_meaning_of_life_view(self) -> None:
        for url in [reverse("meaning-of-life"), reverse("meaning-of-life-async")]:
            with self.subTest(url):
                response = self.client.get(url)
                self.assertEqual(response.status_code, 200)

                data = json.loads(response.content)

                self.assertEqual(data["result"], None)
                self.assertEqual(data["status"], TaskResultStatus.READY)

                result = default_task_backend.get_result(data["result_id"])
                self.assertEqual(result.status, TaskResultStatus.READY)

    @override_settings(TASKS=MEMORY, ROOT_URLCONF="tests.contrib.django_port.urls")
    def test_get_result_from_different_request(self) -> None:
        response = self.client.get(reverse("meaning-of-life"))
        self.assertEqual(response.status_code, 200)

        data = json.loads(response.content)
        result_id = data["result_id"]

        response = self.client.get(reverse("result", args=[result_id]))
        self.assertEqual(response.status_code, 200)

        self.assertEqual(
            json.loads(response.content),
            {"result_id": result_id, "result": None, "status": TaskResultStatus.READY},
        )

    def test_invalid_task_path(self) -> None:
        runner = default_task_backend.app.tasks[RUN].with_options(queue="unserved")
        job = runner.delay("subprocess.check_output", [["exit", "1"]], {}, False)

        with self.assertRaisesMessage(
            SuspiciousOperation, f"Task {job.id} does not point to a Task (subprocess.check_output)"
        ):
            default_task_backend.get_result(job.id)

    def test_missing_task_path(self) -> None:
        runner = default_task_backend.app.tasks[RUN].with_options(queue="unserved")
        job = runner.delay("missing.func", [], {}, False)

        with self.assertRaises(ImportError):
            default_task_backend.get_result(job.id)

    def test_check(self) -> None:
        errors = list(default_task_backend.check())

        self.assertEqual(len(errors), 0, errors)

    @override_settings(TASKS=tasks_setting())
    def test_doesnt_wait_until_transaction_commit(self) -> None:
        # The original asked a second database connection; here a second client of the broker.
        other = TaskForge("another-process", broker=REDIS_URL)
        with transaction.atomic():
            result = test_tasks.noop_task.using(queue_name="unserved").enqueue()

            self.assertIsNotNone(result.enqueued_at)

            self.assertEqual(other.job(result.id).info().state, JobState.PENDING)
        other.broker.client.close()

    def test_enqueue_logs(self) -> None:
        with self.assertLogs("django.tasks", level="DEBUG") as captured_logs:
            result = test_tasks.noop_task.enqueue()

        self.assertEqual(len(captured_logs.output), 1)
        self.assertIn("enqueued", captured_logs.output[0])
        self.assertIn(result.id, captured_logs.output[0])

    def test_run_after_tz(self) -> None:
        for use_tz in [True, False]:
            with self.subTest(use_tz=use_tz):
                with override_settings(USE_TZ=use_tz):
                    result = test_tasks.noop_task.using(queue_name="unserved").enqueue()
                    self.assertIsNone(default_task_backend.get_result(result.id).task.run_after)

    def test_validate_on_enqueue(self) -> None:
        with override_settings(TASKS=tasks_setting(["unknown_queue"])):
            task_with_custom_queue_name = test_tasks.noop_task.using(queue_name="unknown_queue")

        with self.assertRaisesMessage(InvalidTask, "Queue 'unknown_queue' is not valid for backend"):
            task_with_custom_queue_name.enqueue()

    async def test_validate_on_aenqueue(self) -> None:
        with override_settings(TASKS=tasks_setting(["unknown_queue"])):
            task_with_custom_queue_name = test_tasks.noop_task.using(queue_name="unknown_queue")

        with self.assertRaisesMessage(InvalidTask, "Queue 'unknown_queue' is not valid for backend"):
            await task_with_custom_queue_name.aenqueue()


@override_settings(TASKS=tasks_setting())
class DatabaseBackendWorkerTestCase(SimpleTestCase):
    def run_worker(self, *results: Any) -> None:
        for result in results:
            finished(result)

    def state(self, result: Any) -> JobState:
        return default_task_backend.app.job(result.id).info().state

    def test_run_enqueued_task(self) -> None:
        for task in [test_tasks.noop_task, test_tasks.noop_task_async]:
            with self.subTest(task):
                result = task.enqueue()

                self.assertEqual(result.status, TaskResultStatus.READY)
                self.assertEqual(result.attempts, 0)

                self.run_worker(result)

                self.assertIsNotNone(result.started_at)
                self.assertIsNotNone(result.last_attempted_at)
                self.assertIsNotNone(result.finished_at)
                self.assertGreaterEqual(result.started_at, result.enqueued_at)
                self.assertGreaterEqual(result.finished_at, result.started_at)
                self.assertEqual(result.status, TaskResultStatus.SUCCESSFUL)
                self.assertEqual(result.attempts, 1)

    def test_batch_processes_all_tasks(self) -> None:
        queue = fresh_queue()
        results = [test_tasks.noop_task.using(queue_name=queue).enqueue() for _ in range(3)]
        results.append(test_tasks.failing_task_value_error.using(queue_name=queue).enqueue())

        run = run_burst(queue)
        self.assertEqual(run.returncode, 0, run.stderr)

        for result in results:
            result.refresh()
        statuses = Counter(result.status for result in results)
        self.assertEqual(statuses[TaskResultStatus.SUCCESSFUL], 3)
        self.assertEqual(statuses[TaskResultStatus.FAILED], 1)

    def test_no_tasks(self) -> None:
        run = run_burst(fresh_queue())
        self.assertEqual(run.returncode, 0, run.stderr)

    def test_doesnt_process_different_queue(self) -> None:
        queue, other = fresh_queue(), fresh_queue()
        result = test_tasks.noop_task.using(queue_name=queue).enqueue()

        self.assertEqual(run_burst(other).returncode, 0)
        self.assertEqual(self.state(result), JobState.PENDING)

        self.assertEqual(run_burst(result.task.queue_name).returncode, 0)
        self.assertEqual(finished(result).status, TaskResultStatus.SUCCESSFUL)

    def test_process_all_queues(self) -> None:
        # db_worker --queue-name '*' serves every queue; a worker of the Django
        # app serves the queues of the backend's QUEUES (settings_queues.py).
        result = test_tasks.noop_task.using(queue_name="all-queues-1").enqueue()

        run = run_burst(DJANGO_SETTINGS_MODULE="tests.contrib.django_port.settings_queues")
        self.assertEqual(run.returncode, 0, run.stderr)

        self.assertEqual(finished(result, timeout=5).status, TaskResultStatus.SUCCESSFUL, result.errors)

    def test_failing_task(self) -> None:
        result = test_tasks.failing_task_value_error.enqueue()

        self.assertEqual(result.status, TaskResultStatus.READY)
        self.run_worker(result)
        self.assertIsNotNone(result.started_at)
        self.assertIsNotNone(result.last_attempted_at)
        self.assertIsNotNone(result.finished_at)

        self.assertGreaterEqual(result.started_at, result.enqueued_at)
        self.assertGreaterEqual(result.finished_at, result.started_at)
        self.assertEqual(result.status, TaskResultStatus.FAILED)
        with self.assertRaisesMessage(ValueError, "Task failed"):
            result.return_value  # noqa: B018

        self.assertEqual(result.errors[0].exception_class, ValueError)
        traceback = result.errors[0].traceback
        self.assertTrue(
            traceback and traceback.endswith("ValueError: This Task failed due to ValueError\n"),
            traceback,
        )

    def test_complex_exception(self) -> None:
        result = test_tasks.complex_exception.enqueue()

        self.run_worker(result)
        self.assertIsNotNone(result.started_at)
        self.assertIsNotNone(result.last_attempted_at)
        self.assertIsNotNone(result.finished_at)

        self.assertGreaterEqual(result.started_at, result.enqueued_at)
        self.assertGreaterEqual(result.finished_at, result.started_at)
        self.assertEqual(result.status, TaskResultStatus.FAILED)
        with self.assertRaisesMessage(ValueError, "Task failed"):
            result.return_value  # noqa: B018

        self.assertEqual(result.errors[0].exception_class, ValueError)
        self.assertIn('ValueError(ValueError("This task failed"))', result.errors[0].traceback)

    def test_complex_return_value(self) -> None:
        result = test_tasks.complex_return_value.enqueue()

        self.run_worker(result)

        self.assertEqual(result.status, TaskResultStatus.FAILED)
        self.assertIsNotNone(result.started_at)
        self.assertIsNotNone(result.last_attempted_at)
        self.assertIsNotNone(result.finished_at)
        self.assertGreaterEqual(result.started_at, result.enqueued_at)
        self.assertGreaterEqual(result.finished_at, result.started_at)

        self.assertIsNone(result._return_value)
        # json.dumps' words in the original; Django's own (ImmediateBackend) say "Unsupported type".
        self.assertEqual(result.errors[0].exception_class, TypeError)

    @difference(
        "two aliases on one broker share its queues: a worker of either runs the other's jobs; "
        "give each alias its own BROKER (or its own queue names)"
    )
    def test_doesnt_process_different_backend(self) -> None:
        pass

    def test_unknown_backend(self) -> None:
        run = run_burst(TASKFORGE_DJANGO_BACKEND="unknown")
        self.assertEqual(run.returncode, 2)
        self.assertIn("The connection 'unknown' doesn't exist.", run.stderr)

    def test_incorrect_backend(self) -> None:
        run = run_burst(
            DJANGO_SETTINGS_MODULE="tests.contrib.django_port.settings_queues", TASKFORGE_DJANGO_BACKEND="dummy"
        )
        self.assertEqual(run.returncode, 2)
        self.assertIn("TASKS['dummy'] uses DummyBackend, not TaskforgeBackend", run.stderr)

    def test_run_after(self) -> None:
        # The original moved run_after into the past by hand; here it passes, while the worker watches.
        run_after = timezone.now() + timedelta(seconds=3)
        result = test_tasks.noop_task.using(run_after=run_after).enqueue()

        self.assertEqual(self.state(result), JobState.SCHEDULED)
        self.assertEqual(default_task_backend.get_result(result.id).status, TaskResultStatus.READY)

        finished(result)
        self.assertEqual(result.status, TaskResultStatus.SUCCESSFUL)
        self.assertGreaterEqual(result.started_at, run_after)

    def test_verbose_logging(self) -> None:
        queue = fresh_queue()
        result = test_tasks.noop_task.using(queue_name=queue).enqueue()

        run = run_burst(queue)

        path = "tests.contrib.django_port.tasks.noop_task"
        lines = [line for line in (run.stdout + run.stderr).splitlines() if line.startswith("Task id=")]
        self.assertEqual(
            lines,
            [
                f"Task id={result.id} path={path} state=RUNNING",
                f"Task id={result.id} path={path} state=SUCCESSFUL",
            ],
        )

    def test_invalid_task_path(self) -> None:
        # A job whose path is not a Task fails; the worker does not call what it names.
        job = default_task_backend.app.tasks[RUN].delay("subprocess.check_output", [["exit", "1"]], {}, False)
        wait_for(lambda: job.info().state in (JobState.DEAD, JobState.SUCCEEDED), 30, "the job to end")
        self.assertEqual(job.info().state, JobState.DEAD)

    def test_missing_task_path(self) -> None:
        job = default_task_backend.app.tasks[RUN].delay("missing.func", [], {}, False)
        wait_for(lambda: job.info().state in (JobState.DEAD, JobState.SUCCEEDED), 30, "the job to end")
        self.assertEqual(job.info().state, JobState.DEAD)

    def test_worker_doesnt_exit(self) -> None:
        result = test_tasks.exit_task.enqueue()

        self.run_worker(result)

        self.assertEqual(result.status, TaskResultStatus.FAILED)
        self.assertEqual(result.errors[0].exception_class, SystemExit)

    def test_takes_context(self) -> None:
        result = test_tasks.get_task_id.enqueue()

        self.run_worker(result)

        self.assertEqual(result.return_value, result.id)

    def test_context(self) -> None:
        result = test_tasks.test_context.enqueue(1)

        self.run_worker(result)

        self.assertEqual(result.status, TaskResultStatus.SUCCESSFUL)

    def test_task_import_string(self) -> None:
        job = default_task_backend.app.tasks[RUN].delay("tests.contrib.django_port.tasks.some_test", [], {}, False)
        wait_for(lambda: job.info().state in (JobState.DEAD, JobState.SUCCEEDED), 30, "the job to end")
        info = job.info()
        self.assertEqual(info.state, JobState.DEAD)
        self.assertIn("ImportError", info.traceback or info.error or "")


@override_settings(TASKS=tasks_setting())
class DatabaseWorkerProcessTestCase(SimpleTestCase):
    def setUp(self) -> None:
        self.processes: list[subprocess.Popen[str]] = []

    def tearDown(self) -> None:
        for process in self.processes:
            if process.poll() is None:  # a reaped worker's pid (and group id) may belong to another process now
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
            process.wait(10)
            if process.stdout is not None:
                process.stdout.close()

    def start_worker(self, *queues: str) -> subprocess.Popen[str]:
        args = ["-c", "1", *[arg for queue in queues for arg in ("-q", queue)]]
        process = subprocess.Popen(
            worker_command(*args),
            cwd=ROOT,
            env=worker_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        self.processes.append(process)
        return process

    def wait_running(self, result: Any) -> None:
        wait_for(lambda: (result.refresh(), result.status == TaskResultStatus.RUNNING)[1], 60, "the task to run")

    def test_run_subprocess(self) -> None:
        queue = fresh_queue()
        result = test_tasks.noop_task.using(queue_name=queue).enqueue()
        run = run_burst(queue)
        self.assertEqual(run.returncode, 0, run.stderr)

        self.assertEqual(result.status, TaskResultStatus.READY)

        result.refresh()

        self.assertEqual(result.status, TaskResultStatus.SUCCESSFUL)

    def test_interrupt_no_tasks(self) -> None:
        process = self.start_worker(fresh_queue())
        wait_for(lambda: child_pids(process.pid), 60, "the worker's child process")

        process.terminate()

        process.wait(timeout=60)
        self.assertEqual(process.returncode, 0)

    def test_interrupt_signals(self) -> None:
        for sig in [signal.SIGINT, signal.SIGTERM]:
            with self.subTest(sig):
                queue = fresh_queue()
                result = test_tasks.sleep_for.using(queue_name=queue).enqueue(2)
                self.assertEqual(result.worker_ids, [])

                process = self.start_worker(queue)
                self.wait_running(result)
                self.assertNotEqual(result.worker_ids, [])

                process.send_signal(sig)

                process.wait(timeout=60)

                self.assertEqual(process.returncode, 0)

                result.refresh()

                self.assertEqual(result.status, TaskResultStatus.SUCCESSFUL)

    @difference(
        "a second Ctrl-C ends the worker at once and its running jobs are not failed: they go back "
        "to their queue and run again (at-least-once), where db_worker fails them with SystemExit"
    )
    def test_repeat_ctrl_c(self) -> None:
        pass

    def test_kill(self) -> None:
        queue = fresh_queue()
        result = test_tasks.hang.using(queue_name=queue).enqueue()

        process = self.start_worker(queue)
        self.wait_running(result)

        process.kill()
        process.wait(timeout=10)

        self.assertEqual(process.returncode, -signal.SIGKILL)

        result.refresh()

        # Until its lease runs out; then a worker of the queue runs it again. Sooner if a worker already
        # running on this machine (another test's) sees the killed one's processes gone: it puts the job
        # back in its queue at once (taskforge's rescue of a killed worker's jobs; db_worker has none).
        self.assertIn(result.status, (TaskResultStatus.RUNNING, TaskResultStatus.READY))

    def test_system_exit_task(self) -> None:
        queue = fresh_queue()
        result = test_tasks.failing_task_system_exit.using(queue_name=queue).enqueue()

        run = run_burst(queue)

        self.assertEqual(run.returncode, 0)

        result.refresh()
        self.assertEqual(result.status, TaskResultStatus.FAILED)
        self.assertEqual(result.errors[0].exception_class, SystemExit)

    def test_keyboard_interrupt_task(self) -> None:
        queue = fresh_queue()
        result = test_tasks.failing_task_keyboard_interrupt.using(queue_name=queue).enqueue()

        run = run_burst(queue)

        self.assertEqual(run.returncode, 0)

        result.refresh()
        self.assertEqual(result.status, TaskResultStatus.FAILED)
        self.assertEqual(result.errors[0].exception_class, KeyboardInterrupt)

    def test_multiple_workers(self) -> None:
        queue = fresh_queue()
        results = [test_tasks.sleep_for.using(queue_name=queue).enqueue(0.1) for _ in range(10)]

        processes = [
            subprocess.Popen(
                worker_command("--burst", "-c", "1", "-q", queue),
                cwd=ROOT,
                env=worker_env(),
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                start_new_session=True,  # tearDown kills its group
            )
            for _ in range(3)
        ]
        self.processes.extend(processes)

        all_output = ""
        for process in processes:
            stdout_text, _ = process.communicate(timeout=90)
            self.assertEqual(process.returncode, 0, stdout_text)
            all_output += stdout_text

        for result in results:
            result.refresh()
            self.assertEqual(result.status, TaskResultStatus.SUCCESSFUL)

        for result in results:
            # Running and successful
            self.assertEqual(all_output.count(f"id={result.id}"), 2)


NOT_APPLICABLE = {
    "DatabaseBackendTestCase.test_task_name": "DBTaskResult.task_name, a model field",
    "DatabaseBackendTestCase.test_database_backend_app_missing": "TaskforgeBackend is not a Django app to install",
    "DatabaseBackendTestCase.test_priority_range_check": "a database CHECK constraint; Django's Task.using() "
    "refuses priorities out of range (test_tasks.py test_invalid_priority)",
    "DatabaseBackendTestCase.test_index_scan_for_ready": "a table index",
    "DatabaseBackendTestCase.test_run_after_null_0016_migration": "a migration of the table",
    "DatabaseBackendTestCase.test_custom_id_function": "OPTIONS id_function: result ids are taskforge job ids",
    "DatabaseBackendTestCase.test_unknown_id_function": "OPTIONS id_function: result ids are taskforge job ids",
    "DatabaseBackendTestCase.test_postgres_db_id_function": "OPTIONS id_function on PostgreSQL",
    "DatabaseBackendTestCase.test_postgres_id_function_expression": "OPTIONS id_function as a database expression",
    "DatabaseBackendWorkerTestCase.test_negative_interval": "db_worker --interval: a taskforge worker blocks on "
    "Redis, it does not poll",
    "DatabaseBackendWorkerTestCase.test_infinite_interval": "db_worker --interval",
    "DatabaseBackendWorkerTestCase.test_fractional_interval": "db_worker --interval",
    "DatabaseBackendWorkerTestCase.test_negative_max_tasks": "db_worker --max-tasks",
    "DatabaseBackendWorkerTestCase.test_too_long_worker_id": "db_worker --worker-id, a column of limited length",
    "DatabaseBackendWorkerTestCase.test_empty_worker_id": "db_worker --worker-id",
    "DatabaseBackendWorkerTestCase.test_run_after_priority": "the order of a table query; taskforge has four "
    "priority levels (docs/tutorials/django.md) and runs a level's ready jobs in the order they became ready",
    "DatabaseBackendWorkerTestCase.test_worker_with_locked_rows": "row locks (SELECT ... FOR UPDATE)",
    "DatabaseBackendWorkerTestCase.test_max_tasks": "db_worker --max-tasks: a taskforge worker has no 'exit "
    "after N tasks' (--max-jobs-per-child replaces a child, --burst exits when none is ready)",
    "DatabaseBackendWorkerTestCase.test_metadata": "TaskContext.metadata is django-tasks' API; Django 6.1 has none",
    "DatabaseBackendWorkerTestCase.test_save_metadata": "TaskContext.save_metadata() is django-tasks' API",
    "DatabaseTaskResultTestCase.test_cross_connection": "database connections and transactions",
    "DatabaseTaskResultTestCase.test_locks_tasks": "row locks",
    "DatabaseTaskResultTestCase.test_locks_tasks_sqlite": "row locks",
    "DatabaseTaskResultTestCase.test_locks_tasks_filtered": "row locks",
    "DatabaseTaskResultTestCase.test_locks_tasks_filtered_sqlite": "row locks",
    "DatabaseTaskResultTestCase.test_lock_no_rows": "row locks",
    "DatabaseTaskResultTestCase.test_get_locked_with_locked_rows": "row locks",
    "ConnectionExclusiveTranscationTestCase.test_non_sqlite": "SQLite exclusive transactions",
    "ConnectionExclusiveTranscationTestCase.test_old_django_requires_manual_transaction": "SQLite transactions",
    "ConnectionExclusiveTranscationTestCase.test_explicit_transaction": "SQLite transactions",
    "ConnectionExclusiveTranscationTestCase.test_exclusive_transaction": "SQLite transactions",
    **{
        f"DatabaseBackendPruneTaskResultsTestCase.{name}": "the prune_db_task_results command: taskforge deletes "
        "finished job records itself after the app's retention (1 day; dead jobs 7 days)"
        for name in [
            "test_prunes_tasks",
            "test_doesnt_prune_new_tasks",
            "test_doesnt_prune_running_tasks",
            "test_only_prunes_specified_queue",
            "test_prune_all_queues",
            "test_min_age",
            "test_failed_min_age",
            "test_dry_run",
            "test_unknown_backend",
            "test_incorrect_backend",
            "test_negative_age",
        ]
    },
}


@pytest.mark.parametrize("original", sorted(NOT_APPLICABLE))
def test_not_applicable_is_a_documented_difference(original: str) -> None:
    """Each original test not ported is named in the Django page's table of differences, as not applicable."""
    case, name = original.split(".")
    rows = [row for row in documented_differences().splitlines() if f"`{name}`" in row or f"`{case}` (" in row]
    assert rows, f"{original} ({NOT_APPLICABLE[original]}) is not in the Django page's differences from Django"
    assert all("Not applicable" in row for row in rows), rows
