"""The fault checker's reading of a job that ran twice (tests/faults/scenarios.py ``explain``)."""

from __future__ import annotations

from tests.faults.scenarios import Result, explain


class Cut:
    """A worker's proxy with one fault window, in seconds."""

    def __init__(self, start: float = 0.0, end: float = 0.0) -> None:
        self.start, self.end = start, end

    def faulted(self, start: float, end: float) -> str | None:
        return "blackhole" if self.end > self.start and self.start <= end and start <= self.end else None


def runs_of(*runs: tuple[int, str, int]) -> list[dict]:
    return [{"id": "j", "token": "j", "attempt": a, "worker": w, "at": at} for a, w, at in runs]


def test_a_run_claimed_before_its_worker_was_cut_off_explains_the_takeover_that_started_first() -> None:
    # Seen in CI: w1 claimed attempt 1, was cut off, and its starved child began the body 0.9 s
    # after w2 had taken the job over (attempt 2). By start time w2's run came first.
    proxies = {"w1": Cut(349.0, 353.6), "w2": Cut(), "*": Cut()}
    result = Result("partition", 7, "async")
    explain(result, "j", runs_of((2, "w2", 350_674), (1, "w1", 351_550)), proxies)
    assert (result.duplicated, result.explained, result.problems) == (1, 1, [])


def test_a_second_run_with_no_fault_on_the_first_runs_worker_is_not_explained() -> None:
    proxies = {"w1": Cut(), "w2": Cut(349.0, 353.6), "*": Cut()}
    result = Result("partition", 7, "async")
    explain(result, "j", runs_of((1, "w1", 350_000), (2, "w2", 351_000)), proxies)
    assert (result.duplicated, result.explained) == (1, 0) and "no fault on w1" in result.problems[0]
