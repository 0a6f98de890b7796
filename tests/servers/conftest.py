"""A private server per test, for each supported server found here (see ``bundled.py``)."""

from __future__ import annotations

import pytest
import redis

from tests.conftest import skip_or_fail
from tests.security.conftest import processes  # noqa: F401  (the fixture: a private process table)
from tests.security.procs import PrivateRedis, Processes

from .bundled import every_server

SERVERS = every_server()
ADMIN_PASSWORD = "matrix-admin"


@pytest.fixture(params=sorted(SERVERS) or ["none"])
def server(request: pytest.FixtureRequest) -> PrivateRedis:
    """A password-protected server of each kind (the admin password is ``ADMIN_PASSWORD``)."""
    if request.param == "none":
        skip_or_fail("no redis-server or bundled server found")
    table: Processes = request.getfixturevalue("processes")
    srv = PrivateRedis(table, "--requirepass", ADMIN_PASSWORD, binary=SERVERS[request.param])
    return srv.start(lambda: redis.Redis(port=srv.port, password=ADMIN_PASSWORD).ping())


def admin(server: PrivateRedis) -> redis.Redis:
    return redis.Redis(port=server.port, password=ADMIN_PASSWORD)
