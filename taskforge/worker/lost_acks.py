"""A report whose reply was lost: tell "my first try landed" from "another worker took the job".

When the connection drops after ``succeed`` or ``fail`` ran in Redis but
before its reply arrived, the worker retries the call and is refused: the
job is no longer running under its token, exactly as after a takeover.
Both scripts leave the token of the report they recorded in the record
(``outcome_token``), so one read of that field and the state tells the two
apart before anything is logged or any hook runs: the run that holds the
job sees its own success as a success, its own failure as that failure.

Only a refused report pays for the read, never the hot path; a job that has
since been claimed and finished again by another run carries that run's
token, and the refusal then stands (a takeover is what it was, by then).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import BrokerUnavailable

if TYPE_CHECKING:
    from ..broker.queue import Claim
    from ..broker.roles import ClaimsRole

FAILED_STATES = {"retrying": "retrying", "scheduled": "retrying", "pending": "retrying", "dead": "dead"}


def own_outcome(claims: ClaimsRole, claim: Claim) -> str | None:
    """What this claim's own earlier report recorded ('succeeded', 'retrying', 'dead'), or None.

    None: the record carries no report of this claim (a takeover, or the job
    is gone), or Redis cannot say right now; the refusal then stands.
    """
    try:
        state, token = claims.job_fields(claim.queue, claim.id, ("state", "outcome_token"))
    except BrokerUnavailable:
        return None
    if token != claim.token or state is None:
        return None
    if state == "succeeded":
        return "succeeded"
    # A retried job may have been claimed again since; its record still names this report
    # until that run reports: this run's failure was recorded, and scheduled a retry.
    return FAILED_STATES.get(state, "retrying" if state == "running" else None)


def recorded_success(claims: ClaimsRole, claim: Claim) -> bool:
    """True when this claim's success was recorded by an earlier try whose reply was lost."""
    if own_outcome(claims, claim) != "succeeded":
        return False
    claims.tally.count_success(claim.queue)  # the try that landed never counted it
    return True


def record_gone(claims: ClaimsRole, claim: Claim) -> bool:
    """True when a refused report's job has no record at all: the server lost it (a restart without
    persistence, an eviction), so no other worker took it over, whatever the refusal looks like."""
    try:
        return claims.job_fields(claim.queue, claim.id, ("state",))[0] is None
    except BrokerUnavailable:
        return False


def refusal(claims: ClaimsRole, claim: Claim) -> str:
    """What a refused report met: ``gone`` (no record left) or ``fenced`` (another claim holds the job)."""
    return "gone" if record_gone(claims, claim) else "fenced"
