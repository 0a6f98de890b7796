"""The package as a user gets it: a wheel under its distribution name, installed into a fresh venv.

Runs ``taskforge demo`` from that venv, and ``mypy --strict`` on user modules
that import the installed package (no ``MYPYPATH``): ``py.typed`` must ship, or
every task would be ``Any`` and the wrong calls would pass.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import venv
from pathlib import Path

import pytest

# The fixture's steps have their own timeouts (build 120 s, install 300 s); the install
# resolves the dependencies from the package index and took 76 s of a loaded suite here,
# so the suite's 120 s per test (setup included) would end it before they do.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(480)]

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
DISTRIBUTION = "taskforge-redis"


def run(*args: str | Path, timeout: float, **kwargs: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(a) for a in args], capture_output=True, text=True, timeout=timeout, **kwargs)  # type: ignore[call-overload, no-any-return]


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv with the wheel built from a copy of the tree; returns its bin directory."""
    base = tmp_path_factory.mktemp("packaging")
    source = base / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    shutil.copytree(ROOT / "taskforge", source / "taskforge", ignore=shutil.ignore_patterns("__pycache__"))
    dist = base / "dist"
    built = run(sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", dist, source, timeout=120)
    assert built.returncode == 0, built.stdout + built.stderr
    (wheel,) = dist.glob("*.whl")
    assert wheel.name.startswith(DISTRIBUTION.replace("-", "_") + "-"), wheel.name
    env_dir = base / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    bin_dir = env_dir / "bin"
    # pip's cache (shared with every other install on this machine) keeps this to seconds.
    # A PYTHONPATH naming a tree with an installed-metadata folder (``pip install .`` leaves one) would
    # make pip find the distribution already there and install nothing.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = run(bin_dir / "python", "-m", "pip", "install", "-q", wheel, timeout=300, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    return bin_dir


def test_installs_under_its_distribution_name_with_py_typed(installed: Path) -> None:
    code = (
        "import importlib.metadata as m, importlib.resources as r, taskforge\n"
        f"print(m.version({DISTRIBUTION!r}), r.files('taskforge').joinpath('py.typed').is_file(), taskforge.__file__)"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # a PYTHONPATH naming the tree would win
    out = run(installed / "python", "-c", code, timeout=60, cwd=installed, env=env)
    assert out.returncode == 0, out.stderr
    version, typed, where = out.stdout.split()
    assert typed == "True", "py.typed is missing from the wheel"
    assert str(ROOT) not in where, f"imported the source tree, not the installed package: {where}"


def test_demo_runs_from_the_installed_package(installed: Path, tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("TASKFORGE_BROKER_URL", "PYTHONPATH")}
    out = run(installed / "taskforge", "demo", timeout=90, cwd=tmp_path, env=env, stdin=subprocess.DEVNULL)
    assert out.returncode == 0, out.stdout + out.stderr
    assert re.search(r"(\d+)/\1 jobs finished", out.stdout), out.stdout
    # What it points to for a start is a file the installed package carries (a clone's examples/ is not).
    app_file = Path(next(line.strip() for line in out.stdout.splitlines() if line.endswith("demo_app.py")))
    assert app_file.name == "demo_app.py" and app_file.is_file() and str(ROOT) not in str(app_file), out.stdout


def mypy(installed: Path, module: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    shutil.copy(HERE / module, tmp_path / module)
    env = {k: v for k, v in os.environ.items() if k not in ("MYPYPATH", "PYTHONPATH")}
    args = ["--strict", "--no-incremental", "--python-executable", installed / "python", module]
    return run(sys.executable, "-m", "mypy", *args, timeout=120, cwd=tmp_path, env=env)


def test_mypy_strict_accepts_correct_calls(installed: Path, tmp_path: Path) -> None:
    out = mypy(installed, "typed_good.py", tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr


def test_mypy_strict_rejects_each_wrong_call(installed: Path, tmp_path: Path) -> None:
    out = mypy(installed, "typed_wrong.py", tmp_path)
    assert "missing library stubs or py.typed" not in out.stdout, out.stdout
    lines = (HERE / "typed_wrong.py").read_text().splitlines()
    wanted = {n for n, line in enumerate(lines, 1) if line.endswith("# wrong")}
    rejected = {int(m) for m in re.findall(r"^typed_wrong\.py:(\d+): error", out.stdout, re.M)}
    assert len(wanted) == 12
    assert rejected == wanted, out.stdout
