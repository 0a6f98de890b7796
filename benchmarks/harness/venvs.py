"""One virtualenv per library under the cache dir, installed from PyPI (or, for taskforge, the repo).

Peers cannot share an environment (Celery's kombu wants redis-py >= 6.4,
arq wants < 6), and none of them may touch the project's own venv.
A venv is (re)installed only when its requirement list changed; taskforge's
is reinstalled whenever its source tree changed, so every run measures the
code as it is in the working tree at that moment.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

PIP_TIMEOUT = 900
MARKER = "bench-installed.json"
# What `pip install <repo root>` needs from the tree. Copied first, because
# pip builds in place and would write build/ and *.egg-info into the repo.
TASKFORGE_FILES = ("pyproject.toml", "README.md", "LICENSE", "CHANGELOG.md")


class InstallError(Exception):
    """A peer could not be installed; the message says why (last lines of pip's output)."""


def source_fingerprint(repo: Path) -> str:
    """A short hash of taskforge's source files and packaging: which code a result measured."""
    digest = hashlib.sha256()
    paths = sorted(p for p in (repo / "taskforge").rglob("*") if p.is_file() and "__pycache__" not in p.parts)
    for path in [repo / "pyproject.toml", *paths]:
        digest.update(str(path.relative_to(repo)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:12]


def snapshot_taskforge(repo: Path, cache: Path) -> tuple[Path, str]:
    """Copy the installable part of the repo into the cache; returns (copy, fingerprint)."""
    dest = cache / "src" / "taskforge"
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    for name in TASKFORGE_FILES:
        if (repo / name).exists():
            shutil.copy2(repo / name, dest / name)
    shutil.copytree(repo / "taskforge", dest / "taskforge", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    return dest, source_fingerprint(dest)  # of the copy: the tree may change while we copy


def _run_pip(python: Path, args: list[str], log: Path) -> None:
    cmd = [str(python), "-m", "pip", "install", "--disable-pip-version-check", *args]
    with log.open("a") as out:
        out.write(f"$ {' '.join(cmd)}\n")
        out.flush()
        try:
            proc = subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT, timeout=PIP_TIMEOUT)
        except subprocess.TimeoutExpired:
            raise InstallError(f"pip install timed out after {PIP_TIMEOUT} s (log: {log})") from None
    if proc.returncode != 0:
        lines = [ln for ln in log.read_text().splitlines() if ln.strip() and "is ignored" not in ln]
        raise InstallError(f"pip install {' '.join(args)} failed: " + " | ".join(lines[-4:]) + f" (log: {log})")


def build_requires(src: Path) -> list[str]:
    """The [build-system] requires of a source tree (so it can be rebuilt without build isolation)."""
    try:
        import tomllib
    except ImportError:  # Python 3.10: fall back to pip's isolated builds
        return []
    data = tomllib.loads((src / "pyproject.toml").read_text())
    return list(data.get("build-system", {}).get("requires", []))


def ensure_venv(venv: Path, requirements: list[str], base_python: str, log: Path, force_key: str = "") -> Path:
    """The venv's python, after making sure ``requirements`` are installed in it.

    ``force_key``: the source fingerprint of a local tree, ``requirements[0]``
    (taskforge). When it changed, only that tree is reinstalled, without
    build isolation: an isolated build fetches setuptools afresh every time,
    which costs ten seconds a run.
    """
    python = venv / "bin" / "python"
    marker = venv / MARKER
    wanted = {"requirements": requirements, "python": base_python}
    state = json.loads(marker.read_text()) if marker.exists() else {}
    local = Path(requirements[0]) if force_key else None
    no_isolation = ["--no-build-isolation"] if local and build_requires(local) else []
    if python.exists() and state.get("requirements") == requirements and state.get("python") == base_python:
        if local and state.get("force_key") != force_key:
            _run_pip(python, ["--no-deps", "--force-reinstall", *no_isolation, str(local)], log)
            marker.write_text(json.dumps({**wanted, "force_key": force_key}))
        return python
    if not python.exists():
        venv.parent.mkdir(parents=True, exist_ok=True)
        proc = subprocess.run([base_python, "-m", "venv", str(venv)], capture_output=True, text=True, timeout=300)
        if proc.returncode != 0:
            raise InstallError(f"python -m venv failed: {proc.stderr.strip()[-300:]}")
    if no_isolation and local:
        _run_pip(python, build_requires(local), log)
    _run_pip(python, list(requirements), log)
    marker.write_text(json.dumps({**wanted, "force_key": force_key}))
    return python


def uninstall(python: Path, distribution: str, log: Path) -> None:
    """Remove ``distribution`` from a venv if a dependency pulled it in (``--hiredis no``)."""
    cmd = [str(python), "-m", "pip", "uninstall", "--disable-pip-version-check", "-y", distribution]
    with log.open("a") as out:
        subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT, timeout=PIP_TIMEOUT)


def versions(python: Path, distributions: list[str]) -> dict[str, str]:
    """Installed versions of ``distributions`` in a venv, plus its Python."""
    code = (
        "import importlib.metadata as m, json, platform, sys\n"
        "out = {'python': platform.python_version()}\n"
        "for d in sys.argv[1:]:\n"
        "    try: out[d] = m.version(d)\n"
        "    except m.PackageNotFoundError: out[d] = 'missing'\n"
        "print(json.dumps(out))\n"
    )
    proc = subprocess.run([str(python), "-c", code, *distributions], capture_output=True, text=True, timeout=60)
    if proc.returncode != 0:
        return {"error": proc.stderr.strip()[-200:]}
    return json.loads(proc.stdout)


def default_base_python() -> str:
    """The interpreter the venvs are built from: the one running the harness, resolved past any venv."""
    return getattr(sys, "_base_executable", None) or sys.executable
