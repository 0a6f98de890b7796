"""The broker's roles: the async ones are the sync ones awaited, and none grows into a catch-all again.

mypy checks each role class against its protocol (``compose.Broker`` and
``aio.AsyncBroker`` type their roles by them); these tests hold each sync
protocol and its async twin together, name for name and parameter for
parameter, which no type checker can say.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from typing import Any

import pytest

import taskforge.broker as broker_package
from taskforge.broker import (
    AsyncJobsRole,
    AsyncWorkflowRole,
    Broker,
    Claims,
    ClaimsRole,
    Cleanup,
    CleanupRole,
    Inspection,
    InspectionRole,
    Jobs,
    JobsRole,
    LedgerRole,
    WorkflowRole,
    WorkflowStore,
)
from taskforge.broker.aio import AsyncBroker, AsyncJobs
from taskforge.broker.aio_roles import AsyncLedgerRole
from taskforge.broker.connection import connect
from taskforge.broker.workflows import AsyncWorkflowStore

TWINS = [(JobsRole, AsyncJobsRole), (WorkflowRole, AsyncWorkflowRole)]
ROLE_LIMIT = 25  # public methods (properties count) a class of the package may expose


def members(protocol: type) -> dict[str, Any]:
    """A protocol's public methods and properties, its bases' included."""
    found: dict[str, Any] = {}
    for klass in reversed(protocol.__mro__):
        for name, value in vars(klass).items():
            if not name.startswith("_") and (callable(value) or isinstance(value, property)):
                found[name] = value
    return found


def shape(function: Any) -> list[tuple[str, Any, Any, Any]]:
    return [(p.name, p.kind, p.default, p.annotation) for p in inspect.signature(function).parameters.values()]


@pytest.mark.parametrize(("sync", "aio"), TWINS, ids=[sync.__name__ for sync, _ in TWINS])
def test_each_async_role_is_its_sync_twin_awaited(sync: type, aio: type) -> None:
    ours, theirs = members(sync), members(aio)
    assert sorted(ours) == sorted(theirs)
    for name, method in ours.items():
        twin = theirs[name]
        assert inspect.iscoroutinefunction(twin) and not inspect.iscoroutinefunction(method), name
        assert shape(twin) == shape(method), name
        assert inspect.signature(twin).return_annotation == inspect.signature(method).return_annotation, name


@pytest.mark.parametrize(
    ("role", "protocol"),
    [
        (Jobs, JobsRole),
        (Claims, ClaimsRole),
        (WorkflowStore, LedgerRole),
        (Inspection, InspectionRole),
        (Cleanup, CleanupRole),
        (AsyncJobs, AsyncJobsRole),
        (AsyncWorkflowStore, AsyncLedgerRole),
    ],
)
def test_each_role_offers_what_its_protocol_names_with_the_same_parameters(role: type, protocol: type) -> None:
    for name, method in members(protocol).items():
        if isinstance(method, property):
            continue  # attributes set in __init__; mypy checks their types
        assert shape(getattr(role, name)) == shape(method), f"{role.__name__}.{name}"
    extra = {name for name in members(role)} - set(members(protocol))
    assert not extra, f"{role.__name__} offers {sorted(extra)} its protocol does not name"


def test_no_class_of_the_broker_package_is_a_catch_all() -> None:
    """What a class defines and inherits from the package (not from ``str`` or ``tuple``), properties too."""
    for info in pkgutil.iter_modules(broker_package.__path__):
        module = importlib.import_module(f"taskforge.broker.{info.name}")
        for klass in vars(module).values():
            if inspect.isclass(klass) and klass.__module__ == module.__name__:
                own = [c for c in klass.__mro__ if c.__module__.startswith("taskforge.")]
                public = {n for c in own for n, v in vars(c).items() if not n.startswith("_") and inspect.isfunction(v)}
                public |= {n for c in own for n, v in vars(c).items() if isinstance(v, property)}
                assert len(public) <= ROLE_LIMIT, f"{klass.__qualname__}: {len(public)} public methods"


def test_the_brokers_are_their_roles_and_a_ping() -> None:
    broker = Broker(connect("memory://"), "memory://", 60_000, 60_000)
    assert {n for n in dir(broker) if not n.startswith("_") and callable(getattr(broker, n))} >= {"ping"}
    # Besides its roles, a broker drives the plans that span several of them (workflows/delivery.py).
    assert [n for n in dir(Broker) if not n.startswith("_")] == ["drive", "ping"]
    assert [n for n in dir(AsyncBroker) if not n.startswith("_")] == ["abandon", "close", "drive", "open"]
    # Every role shares the broker's one client and scripts.
    for role in (broker.jobs, broker.claims, broker.ledger, broker.inspection, broker.cleanup):
        assert role.client is broker.client  # type: ignore[attr-defined]
    assert broker.claims.hints is broker.jobs.hints  # type: ignore[attr-defined]
