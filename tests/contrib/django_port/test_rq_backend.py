"""django-tasks' RQ backend tests: what a Redis-queue backend must do, on ``TaskforgeBackend``.

Ported from django-tasks at 17bd95f3594257c091c7c296b8bdc3888b71d342,
``tests/tests/test_rq_backend.py`` (BSD-3-Clause, see LICENSE in this
folder). The original ran RQ on fakeredis and a ``SimpleWorker`` in-process
(``run_worker``); here jobs are on the test Redis and the package's real
``taskforge worker`` runs them, so ``run_worker(result)`` waits for it to
finish those results. Tests that need a job to stay READY (the original's
worker had not run yet) store it where no worker runs it: on ``memory://``
(taskforge's in-process broker, as the original's fakeredis) or on the
``unserved`` queue. ``django_tasks`` imports are ``django.tasks``; RQ's job
lists are taskforge's job records. Not ported, as they test RQ and
django-rq rather than a backend's contract (docs/tutorials/django.md):
``test_uses_rq_queues_for_queue_names`` (queue names from ``RQ_QUEUES``),
``test_rq_app_missing`` (``django_rq`` in ``INSTALLED_APPS``),
``test_exception_classes_pop_empty_list_bug`` (RQ job meta), and
``test_metadata`` / ``test_save_metadata`` (``TaskContext.metadata``, an API
of django-tasks that Django 6.1 has not).
"""

from __future__ import annotations

import json
import uuid

import pytest
from asgiref.sync import async_to_sync
from django.core.exceptions import SuspiciousOperation
from django.db import transaction
from django.tasks import TaskResultStatus, default_task_backend, task_backends
from django.tasks.exceptions import InvalidTask, TaskResultDoesNotExist
from django.test import SimpleTestCase, override_settings
from django.urls import reverse

from taskforge.contrib.django import RUN, TaskforgeBackend
from taskforge.job import JobState
from tests.conftest import REDIS_URL

from . import tasks as test_tasks
from .support import BACKEND, difference, finished, tasks_setting, worker_lines

pytestmark = [pytest.mark.redis, pytest.mark.slow]

MEMORY = {"default": {"BACKEND": BACKEND, "QUEUES": ["default", "queue-1"], "OPTIONS": {"BROKER": "memory://"}}}


