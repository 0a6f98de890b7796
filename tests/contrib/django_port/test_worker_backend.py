"""Django's ImmediateBackend tests, on ``TaskforgeBackend`` with a real ``taskforge worker`` running the tasks.

Ported from Django 6.1.3, ``tests/tasks/test_immediate_backend.py``
(BSD-3-Clause, see LICENSE in this folder). Changes: the backend is
``TaskforgeBackend``; the ImmediateBackend ran a task inside ``enqueue()``,
here the package's worker runs it and the test waits for it (``finished``);
log lines Django's receivers write while a task runs are read from the
worker's log (``worker_lines``), and ``test_catches_exception``'s ERROR-line
checks are in ``test_failed_logs``; a loop over two tasks with different
outcomes is split where one of them waits on a fix; the "backend does not
support get_result / run_after" tests assert the opposite, as
``TaskforgeBackend`` declares both supported.
"""

from __future__ import annotations

import pytest
from django.db import transaction
from django.tasks import TaskResultStatus, default_task_backend, task_backends
from django.tasks.exceptions import InvalidTask
from django.test import SimpleTestCase, override_settings
from django.utils import timezone

from taskforge.contrib.django import TaskforgeBackend
from tests.conftest import REDIS_URL

from . import tasks as test_tasks
from .support import finished, tasks_setting, worker_lines

pytestmark = [pytest.mark.redis, pytest.mark.slow]


async def afinished(result):
    """``finished`` from a coroutine: ``arefresh()`` until the worker has finished ``result``."""
    import asyncio

    for _ in range(600):
        await result.arefresh()
        if result.is_finished:
            return result
        await asyncio.sleep(0.05)
    raise AssertionError(f"the worker did not finish {result.id}")


