"""Django's tests of custom backends, with the custom backends subclassing ``TaskforgeBackend``.

Ported from Django 6.1.3, ``tests/tasks/test_custom_backend.py``
(BSD-3-Clause, see LICENSE in this folder). Django's custom backends subclass
``BaseTaskBackend``; here they subclass ``TaskforgeBackend``, so a project can
extend it the way Django documents: the custom ``enqueue`` logs, then queues
through ``TaskforgeBackend`` (and the package's worker runs the task);
``CustomTaskBackend`` keeps its ``task_class``. Changes: "does not support
priority" asserts the opposite, as ``TaskforgeBackend`` supports priorities;
the abstract-``enqueue`` test has no counterpart (a subclass of
``TaskforgeBackend`` inherits its ``enqueue``).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from unittest import mock

import pytest
from django.tasks import Task, default_task_backend, task, task_backends
from django.tasks.exceptions import InvalidTask
from django.test import SimpleTestCase, override_settings

from taskforge.contrib.django import TaskforgeBackend
from tests.conftest import REDIS_URL

from . import tasks as test_tasks
from .support import difference, finished

pytestmark = [pytest.mark.redis, pytest.mark.slow]


class CustomBackend(TaskforgeBackend):
    supports_priority = False

    def __init__(self, alias, params):
        super().__init__(alias, params)
        self.prefix = self.options.get("prefix", "")

    def enqueue(self, *args, **kwargs):
        logger = logging.getLogger(__name__)
        logger.info(f"{self.prefix}Task enqueued.")
        return super().enqueue(*args, **kwargs)


@dataclass(frozen=True, slots=True, kw_only=True)
class CustomTask(Task):
    foo: int = 3
    bar: int = 300


class CustomTaskBackend(TaskforgeBackend):
    task_class = CustomTask
    supports_priority = True


@override_settings(
    TASKS={
        "default": {
            "BACKEND": f"{CustomBackend.__module__}.{CustomBackend.__qualname__}",
            "OPTIONS": {"prefix": "PREFIX: ", "BROKER": REDIS_URL},
        },
    }
)
class CustomBackendTestCase(SimpleTestCase):
    def test_using_correct_backend(self):
        self.assertEqual(default_task_backend, task_backends["default"])
        self.assertIsInstance(task_backends["default"], CustomBackend)
        self.assertEqual(default_task_backend.alias, "default")
        self.assertEqual(default_task_backend.options, {"prefix": "PREFIX: ", "BROKER": REDIS_URL})

    @mock.patch.multiple(CustomBackend, supports_async_task=False)
    def test_enqueue_async_task_on_non_async_backend(self):
        with self.assertRaisesMessage(InvalidTask, "Backend does not support async Tasks."):
            default_task_backend.validate_task(test_tasks.noop_task_async)

    def test_backend_does_not_support_priority(self):
        # A subclass may turn a feature off, and Django then refuses it.
        with self.assertRaisesMessage(InvalidTask, "Backend does not support setting priority of tasks."):
            test_tasks.noop_task.using(priority=10)

    def test_backend_supports_priority(self):
        # Django's CustomBackend did not support priorities; TaskforgeBackend does.
        with mock.patch.multiple(CustomBackend, supports_priority=True):
            self.assertEqual(test_tasks.noop_task.using(priority=10).priority, 10)

    def test_options(self):
        with self.assertLogs(__name__, level="INFO") as captured_logs:
            result = test_tasks.noop_task.enqueue()
        self.assertEqual(len(captured_logs.output), 1)
        self.assertIn("PREFIX: Task enqueued", captured_logs.output[0])
        self.assertEqual(finished(result).status, "SUCCESSFUL")

    @difference("not applicable: a subclass of TaskforgeBackend inherits its enqueue()")
    def test_no_enqueue(self):
        with self.assertRaisesMessage(
            TypeError,
            "Can't instantiate abstract class CustomBackendNoEnqueue "
            "without an implementation for abstract method 'enqueue'",
        ):
            test_tasks.noop_task.using(backend="no_enqueue")


@override_settings(
    TASKS={
        "default": {
            "BACKEND": f"{CustomTaskBackend.__module__}.{CustomTaskBackend.__qualname__}",
            "QUEUES": ["default", "high"],
            "OPTIONS": {"BROKER": REDIS_URL},
        },
    }
)
class CustomTaskTestCase(SimpleTestCase):
    def test_custom_task_default_values(self):
        my_task = task()(test_tasks.noop_task.func)

        self.assertIsInstance(my_task, CustomTask)
        self.assertEqual(my_task.foo, 3)
        self.assertEqual(my_task.bar, 300)

    def test_custom_task_with_custom_values(self):
        my_task = task(foo=5, bar=600)(test_tasks.noop_task.func)

        self.assertIsInstance(my_task, CustomTask)
        self.assertEqual(my_task.foo, 5)
        self.assertEqual(my_task.bar, 600)

    def test_custom_task_with_standard_and_custom_values(self):
        my_task = task(priority=10, queue_name="high", foo=10, bar=1000)(test_tasks.noop_task.func)

        self.assertIsInstance(my_task, CustomTask)
        self.assertEqual(my_task.priority, 10)
        self.assertEqual(my_task.queue_name, "high")
        self.assertEqual(my_task.foo, 10)
        self.assertEqual(my_task.bar, 1000)
        self.assertFalse(my_task.takes_context)
        self.assertIsNone(my_task.run_after)

    def test_custom_task_invalid_kwarg(self):
        with self.assertRaises(TypeError):
            task(unknown_param=123)(test_tasks.noop_task.func)
