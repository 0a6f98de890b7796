"""What the server check makes of a server's answers, managed Redis (CONFIG denied) included."""

from __future__ import annotations

from typing import Any

import redis

from taskforge.broker.server_health import ServerHealth, check, report


class Answers:
    """A client giving canned INFO and CONFIG answers; ``config`` None: CONFIG is denied, as on managed Redis."""

    def __init__(self, info: dict[str, Any], config: dict[str, str] | None) -> None:
        self.answers = info
        self.config = config

    def info(self, section: str) -> dict[str, Any]:
        return self.answers

    def config_get(self, name: str) -> dict[str, str]:
        if self.config is None:
            raise redis.exceptions.NoPermissionError("this user has no permissions to run the 'config|get' command")
        return {name: self.config[name]}


def test_denied_config_reads_the_policy_from_info_and_says_unknown_rather_than_warn() -> None:
    health = check(Answers({"run_id": "r1", "aof_enabled": 0, "maxmemory_policy": "volatile-lru"}, None))
    assert health == ServerHealth("", "r1", "volatile-lru", aof=False, rdb=None, replicas=0)
    assert health.persistence == "unknown"
    (warning,) = health.warnings(replicated=False)  # the policy is known, persistence is not
    assert "maxmemory-policy volatile-lru" in warning
    bare = check(Answers({"run_id": "r1", "aof_enabled": 0}, None))
    assert bare.policy == "unknown" and bare.warnings(replicated=False) == []


def test_each_risk_is_one_warning() -> None:
    config = {"maxmemory-policy": "allkeys-lru", "save": ""}
    health = check(Answers({"run_id": "r", "aof_enabled": 0, "connected_slaves": 0}, config))
    assert len(health.warnings(replicated=True)) == 3
    assert len(health.warnings(replicated=False)) == 2
    safe = check(
        Answers({"run_id": "r", "aof_enabled": 1, "connected_slaves": 1}, {**config, "maxmemory-policy": "noeviction"})
    )
    assert (
        safe.warnings(replicated=True) == []
        and safe.summary() == "maxmemory-policy noeviction, persistence AOF, 1 replica"
    )


def test_a_server_refusing_info_is_summed_up_not_raised() -> None:
    class Refusing:
        def info(self, section: str) -> dict[str, Any]:
            raise redis.exceptions.NoPermissionError("no permissions to run the 'info' command")

    summary, warnings = report(Refusing(), "redis://h", replicated=False)
    assert summary == [
        "settings unknown (this Redis user may not run INFO: grant +info to check eviction and persistence)"
    ]
    assert warnings == []
    assert report(Refusing(), "memory://", replicated=True) == ([], [])
