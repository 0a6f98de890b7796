"""redis+cluster:// and redis+sentinel:// URLs: what is accepted, and clear errors for the rest."""

from __future__ import annotations

import json
import secrets
import traceback

import pytest

from taskforge import TaskForge, status
from taskforge.broker.connection import redact
from taskforge.errors import BrokerUnavailable, ConfigurationError

from .servers import free_ports


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("redis+cluster://127.0.0.1:7000,127.0.0.1", "'127.0.0.1' is not host:port"),
        ("redis+cluster://127.0.0.1:99999", "is not host:port"),
        ("redis+cluster://127.0.0.1:7000/3", "only database 0"),
        ("redis+cluster://127.0.0.1:7000?timeout=1", "no query string"),
        ("redis+cluster://", "names no host"),
        ("redis+sentinel://127.0.0.1:26379", "name the service"),
        ("redis+sentinel://127.0.0.1:26379/mymaster/x", "database 'x' is not a number"),
        ("redis+sentinel://127.0.0.1:26379/mymaster/0/1", "name the service"),
    ],
)
def test_a_bad_scaled_url_says_what_to_write(url: str, says: str) -> None:
    with pytest.raises(ConfigurationError, match="broker URL") as caught:
        TaskForge("x", broker=url).broker.ping()
    assert says in str(caught.value)


def test_errors_never_show_the_password() -> None:
    with pytest.raises(ConfigurationError) as caught:
        TaskForge("x", broker="redis+cluster://user:hunter2@127.0.0.1:7000/5").broker.ping()
    assert "hunter2" not in str(caught.value) and "***" in str(caught.value)


@pytest.mark.parametrize(
    "template",
    [
        "redis+cluster://u:hunter2@127.0.0.1:{},127.0.0.1:{}",
        "redis+sentinel://u:hunter2@127.0.0.1:{},127.0.0.1:{}/svc/2",
    ],
)
def test_nobody_listening_is_broker_unavailable_naming_the_url(template: str) -> None:
    url = template.format(*free_ports(2))
    with pytest.raises(BrokerUnavailable) as caught:
        TaskForge("x", broker=url).broker.ping()
    message = str(caught.value)
    assert url.replace("hunter2", "***") in message and "hunter2" not in message


@pytest.mark.redis
@pytest.mark.parametrize("kind", ["sentinel", "cluster"])
@pytest.mark.parametrize(
    "credentials",
    ["default:p@ss{mark}:w@", ":{mark}@x,y:z@", "default:{mark}%2F%40@"],
    ids=["at-colon", "password-only-at-comma", "escapes"],
)
def test_real_scaled_sets_never_show_the_password(request: pytest.FixtureRequest, kind: str, credentials: str) -> None:
    """Upper-case schemes and hard passwords against the real sets (whose default user takes any
    password): ``status`` and ``repr(app)`` show the URL without it, and so does an error."""
    servers = request.getfixturevalue(kind)
    mark = secrets.token_hex(5)
    scheme, rest = servers.url.split("://", 1)
    url = f"{scheme.upper()}://{credentials.format(mark=mark)}{rest}"
    app = TaskForge("x", broker=url)
    shown = json.dumps(status.status(app).to_dict()) + repr(app)
    assert mark not in shown and redact(url) in shown and rest in redact(url), shown
    broken = url + "/3" if kind == "cluster" else url.replace(f"/{servers.SERVICE}", "/nosuchservice")
    with pytest.raises((BrokerUnavailable, ConfigurationError)) as caught:
        TaskForge("x", broker=broken).broker.ping()
    text = "".join(traceback.format_exception(caught.value))
    assert mark not in text and redact(broken) in text, text