@override_settings(TASKS=tasks_setting(["default", "queue-1", "unserved", "unserved-1"]))
class RQBackendTestCase(SimpleTestCase):
    databases = {"default"}

    def run_worker(self, *results) -> None:
        for result in results:
            finished(result)

    def test_using_correct_backend(self) -> None:
        self.assertEqual(default_task_backend, task_backends["default"])
        self.assertIsInstance(task_backends["default"], TaskforgeBackend)
        self.assertEqual(default_task_backend.alias, "default")
        self.assertEqual(default_task_backend.options, {"BROKER": REDIS_URL})

    def test_enqueue_task(self) -> None:
        for task in [test_tasks.noop_task, test_tasks.noop_task_async]:
            with self.subTest(task):
                result = task.enqueue(1, two=3)

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

    async def test_enqueue_task_async(self) -> None:
        for task in [test_tasks.noop_task, test_tasks.noop_task_async]:
            with self.subTest(task):
                result = await task.aenqueue()

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

    def _catches_exception(self, task, exception, message) -> None:
        result = task.enqueue()

        self.run_worker(result)

        self.assertEqual(result.status, TaskResultStatus.FAILED)
        with self.assertRaisesMessage(ValueError, "Task failed"):
            result.return_value  # noqa: B018
        self.assertTrue(result.is_finished)
        self.assertIsNotNone(result.started_at)
        self.assertIsNotNone(result.last_attempted_at)
        self.assertIsNotNone(result.finished_at)
        self.assertGreaterEqual(result.started_at, result.enqueued_at)
        self.assertGreaterEqual(result.finished_at, result.started_at)
        self.assertEqual(result.errors[0].exception_class, exception)
        traceback = result.errors[0].traceback
        self.assertTrue(traceback and traceback.endswith(f"{exception.__name__}: {message}\n"), traceback)
        self.assertEqual(result.task, task)
        self.assertEqual(result.args, [])
        self.assertEqual(result.kwargs, {})
        self.assertEqual(result.attempts, 1)

    def test_catches_exception(self) -> None:
        # django-tasks' task text says "Task"; Django 6.1's, used here, too.
        self._catches_exception(test_tasks.failing_task_value_error, ValueError, "This Task failed due to ValueError")

    def test_catches_exception_system_exit(self) -> None:
        self._catches_exception(test_tasks.failing_task_system_exit, SystemExit, "This Task failed due to SystemExit")

    def test_complex_exception(self) -> None:
        result = test_tasks.complex_exception.enqueue()

        self.run_worker(result)

        self.assertEqual(result.status, TaskResultStatus.FAILED)
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
        self.assertEqual(result.attempts, 1)

    def test_complex_return_value(self) -> None:
        # RQ names its own payload; Django's contract (the ImmediateBackend) is a TypeError.
        result = test_tasks.complex_return_value.enqueue()

        self.run_worker(result)

        self.assertEqual(result.status, TaskResultStatus.FAILED)
        self.assertIsNotNone(result.started_at)
        self.assertIsNotNone(result.last_attempted_at)
        self.assertIsNotNone(result.finished_at)
        self.assertGreaterEqual(result.started_at, result.enqueued_at)
        self.assertGreaterEqual(result.finished_at, result.started_at)

        self.assertIsNone(result._return_value)
        self.assertEqual(result.errors[0].exception_class, TypeError)

    def test_get_result(self) -> None:
        result = default_task_backend.enqueue(test_tasks.noop_task.using(queue_name="unserved"), [], {})

        new_result = default_task_backend.get_result(result.id)

        self.assertEqual(result, new_result)

    async def test_get_result_async(self) -> None:
        result = await default_task_backend.aenqueue(test_tasks.noop_task.using(queue_name="unserved"), [], {})

        new_result = await default_task_backend.aget_result(result.id)

        self.assertEqual(result, new_result)

    def test_refresh_result(self) -> None:
        result = default_task_backend.enqueue(test_tasks.calculate_meaning_of_life, (), {})

        self.assertEqual(result.status, TaskResultStatus.READY)
        self.assertFalse(result.is_finished)
        self.assertIsNone(result.started_at)
        self.assertIsNone(result.last_attempted_at)
        self.assertIsNone(result.finished_at)
        self.assertEqual(result.attempts, 0)

        self.run_worker(result)  # refreshes it

        self.assertIsNotNone(result.started_at)
        self.assertIsNotNone(result.last_attempted_at)
        self.assertIsNotNone(result.finished_at)
        self.assertEqual(result.status, TaskResultStatus.SUCCESSFUL)
        self.assertTrue(result.is_finished)
        self.assertEqual(result.return_value, 42)
        self.assertEqual(result.attempts, 1)

    def test_refresh_result_async(self) -> None:
        result = async_to_sync(default_task_backend.aenqueue)(test_tasks.calculate_meaning_of_life, (), {})

        self.assertEqual(result.status, TaskResultStatus.READY)
        self.assertFalse(result.is_finished)
        self.assertIsNone(result.started_at)
        self.assertIsNone(result.last_attempted_at)
        self.assertIsNone(result.finished_at)
        self.assertEqual(result.attempts, 0)

        self.run_worker(result)
        async_to_sync(result.arefresh)()

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
            SuspiciousOperation,
            f"Task {job.id} does not point to a Task (subprocess.check_output)",
        ):
            default_task_backend.get_result(job.id)

    def test_check(self) -> None:
        errors = list(default_task_backend.check())

        self.assertEqual(len(errors), 0, errors)

    @difference("not applicable: TaskforgeBackend is not a Django app; there is no INSTALLED_APPS entry to miss")
    def test_rq_app_missing(self) -> None:
        pass

    @override_settings(TASKS=tasks_setting())
    def test_doesnt_wait_until_transaction_commit(self) -> None:
        app = default_task_backend.app
        with transaction.atomic():
            result = test_tasks.noop_task.using(queue_name="unserved").enqueue()

            self.assertIsNotNone(result.enqueued_at)

            self.assertEqual(app.job(result.id).info().state, JobState.PENDING)

        self.assertEqual(app.job(result.id).info().state, JobState.PENDING)

    def test_enqueue_logs(self) -> None:
        with self.assertLogs("django.tasks", level="DEBUG") as captured_logs:
            result = test_tasks.noop_task.enqueue()

        self.assertEqual(len(captured_logs.output), 1)
        self.assertIn("enqueued", captured_logs.output[0])
        self.assertIn(result.id, captured_logs.output[0])

    def test_started_finished_logs(self) -> None:
        result = test_tasks.noop_task.enqueue()

        self.run_worker(result)
        captured_logs = worker_lines(result.id, at_least=2)

        self.assertEqual(len(captured_logs), 2, captured_logs)
        self.assertIn("state=RUNNING", captured_logs[0])
        self.assertIn("state=SUCCESSFUL", captured_logs[1])

    def test_failed_logs(self) -> None:
        result = test_tasks.failing_task_value_error.enqueue()

        self.run_worker(result)
        captured_logs = worker_lines(result.id, at_least=2)

        self.assertEqual(len(captured_logs), 2, captured_logs)
        self.assertIn("state=RUNNING", captured_logs[0])
        self.assertIn("state=FAILED", captured_logs[1])

    def test_queue_isolation(self) -> None:
        default_task = test_tasks.noop_task.using(queue_name="unserved").enqueue()
        other_task = test_tasks.noop_task.using(queue_name="unserved-1").enqueue()

        default_task_backend.get_result(default_task.id)
        default_task_backend.get_result(other_task.id)

        app = default_task_backend.app
        self.assertEqual(app.job(default_task.id).info().queue, "unserved")
        self.assertEqual(app.job(other_task.id).info().queue, "unserved-1")
        self.assertEqual(app.job(other_task.id).info().state, JobState.PENDING)

    @difference("not applicable: taskforge has no queue list like RQ_QUEUES to take QUEUES from")
    def test_uses_rq_queues_for_queue_names(self) -> None:
        pass

    @difference("taskforge has no list of configured queues like RQ_QUEUES: any valid queue name is served")
    @override_settings(TASKS=tasks_setting(["queue-2"]))
    def test_unknown_queue_name(self) -> None:
        errors = list(default_task_backend.check())

        self.assertEqual(len(errors), 1)
        self.assertIn("queue-2", errors[0].hint)

    def test_takes_context(self) -> None:
        result = test_tasks.get_task_id.enqueue()

        self.run_worker(result)

        result.refresh()

        self.assertEqual(result.return_value, result.id)

    def test_context(self) -> None:
        result = test_tasks.test_context.enqueue(1)
        self.run_worker(result)
        result.refresh()
        self.assertEqual(result.status, TaskResultStatus.SUCCESSFUL)

    @difference("not applicable: TaskContext.metadata is django-tasks' API; Django 6.1 has none")
    def test_metadata(self) -> None:
        pass

    @difference("not applicable: TaskContext.save_metadata() is django-tasks' API; Django 6.1 has none")
    def test_save_metadata(self) -> None:
        pass

    @difference("not applicable: a regression test of RQ job meta (_django_tasks_exceptions)")
    def test_exception_classes_pop_empty_list_bug(self) -> None:
        pass

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
