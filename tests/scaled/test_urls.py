"""redis+cluster:// and redis+sentinel:// URLs: what is accepted, and clear errors for the rest."""

from __future__ import annotations

import pytest

from taskforge import TaskForge
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
