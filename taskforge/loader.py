"""Find the user's app from ``module:attribute``, with errors a user can act on."""

from __future__ import annotations

import importlib
import os
import sys
import traceback
from typing import TYPE_CHECKING

from .errors import AppNotFound, TaskforgeError

if TYPE_CHECKING:
    from .app import TaskForge


def _user_traceback(exc: BaseException) -> str:
    """The traceback from the user's module down, without our importlib frames."""
    frames = traceback.extract_tb(exc.__traceback__)
    keep = [f for f in frames if "importlib" not in f.filename and not f.filename.endswith("loader.py")]
    lines = ["Traceback (most recent call last):\n", *traceback.format_list(keep)]
    lines += traceback.format_exception_only(type(exc), exc)
    return "".join(lines)


def load_app(spec: str) -> TaskForge:
    """Import ``module:attr`` (or ``module``, attribute ``app``) with the cwd on sys.path."""
    from .app import TaskForge

    module_name, _, attr = spec.partition(":")
    attr = attr or "app"
    if not module_name or not all(part.isidentifier() for part in module_name.split(".")):
        raise AppNotFound(f"APP {spec!r} is not of the form module:attribute (e.g. myapp:app)")
    cwd = os.getcwd()
    if cwd not in sys.path and "" not in sys.path:
        sys.path.insert(0, cwd)
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name and (module_name == exc.name or module_name.startswith(exc.name + ".")):
            raise AppNotFound(
                f"cannot import module {module_name!r} (APP {spec!r}): no such module in {cwd} "
                "or on sys.path; run from the directory that holds it"
            ) from None
        raise AppNotFound(f"importing {module_name!r} failed: {exc}", details=_user_traceback(exc)) from None
    except Exception as exc:  # the user's module raised while importing
        raise AppNotFound(
            f"importing {module_name!r} failed: {type(exc).__name__}: {exc}", details=_user_traceback(exc)
        ) from None
    try:
        app = getattr(module, attr)
    except AttributeError:
        raise AppNotFound(f"module {module_name!r} has no attribute {attr!r} (APP {spec!r})") from None
    except Exception as exc:  # a module __getattr__ that builds the app (taskforge.contrib.django) raised
        # Taskforge's own errors say what to do; anything else gets the traceback of the code that raised.
        details = None if isinstance(exc, TaskforgeError) else _user_traceback(exc)
        raise AppNotFound(
            f"getting {attr!r} from {module_name!r} failed: {type(exc).__name__}: {exc}", details=details
        ) from None
    if not isinstance(app, TaskForge):
        raise AppNotFound(f"{spec!r} is a {type(app).__name__}, not a TaskForge app")
    return app


def import_included(app: TaskForge) -> None:
    """Import the modules the app's ``include=`` names, as a worker does at start, so their tasks register.

    A module that cannot be imported is named with its cause: a worker that
    started without it would dead-letter every job of its tasks.
    """
    for name in app.include:
        try:
            importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name and (name == exc.name or name.startswith(exc.name + ".")):
                raise AppNotFound(
                    f"app {app.name!r} has include={list(app.include)!r}, but module {name!r} "
                    f"cannot be imported: no such module in {os.getcwd()} or on sys.path"
                ) from None
            raise AppNotFound(
                f"importing {name!r} (include= of app {app.name!r}) failed: {exc}", details=_user_traceback(exc)
            ) from None
        except Exception as exc:  # the user's module raised while importing
            raise AppNotFound(
                f"importing {name!r} (include= of app {app.name!r}) failed: {type(exc).__name__}: {exc}",
                details=_user_traceback(exc),
            ) from None
