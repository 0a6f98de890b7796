"""A task's name is the same in a producer run as a script and in a worker that imports it.

Otherwise ``python myapp.py`` would queue jobs for ``__main__.send_email``, a
task no worker has. Each case runs real interpreters in a temp directory.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

APP = """
from taskforge import TaskForge

app = TaskForge("names", broker="memory://")


@app.task
def send_email(to):
    return to


@app.task(queue="mail", priority="high")
def notify():
    pass


class Reports:
    @staticmethod
    @app.task
    def monthly():
        pass


if __name__ == "__main__":
    print(" ".join(sorted(app.tasks)))
"""

PRINT_IMPORTED = "import {module} as m; print(' '.join(sorted(m.app.tasks)))"
PRINT_LOADED = "from taskforge.loader import load_app; print(' '.join(sorted(load_app('{spec}').tasks)))"


def python(cwd: Path, *args: str) -> str:
    # PYTHONSAFEPATH would keep the script's directory off sys.path, unlike a user's shell.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONSAFEPATH"}
    done = subprocess.run([sys.executable, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, f"python {' '.join(args)} failed:\n{done.stderr}"
    return done.stdout.strip()


def names(module: str) -> str:
    return " ".join(sorted(f"{module}.{t}" for t in ("send_email", "notify", "Reports.monthly")))


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "myapp.py").write_text(APP)
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "mod.py").write_text(APP)
    (package / "sub" / "__init__.py").write_text("")
    (package / "sub" / "deep.py").write_text(APP)
    (package / "__main__.py").write_text(APP)
    return tmp_path


def test_script_and_worker_agree(project: Path) -> None:
    as_script = python(project, "myapp.py")
    assert as_script == names("myapp"), "run as a script, tasks must not be named __main__.*"
    assert python(project, "-c", PRINT_IMPORTED.format(module="myapp")) == as_script
    assert python(project, "-c", PRINT_LOADED.format(spec="myapp:app")) == as_script
    assert python(project, "-c", PRINT_LOADED.format(spec="myapp")) == as_script


def test_script_run_from_another_directory(project: Path) -> None:
    assert python(project.parent, str(project / "myapp.py")) == names("myapp")
    assert python(Path("/"), os.path.relpath(project / "myapp.py", "/")) == names("myapp")


def test_module_run_with_dash_m(project: Path) -> None:
    assert python(project, "-m", "myapp") == names("myapp")


@pytest.mark.parametrize("module", ["pkg.mod", "pkg.sub.deep"])
def test_module_in_a_package_run_with_dash_m(project: Path, module: str) -> None:
    as_main = python(project, "-m", module)
    assert as_main == names(module)
    assert python(project, "-c", PRINT_IMPORTED.format(module=module)) == as_main
    assert python(project, "-c", PRINT_LOADED.format(spec=f"{module}:app")) == as_main


def test_package_main_run_with_dash_m(project: Path) -> None:
    """``python -m pkg`` runs pkg/__main__.py, which a worker can only import as ``pkg.__main__``."""
    as_main = python(project, "-m", "pkg")
    assert python(project, "-c", PRINT_LOADED.format(spec="pkg.__main__:app")) == as_main
    assert as_main == names("pkg.__main__")


def test_explicit_names_are_kept(project: Path) -> None:
    (project / "named.py").write_text(
        "from taskforge import TaskForge\n"
        "app = TaskForge('n', broker='memory://')\n"
        "@app.task(name='billing.charge')\n"
        "def charge(): pass\n"
        "if __name__ == '__main__':\n"
        "    print(charge.name)\n"
    )
    assert python(project, "named.py") == "billing.charge"
