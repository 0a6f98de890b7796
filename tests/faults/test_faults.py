"""The fault suite in the normal test run: each scenario of ``scenarios.py`` asserts its promises.

The quick ones (lost replies everywhere, a partition longer than a lease)
run in every suite; the others are ``slow``. The full form, with seeds and
a table, is ``python -m tests.faults.run --seeds ...``.
"""

from __future__ import annotations

import shutil

import pytest

from .rig import faketime_library
from .scenarios import FULL_ONLY, PLANS, QUICK, run

pytestmark = [
    pytest.mark.xdist_group("faults"),
    pytest.mark.skipif(shutil.which("redis-server") is None, reason="redis-server missing"),
]


def marks(name: str) -> list[pytest.MarkDecorator]:
    found = [] if name in QUICK else [pytest.mark.slow]
    if PLANS[name].skews != (None, None) and faketime_library() is None:
        found.append(pytest.mark.skip(reason="libfaketime missing: apt-get install faketime libfaketime"))
    return found


@pytest.mark.parametrize("name", [pytest.param(name, marks=marks(name)) for name in PLANS if name not in FULL_ONLY])
def test_no_job_lost_no_unexplained_duplicate_none_early(name: str) -> None:
    result = run(PLANS[name], seed=7, quick=name in QUICK)
    assert result.jobs and result.ok, "\n".join(
        [str({k: v for k, v in vars(result).items() if k != "problems"}), *result.problems]
    )
    if PLANS[name].fault.__name__ in ("partition",):
        # Cut off mid-job, its run is either taken over (a duplicate, explained) or, healed before
        # any reclaim, recorded late: both keep the promise; a cut between jobs tests nothing.
        assert result.cut_mid_job, "the partition never cut a running job off: the scenario tested nothing"