@override_settings(TASKS=tasks_setting())
class WorkerBackendTestCase(SimpleTestCase):
    def test_using_correct_backend(self):
        self.assertEqual(default_task_backend, task_backends["default"])
        self.assertIsInstance(task_backends["default"], TaskforgeBackend)
        self.assertEqual(default_task_backend.alias, "default")
        self.assertEqual(default_task_backend.options, {"BROKER": REDIS_URL})

    def test_enqueue_task(self):
        for task in [test_tasks.noop_task, test_tasks.noop_task_async]:
            with self.subTest(task):
                result = finished(task.enqueue(1, two=3))

                self.assertEqual(result.status, TaskResultStatus.SUCCESSFUL)
                self.assertIs(result.is_finished, True)
                self.assertIsNotNone(result.started_at)
                self.assertIsNotNone(result.last_attempted_at)
                self.assertIsNotNone(result.finished_at)
                self.assertGreaterEqual(result.started_at, result.enqueued_at)
                self.assertGreaterEqual(result.finished_at, result.started_at)
                self.assertIsNone(result.return_value)
                self.assertEqual(result.task, task)
                self.assertEqual(result.args, [1])
                self.assertEqual(result.kwargs, {"two": 3})
                self.assertEqual(result.attempts, 1)

    async def test_enqueue_task_async(self):
        for task in [test_tasks.noop_task, test_tasks.noop_task_async]:
            with self.subTest(task):
                result = await afinished(await task.aenqueue())

                self.assertEqual(result.status, TaskResultStatus.SUCCESSFUL)
                self.assertIs(result.is_finished, True)
                self.assertIsNotNone(result.started_at)
                self.assertIsNotNone(result.last_attempted_at)
                self.assertIsNotNone(result.finished_at)
                self.assertGreaterEqual(result.started_at, result.enqueued_at)
                self.assertGreaterEqual(result.finished_at, result.started_at)
                self.assertIsNone(result.return_value)
                self.assertEqual(result.task, task)
                self.assertEqual(result.args, [])
                self.assertEqual(result.kwargs, {})
                self.assertEqual(result.attempts, 1)

    def _catches_exception(self, task, exception, message):
        result = finished(task.enqueue())

        self.assertEqual(result.status, TaskResultStatus.FAILED)
        with self.assertRaisesMessage(ValueError, "Task failed"):
            result.return_value  # noqa: B018
        self.assertIs(result.is_finished, True)
        self.assertIsNotNone(result.started_at)
        self.assertIsNotNone(result.last_attempted_at)
        self.assertIsNotNone(result.finished_at)
        self.assertGreaterEqual(result.started_at, result.enqueued_at)
        self.assertGreaterEqual(result.finished_at, result.started_at)
        self.assertEqual(result.errors[0].exception_class, exception)
        traceback = result.errors[0].traceback
        self.assertIs(
            traceback and traceback.endswith(f"{exception.__name__}: {message}\n"),
            True,
            traceback,
        )
        self.assertEqual(result.task, task)
        self.assertEqual(result.args, [])
        self.assertEqual(result.kwargs, {})

    def test_catches_exception(self):
        self._catches_exception(test_tasks.failing_task_value_error, ValueError, "This Task failed due to ValueError")

    def test_catches_exception_system_exit(self):
        self._catches_exception(test_tasks.failing_task_system_exit, SystemExit, "This Task failed due to SystemExit")

    def test_throws_keyboard_interrupt(self):
        # The ImmediateBackend let KeyboardInterrupt through to the caller of
        # enqueue(), which ran the task; a worker has no caller to raise to,
        # so the task fails as django-tasks' db_worker fails it
        # (test_keyboard_interrupt_task there), and the worker lives on.
        result = finished(default_task_backend.enqueue(test_tasks.failing_task_keyboard_interrupt, [], {}))
        self.assertEqual(result.status, TaskResultStatus.FAILED)
        self.assertEqual(result.errors[0].exception_class, KeyboardInterrupt)
        self.assertEqual(finished(test_tasks.calculate_meaning_of_life.enqueue()).return_value, 42)

    def test_complex_exception(self):
        result = finished(test_tasks.complex_exception.enqueue())

        self.assertEqual(result.status, TaskResultStatus.FAILED)
        with self.assertRaisesMessage(ValueError, "Task failed"):
            result.return_value  # noqa: B018
        self.assertIsNotNone(result.started_at)
        self.assertIsNotNone(result.last_attempted_at)
        self.assertIsNotNone(result.finished_at)
        self.assertGreaterEqual(result.started_at, result.enqueued_at)
        self.assertGreaterEqual(result.finished_at, result.started_at)

        self.assertIsNone(result._return_value)
        self.assertEqual(result.errors[0].exception_class, ValueError)
        self.assertIn('ValueError(ValueError("This task failed"))', result.errors[0].traceback)

        self.assertEqual(result.task, test_tasks.complex_exception)
        self.assertEqual(result.args, [])
        self.assertEqual(result.kwargs, {})

    def test_complex_return_value(self):
        result = finished(test_tasks.complex_return_value.enqueue())

        self.assertEqual(result.status, TaskResultStatus.FAILED)
        self.assertIsNotNone(result.started_at)
        self.assertIsNotNone(result.last_attempted_at)
        self.assertIsNotNone(result.finished_at)
        self.assertGreaterEqual(result.started_at, result.enqueued_at)
        self.assertGreaterEqual(result.finished_at, result.started_at)
        self.assertIsNone(result._return_value)
        self.assertEqual(result.errors[0].exception_class, TypeError)
        self.assertIn("Unsupported type", result.errors[0].traceback)

    def test_result(self):
        result = finished(default_task_backend.enqueue(test_tasks.calculate_meaning_of_life, [], {}))

        self.assertEqual(result.status, TaskResultStatus.SUCCESSFUL)
        self.assertEqual(result.return_value, 42)

    async def test_result_async(self):
        result = await afinished(await default_task_backend.aenqueue(test_tasks.calculate_meaning_of_life, [], {}))

        self.assertEqual(result.status, TaskResultStatus.SUCCESSFUL)
        self.assertEqual(result.return_value, 42)

    async def test_can_get_result(self):
        # Django: test_cannot_get_result. TaskforgeBackend supports_get_result.
        result = await default_task_backend.aenqueue(test_tasks.calculate_meaning_of_life, [], {})
        self.assertIs(default_task_backend.supports_get_result, True)
        self.assertEqual((await default_task_backend.aget_result(result.id)).id, result.id)
        fetched = await default_task_backend.aget_result(result.id)
        self.assertEqual(fetched.task, test_tasks.calculate_meaning_of_life)

    async def test_can_refresh_result(self):
        # Django: test_cannot_refresh_result. TaskforgeBackend supports_get_result.
        result = await default_task_backend.aenqueue(test_tasks.calculate_meaning_of_life, (), {})
        await afinished(result)
        self.assertEqual(result.return_value, 42)

    def test_can_pass_run_after(self):
        # Django: test_cannot_pass_run_after. TaskforgeBackend supports_defer.
        default_task_backend.validate_task(test_tasks.failing_task_value_error.using(run_after=timezone.now()))

    def test_enqueue_logs(self):
        with self.assertLogs("django.tasks", level="DEBUG") as captured_logs:
            result = test_tasks.noop_task.enqueue()

        self.assertEqual(len(captured_logs.output), 1)
        self.assertIn("enqueued", captured_logs.output[0])
        self.assertIn(result.id, captured_logs.output[0])

        finished(result)
        lines = worker_lines(result.id, at_least=2)
        self.assertEqual(len(lines), 2, lines)
        self.assertIn("state=RUNNING", lines[0])
        self.assertIn("state=SUCCESSFUL", lines[1])

    def test_failed_logs(self):
        result = finished(test_tasks.failing_task_value_error.enqueue())

        lines = worker_lines(result.id, at_least=2)
        self.assertEqual(len(lines), 2, lines)
        self.assertIn("state=RUNNING", lines[0])
        self.assertIn("state=FAILED", lines[1])
        # Django logs the FAILED line at ERROR with the exception (test_catches_exception's check).
        self.assertIn("This Task failed due to ValueError", result.errors[0].traceback)

    def test_successful_task_no_none_in_logs(self):
        with self.assertLogs("django.tasks", level="DEBUG") as captured_logs:
            result = test_tasks.noop_task.enqueue()
        finished(result)

        self.assertEqual(result.status, TaskResultStatus.SUCCESSFUL)

        lines = worker_lines(result.id, at_least=2)
        self.assertEqual(len(lines), 2, lines)
        for log_output in captured_logs.output + lines:
            self.assertNotIn("None", log_output)

    def test_takes_context(self):
        result = finished(test_tasks.get_task_id.enqueue())

        self.assertEqual(result.return_value, result.id)

    def test_context(self):
        result = finished(test_tasks.test_context.enqueue(1))
        self.assertEqual(result.status, TaskResultStatus.SUCCESSFUL)

    def test_validate_on_enqueue(self):
        task_with_custom_queue_name = test_tasks.noop_task.using(queue_name="unknown_queue")

        with override_settings(TASKS=tasks_setting(["queue-1"])):
            with self.assertRaisesMessage(InvalidTask, "Queue 'unknown_queue' is not valid for backend"):
                task_with_custom_queue_name.enqueue()

    async def test_validate_on_aenqueue(self):
        task_with_custom_queue_name = test_tasks.noop_task.using(queue_name="unknown_queue")

        with override_settings(TASKS=tasks_setting(["queue-1"])):
            with self.assertRaisesMessage(InvalidTask, "Queue 'unknown_queue' is not valid for backend"):
                await task_with_custom_queue_name.aenqueue()


class WorkerBackendTransactionTestCase(SimpleTestCase):
    databases = {"default"}

    @override_settings(TASKS=tasks_setting())
    def test_doesnt_wait_until_transaction_commit_by_default(self):
        with transaction.atomic():
            result = test_tasks.noop_task.enqueue()

            self.assertIsNotNone(result.enqueued_at)

            # The worker runs it while the transaction is still open.
            self.assertEqual(finished(result).status, TaskResultStatus.SUCCESSFUL)

        self.assertEqual(result.status, TaskResultStatus.SUCCESSFUL)
