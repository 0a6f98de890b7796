"""Each quirk of ``broker/compat.py`` against each real server found here (Redis 6.2, 7.0, Valkey 8, 9).

The bugs they guard against show only on some: the 1 ms timeout hangs on
Redis 6.2 alone, the ``CLIENT SETINFO`` denial shows on 7.2+ and Valkey,
the ``CLIENT MAINT_NOTIFICATIONS`` one on 6.2, and each server words a
denial inside a script its own way.
"""

from __future__ import annotations

import pytest
import redis

from taskforge import BrokerUnavailable, TaskForge
from taskforge.broker.connection import connect
from tests.conftest import skip_or_fail
from tests.security.procs import PrivateRedis
from tests.security.test_auth import MINIMAL

from .bundled import SERVERS_VAR, bundled
from .conftest import ADMIN_PASSWORD, admin

pytestmark = pytest.mark.redis
USER_PASSWORD = "matrix-user"


def test_the_bundled_servers_are_installed() -> None:
    """CI installs them (``python -m tests.servers.matrix install``); without them this module tests only one."""
    if not {"redis-6.2", "valkey-9"} <= set(bundled()):
        skip_or_fail(f"no bundled Redis 6.2 and Valkey 9 under ${SERVERS_VAR}: found {sorted(bundled())}")


def app_on(server: PrivateRedis, name: str = "compat") -> TaskForge:
    return TaskForge(name, broker=f"redis://:{ADMIN_PASSWORD}@127.0.0.1:{server.port}/0")


def user_app(server: PrivateRedis, rules: list[str]) -> TaskForge:
    admin(server).execute_command("ACL", "SETUSER", "taskforge", "reset", "on", f">{USER_PASSWORD}", *rules)
    admin(server).execute_command("ACL", "LOG", "RESET")
    return TaskForge("acl", broker=f"redis://taskforge:{USER_PASSWORD}@127.0.0.1:{server.port}/0")


def test_a_result_wait_of_1_ms_raises_timeout_error(server: PrivateRedis) -> None:
    """On Redis 6.2 a 1 ms BLMOVE blocked until the socket timeout and raised BrokerUnavailable."""
    handle = app_on(server).send("never.run")
    with pytest.raises(TimeoutError):
        handle.result(timeout=0.001)


def test_waiting_for_work_for_1_ms_returns(server: PrivateRedis) -> None:
    """The worker's idle waits: a job due in 1 ms must not turn into a wait until the socket timeout."""
    broker = app_on(server).broker
    assert broker.claims.wait_for_work(["default"], 0.001) is False
    assert broker.claims.wait_for_work(["default"], 0.0) is False
    claims, _ = broker.claims.wait_and_dequeue("default", 0.001, 60_000, "token-1")
    assert claims == []


def test_an_acl_denial_inside_a_script_names_the_command(server: PrivateRedis) -> None:
    app = user_app(server, [r for r in MINIMAL if r != "+zpopmin"])
    app.send("anything")
    with pytest.raises(BrokerUnavailable) as caught:
        app.broker.claims.dequeue("default", 60_000)
    assert "'zpopmin'" in str(caught.value) and "dequeue script" in str(caught.value), caught.value


def test_the_minimal_acl_user_leaves_no_denial_in_the_acl_log(server: PrivateRedis) -> None:
    """redis-py's handshake commands (CLIENT SETINFO, CLIENT MAINT_NOTIFICATIONS) are turned off."""
    app = user_app(server, MINIMAL)
    handle = app.send("echo", 1)
    assert app.broker.claims.dequeue("default", 60_000)
    clients = [connect(app.url) for _ in range(3)]  # new pools: new connections, and the version check
    for client in clients:
        client.ping()
    with pytest.raises(TimeoutError):
        handle.result(timeout=0.01)
    log = admin(server).acl_log(count=100)
    assert log == [], [(e["reason"], e["object"]) for e in log]


def test_the_version_check_passes_a_supported_server_once_per_client(server: PrivateRedis) -> None:
    client = connect(f"redis://:{ADMIN_PASSWORD}@127.0.0.1:{server.port}/0")
    stats = admin(server)  # one connection: its own handshake is done before the reset
    stats.config_resetstat()
    pool = [client.connection_pool.get_connection() for _ in range(3)]
    for connection in pool:
        client.connection_pool.release(connection)
    calls = stats.info("commandstats").get("cmdstat_hello", {}).get("calls", 0)
    protocol = client.connection_pool.connection_kwargs.get("protocol") or pool[0].protocol
    # redis-py's own handshake sends HELLO per connection under RESP3; the check adds one in all.
    assert calls == (3 if protocol == 3 else 0) + 1, calls
    assert isinstance(client.ping(), bool) and not isinstance(client, redis.RedisCluster)
