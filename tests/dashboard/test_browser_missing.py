"""Without Chromium the browser tests skip locally but fail under CI: a green CI means they ran."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MISSING = "/nonexistent/chromium"


def run_browser_tests(ci: bool) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    env.update(TASKFORGE_CHROMIUM=MISSING, **({"CI": "true"} if ci else {}))
    args = ["-m", "pytest", "-q", "-p", "no:cacheprovider", "-k", "auth_guards"]
    return subprocess.run(
        [sys.executable, *args, "tests/dashboard/test_browser.py"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.slow  # a whole other pytest per case: about 10 s each
@pytest.mark.parametrize("ci", [True, False], ids=["ci", "local"])
def test_a_missing_chromium_fails_under_ci_and_skips_locally(ci: bool) -> None:
    out = run_browser_tests(ci)
    report = out.stdout + out.stderr
    if ci:
        assert out.returncode == 1, report
        assert f"under CI: no {MISSING}" in report and "1 error" in report, report
    else:
        assert out.returncode == 0, report
        assert "1 skipped" in report, report
