"""A peer as the harness sees it: its SPEC (read without importing the module), venv and command lines."""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


def read_spec(path: Path) -> dict[str, Any]:
    """The literal ``SPEC = {...}`` of a peer module, without importing it."""
    tree = ast.parse(path.read_text(), str(path))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "SPEC" for t in node.targets):
            return ast.literal_eval(node.value)
    raise ValueError(f"{path} has no literal SPEC = {{...}}")


@dataclass
class Peer:
    name: str
    spec: dict[str, Any]
    venv: Path
    python: Path | None = None
    versions: dict[str, str] = field(default_factory=dict)
    unavailable: str | None = None  # why it cannot be benchmarked here

    @property
    def optional(self) -> bool:
        return bool(self.spec.get("optional"))

    @property
    def has_bulk(self) -> bool:
        return bool(self.spec.get("bulk"))

    def _fill(self, text: str, values: dict[str, str]) -> str:
        for key, value in values.items():
            text = text.replace("{" + key + "}", value)
        return text

    def worker_argv(self, procs: int, queue_url: str) -> list[str]:
        values = {"bin": str(self.venv / "bin"), "procs": str(procs), "queue_url": queue_url}
        return [self._fill(arg, values) for arg in self.spec["worker"]]

    def copies(self, procs: int) -> int:
        return int(self._fill(str(self.spec.get("copies", 1)), {"procs": str(procs)}))

    def worker_display(self, procs: int, queue_url: str) -> str:
        """The worker command line as a user would type it in the venv, from ``benchmarks/``."""
        argv = self.worker_argv(procs, queue_url)
        argv[0] = Path(argv[0]).name
        line = " ".join(argv)
        copies = self.copies(procs)
        return f"{copies} x ( {line} )" if copies > 1 else line

    @property
    def local(self) -> bool:
        """Installed from a snapshot of this repo (reinstalled whenever its source changed)."""
        return any("{repo}" in r for r in self.spec["requirements"])

    def requirements(self, repo_snapshot: Path, extra: list[str]) -> list[str]:
        """pip arguments: the SPEC's, then ``extra`` (the harness's client choices, same for every peer)."""
        return [self._fill(r, {"repo": str(repo_snapshot)}) for r in self.spec["requirements"]] + extra


def discover(peers_dir: Path, venvs: Path) -> dict[str, Peer]:
    found = {}
    for path in sorted(peers_dir.glob("*.py")):
        if path.name.startswith("_"):
            continue
        spec = read_spec(path)
        if spec.get("name") != path.stem:
            raise ValueError(f"{path}: SPEC name {spec.get('name')!r} must be the module name {path.stem!r}")
        found[spec["name"]] = Peer(spec["name"], spec, venvs / spec.get("venv", spec["name"]))
    return found
