"""When the worker forks its children from a server, and when it spawns them: a database connection the
app's import opened (Django) would be one socket shared by every forked child, so it spawns then."""

from __future__ import annotations

import sys
import types
from typing import Any

import pytest

from taskforge.worker import forkserver


class Connections:
    def __init__(self, *opened: Any, broken: bool = False) -> None:
        self.opened = opened
        self.broken = broken

    def all(self, initialized_only: bool = False) -> list[Any]:
        assert initialized_only  # never open a connection by asking
        if self.broken:
            raise RuntimeError("settings are not configured")
        return [types.SimpleNamespace(connection=c) for c in self.opened]


def django_db(monkeypatch: pytest.MonkeyPatch, connections: Connections) -> None:
    module = types.ModuleType("django.db")
    module.connections = connections  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "django.db", module)


def test_without_django_nothing_is_in_the_way(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(sys.modules, "django.db", raising=False)
    assert not forkserver.django_connected()


def test_django_with_only_unopened_connections_still_forks(monkeypatch: pytest.MonkeyPatch) -> None:
    django_db(monkeypatch, Connections(None, None))
    assert not forkserver.django_connected()


@pytest.mark.parametrize("connections", [Connections(None, object()), Connections(broken=True)])
def test_an_open_database_connection_or_doubt_means_spawn(
    monkeypatch: pytest.MonkeyPatch, connections: Connections
) -> None:
    django_db(monkeypatch, connections)
    assert forkserver.django_connected()
    assert not forkserver.usable()
