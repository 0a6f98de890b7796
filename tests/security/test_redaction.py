"""A password in the broker URL never appears in any output: log lines, errors, CLI output.

Where a URL is shown, it is shown as ``redis://user:***@host:port/db``. Checked
against a private ``redis-server --requirepass`` with the wrong password, with
an unreachable port, with the server going away under a running worker, and
with the password given in the URL's query string.
"""

from __future__ import annotations

import re
import secrets
import time
import traceback
import urllib.error
import urllib.request
from pathlib import Path
from urllib.parse import quote

import pytest
import redis

from taskforge import BrokerUnavailable, TaskForge
from taskforge.broker.connection import redact
from taskforge.errors import ConfigurationError
from tests.worker.conftest import wait_for

from .procs import WORKER, Finished, PrivateRedis, Processes, free_port, report

pytestmark = pytest.mark.redis

# Characters that need escaping in a URL, so both spellings must stay hidden.
PASSWORD = f"S3cr3t-{secrets.token_hex(6)}-p@ss:w/rd"
WRONG = f"Wr0ng-{secrets.token_hex(6)}"
SECRETS = (PASSWORD, quote(PASSWORD, safe=""), WRONG)
URL_IN_TEXT = re.compile(r"(?:rediss?|unix)://[^\s'\"()]*")

CLI_COMMANDS = [
    ("status",),
    ("status", "--json"),
    ("job", "0123456789abcdef0123456789abcdef"),
    ("enqueue", "echo", "--args", "[1]"),
    ("dead", "list"),
    ("dead", "retry", "--all"),
    ("purge", "--yes"),
    ("worker", "--burst", "-c", "1", "--no-periodic"),
]
SOME_COMMANDS = [CLI_COMMANDS[i] for i in (0, 2, 3, 7)]


def leaks(text: str) -> list[str]:
    return [s for s in SECRETS if s in text]


def unredacted_urls(text: str) -> list[str]:
    """URLs in ``text`` that carry credentials other than ``***``."""
    return [url for url in URL_IN_TEXT.findall(text) if "@" in url.split("/", 3)[2] and ":***@" not in url]


def check_output(what: str, text: str, problems: list[str], url_shown: bool = False) -> None:
    if leaks(text):
        lines = [line for line in text.splitlines() if leaks(line)]
        problems.append(f"{what}: the password appears: {lines[0][:200]!r}")
    if unredacted_urls(text):
        problems.append(f"{what}: a URL with credentials: {unredacted_urls(text)[0]!r}")
    if url_shown and "***" not in text:
        problems.append(f"{what}: the URL is not shown redacted (no ***): {text.strip()[-300:]!r}")


@pytest.fixture
def server(processes: Processes) -> PrivateRedis:
    srv = PrivateRedis(processes, "--requirepass", PASSWORD)
    return srv.start(lambda: redis.Redis(port=srv.port, password=PASSWORD).ping())


def url(port: int, password: str, user: str = "", scheme: str = "redis") -> str:
    return f"{scheme}://{user}:{quote(password, safe='')}@127.0.0.1:{port}/0"


def run_all(processes: Processes, app_dir: Path, broker: str, commands=CLI_COMMANDS) -> dict[str, Finished]:
    return processes.taskforge_many([(cmd[0], "secapp:app", *cmd[1:]) for cmd in commands], url=broker, cwd=app_dir)


@pytest.mark.parametrize("case", ["wrong-password", "wrong-password-with-user", "unreachable-port"])
def test_no_command_shows_the_password(processes: Processes, app_dir: Path, server: PrivateRedis, case: str) -> None:
    broker = {
        "wrong-password": url(server.port, WRONG),
        "wrong-password-with-user": url(server.port, PASSWORD, user="nobody"),
        "unreachable-port": url(free_port(), PASSWORD),
    }[case]
    problems: list[str] = []
    commands = CLI_COMMANDS if case == "wrong-password" else SOME_COMMANDS
    for command, done in run_all(processes, app_dir, broker, commands).items():
        if done.code != 1:
            problems.append(
                f"`taskforge {command}` exited {done.code} (a broker it cannot use is a runtime "
                f"failure, 1): {done.output.strip()[-300:]!r}"
            )
        if "Traceback" in done.output:
            problems.append(f"`taskforge {command}` printed a traceback: {done.output[-500:]!r}")
        check_output(f"`taskforge {command}`", done.output, problems, url_shown=True)
    report(problems)


def test_a_password_in_the_query_string_is_hidden_too(
    processes: Processes, app_dir: Path, server: PrivateRedis
) -> None:
    """redis-py reads ``?password=`` (and ``?username=``) from the URL; it is as secret as the userinfo part."""
    problems: list[str] = []
    broker = f"redis://127.0.0.1:{server.port}/0?password={quote(WRONG, safe='')}"
    for command, done in run_all(processes, app_dir, broker, SOME_COMMANDS).items():
        check_output(f"`taskforge {command}` (?password=)", done.output, problems)
    report(problems)


def test_library_errors_and_reprs_hide_the_password(server: PrivateRedis) -> None:
    problems: list[str] = []
    for broker in (
        url(server.port, WRONG),
        url(free_port(), PASSWORD),
        url(server.port, PASSWORD, user="nobody"),
        f"unix://:{quote(PASSWORD, safe='')}@/nonexistent/redis.sock",
        f"redis://127.0.0.1:{server.port}/0?username=default&password={quote(WRONG, safe='')}",
        # the passphrase of a client key file, also read from the query string by redis-py
        f"rediss://127.0.0.1:{free_port()}/0?ssl_password={quote(PASSWORD, safe='')}&ssl_cert_reqs=none",
    ):
        app = TaskForge("lib", broker=broker)
        check_output("repr(app)", repr(app), problems, url_shown=True)
        with pytest.raises(BrokerUnavailable) as caught:
            app.send("echo", 1)
        text = "".join(traceback.format_exception(caught.value))
        check_output(f"BrokerUnavailable for {broker.split('@')[-1]}", text, problems, url_shown=True)
    report(problems)


def test_a_worker_losing_its_authenticated_broker_logs_no_password(
    processes: Processes, app_dir: Path, server: PrivateRedis
) -> None:
    broker = url(server.port, PASSWORD, user="default")
    worker = processes.start_taskforge(*WORKER, "--no-periodic", url=broker, cwd=app_dir)
    producer = TaskForge("producer", broker=broker)
    assert producer.send("echo", "before").result(timeout=30) == "before"
    server.stop()
    wait_for(
        lambda: "cannot reach" in worker.output() or "Connection" in worker.output(), 30, "the worker to log the outage"
    )
    time.sleep(1.5)
    server.start(lambda: redis.Redis(port=server.port, password=PASSWORD).ping())
    assert producer.send("echo", "after").result(timeout=60) == "after"
    code = worker.stop()
    output = worker.output()
    problems: list[str] = []
    check_output("the worker's log across an outage", output, problems, url_shown=True)
    assert code == 0 and "Traceback" not in output, output[-2000:]
    report(problems, "\n--- log:\n" + output[-2000:])


# Every URL form, with a marker only the secrets carry: the marker must appear in no output.
MARK = secrets.token_hex(5)
NOWHERE = free_port()  # nobody listens there
FORMS = [
    (f"REDIS://user:pw{MARK}@127.0.0.1:{NOWHERE}/0", f"REDIS://user:***@127.0.0.1:{NOWHERE}/0"),
    (f"Rediss://user:pw{MARK}@127.0.0.1:{NOWHERE}/1", f"Rediss://user:***@127.0.0.1:{NOWHERE}/1"),
    (f"redis://:pw{MARK}@127.0.0.1:{NOWHERE}/0", f"redis://:***@127.0.0.1:{NOWHERE}/0"),
    (f"redis://user:a{MARK}@b{MARK}@127.0.0.1:{NOWHERE}/0", f"redis://user:***@127.0.0.1:{NOWHERE}/0"),
    (f"redis://user:a{MARK}:b{MARK}@127.0.0.1:{NOWHERE}", f"redis://user:***@127.0.0.1:{NOWHERE}"),
    (f"redis://user:a{MARK}%2Fb{MARK}%40%3A@127.0.0.1:{NOWHERE}/0", f"redis://user:***@127.0.0.1:{NOWHERE}/0"),
    (f"redis://127.0.0.1:{NOWHERE}/0?password=a{MARK}&db=1", f"redis://127.0.0.1:{NOWHERE}/0?password=***&db=1"),
    (
        f"redis://127.0.0.1:{NOWHERE}/0?username=u&password=a{MARK}@b{MARK}",
        f"redis://127.0.0.1:{NOWHERE}/0?username=u&password=***",
    ),
    (
        f"rediss://127.0.0.1:{NOWHERE}/0?ssl_password=a{MARK}&ssl_cert_reqs=none",
        f"rediss://127.0.0.1:{NOWHERE}/0?ssl_password=***&ssl_cert_reqs=none",
    ),
    (f"unix://user:a{MARK}@/nonexistent/redis.sock?db=2", "unix://user:***@/nonexistent/redis.sock?db=2"),
    (f"UNIX://:a{MARK}@b{MARK}@/nonexistent/redis.sock", "UNIX://:***@/nonexistent/redis.sock"),
    (
        f"redis+sentinel://user:a{MARK}@127.0.0.1:{NOWHERE},127.0.0.1:{NOWHERE}/svc/2",
        f"redis+sentinel://user:***@127.0.0.1:{NOWHERE},127.0.0.1:{NOWHERE}/svc/2",
    ),
    (
        f"REDIS+SENTINEL://:a{MARK}@b{MARK}:c@127.0.0.1:{NOWHERE},127.0.0.1:{NOWHERE}/svc",
        f"REDIS+SENTINEL://:***@127.0.0.1:{NOWHERE},127.0.0.1:{NOWHERE}/svc",
    ),
    # Credentials on each host of the list: everything up to the last '@' is hidden, as the parser reads it.
    (
        f"redis+sentinel://u:a{MARK}@127.0.0.1:{NOWHERE},v:b{MARK}@127.0.0.1:{NOWHERE}/svc",
        f"redis+sentinel://u:***@127.0.0.1:{NOWHERE}/svc",
    ),
    (
        f"Redis+Cluster://:a{MARK}@127.0.0.1:{NOWHERE},127.0.0.1:{NOWHERE}/0",
        f"Redis+Cluster://:***@127.0.0.1:{NOWHERE},127.0.0.1:{NOWHERE}/0",
    ),
]
# URLs no client is built for, each refused with a ConfigurationError that must hide the password too.
INVALID = [
    f"redis://user:a{MARK}/b{MARK}@127.0.0.1:{NOWHERE}/0",  # '/' ends the host part
    f"REDIS://:a{MARK}?b{MARK}@127.0.0.1:{NOWHERE}/0",
    f"redis://:a{MARK}#b{MARK}@127.0.0.1:{NOWHERE}/0",
    f"redis+cluster://u:a{MARK}/b{MARK}@127.0.0.1:{NOWHERE},127.0.0.1:{NOWHERE}",
    f"redis+sentinel://u:a{MARK}?b{MARK}@127.0.0.1:{NOWHERE}/svc",
    f"redis://user:a{MARK}@127.0.0.1:notaport/0",  # the parser's error names the text it read as a port
    f"HTTP://user:a{MARK}@127.0.0.1:{NOWHERE}/0",
]


FORM_IDS = [
    "upper-case",
    "mixed-case-tls",
    "password-only",
    "at-in-password",
    "colon-in-password",
    "escapes-in-password",
    "query-password",
    "query-password-with-at",
    "query-ssl-password",
    "unix-user-password",
    "unix-upper-case-at",
    "sentinel-list",
    "sentinel-upper-case-at-colon",
    "sentinel-credentials-per-host",
    "cluster-mixed-case",
]
INVALID_IDS = ["slash", "question-mark", "hash", "cluster-slash", "sentinel-question-mark", "bad-port", "http"]


@pytest.mark.parametrize(("url", "shown"), FORMS, ids=FORM_IDS)
def test_every_url_form_is_shown_without_its_password(url: str, shown: str) -> None:
    assert redact(url) == shown
    assert redact(url.replace("password=", "PassWord=")) == shown.replace("password=", "PassWord=")
    # Inside a message, quoted or not, with text after it.
    assert redact(f"cannot reach {url!r} (refused); again at {url}, then stop") == (
        f"cannot reach {shown!r} (refused); again at {shown}, then stop"
    )


@pytest.mark.parametrize("url", [u for u, _ in FORMS] + INVALID, ids=FORM_IDS + INVALID_IDS)
def test_errors_and_reprs_of_every_url_form_hide_the_password(url: str) -> None:
    app = TaskForge("forms", broker=url)
    assert MARK not in repr(app) and "***" in repr(app)
    with pytest.raises((BrokerUnavailable, ConfigurationError)) as caught:
        app.broker.ping()
    text = "".join(traceback.format_exception(caught.value))
    assert MARK not in text, text
    assert "***" in str(caught.value), str(caught.value)
    if url in INVALID:
        assert caught.type is ConfigurationError, text


def test_a_password_with_a_slash_is_refused_before_anything_reads_it() -> None:
    with pytest.raises(ConfigurationError, match="%-escaped") as caught:
        TaskForge("forms", broker=INVALID[0]).broker.ping()
    assert MARK not in str(caught.value)


# A password a real server accepts raw in the URL: '@' and ':' in it, the marker on both sides of the '@'.
AT_PASSWORD = f"a{MARK}@b{MARK}:c"
DASHBOARD_PAGES = ["/", "/workers", "/tasks", "/dead", "/scheduled", "/search", "/workflows", "/queues/default"]


def shows_no_secret(what: str, text: str, problems: list[str], url_shown: bool = True) -> None:
    if MARK in text:
        line = next(line for line in text.splitlines() if MARK in line)
        problems.append(f"{what}: a piece of the password appears: {line[:300]!r}")
    if url_shown and "***" not in text:
        problems.append(f"{what}: the URL is not shown redacted (no ***): {text.strip()[-300:]!r}")


def test_a_working_url_of_every_hard_form_shows_its_password_nowhere(processes: Processes, app_dir: Path) -> None:
    """An upper-case scheme and '@' and ':' in the password, against a real server: the worker's banner
    and log, ``taskforge status``, every dashboard page and ``/api/status``, and the errors."""
    srv = PrivateRedis(processes, "--requirepass", AT_PASSWORD)
    srv.start(lambda: redis.Redis(port=srv.port, password=AT_PASSWORD).ping())
    broker = f"REDIS://default:{AT_PASSWORD}@127.0.0.1:{srv.port}/0"
    problems: list[str] = []
    worker = processes.start_taskforge(*WORKER, "--no-periodic", url=broker, cwd=app_dir)
    producer = TaskForge("producer", broker=broker)
    assert producer.send("echo", "through").result(timeout=30) == "through"  # the URL works as written
    for args in (("status",), ("status", "--json")):
        done = processes.taskforge(*args, "secapp:app", url=broker, cwd=app_dir)
        assert done.code == 0, done.output[-2000:]
        shows_no_secret(f"`taskforge {' '.join(args)}`", done.output, problems)
    port = free_port()
    dashboard = processes.start_taskforge("dashboard", "secapp:app", "--port", str(port), url=broker, cwd=app_dir)
    wait_for(lambda: fetch(port, "/api/status")[0] == 200, 30, "the dashboard to answer")
    for page in [*DASHBOARD_PAGES, "/api/status"]:
        code, body = fetch(port, page)
        if code != 200:
            problems.append(f"dashboard {page} answered {code}: {body[-300:]!r}")
        shows_no_secret(f"dashboard {page}", body, problems, url_shown=page in ("/", "/api/status"))
    assert worker.stop() == 0
    output = worker.output()
    assert "broker:" in output, output[-2000:]  # the banner
    shows_no_secret("the worker's banner and log", output, problems)
    srv.stop()  # the dashboard's error pages, Redis gone
    for page in ("/", "/api/status"):
        code, body = fetch(port, page)
        assert code >= 500, (page, code, body[-300:])
        shows_no_secret(f"dashboard {page} with Redis gone", body, problems)
    dashboard.stop()
    shows_no_secret("the dashboard's log", dashboard.output(), problems, url_shown=False)
    srv.start(lambda: redis.Redis(port=srv.port, password=AT_PASSWORD).ping())
    # The same URL with a wrong password: every error says so without it.
    wrong = broker.replace(f":{AT_PASSWORD}@", f":{AT_PASSWORD}x@")
    done = processes.taskforge("status", "secapp:app", url=wrong, cwd=app_dir)
    assert done.code == 1, done.output[-2000:]
    shows_no_secret("`taskforge status` refused", done.output, problems)
    with pytest.raises(BrokerUnavailable) as caught:
        TaskForge("lib", broker=wrong).send("echo", 1)
    shows_no_secret("BrokerUnavailable", "".join(traceback.format_exception(caught.value)), problems)
    # The dashboard checks the broker before it serves: it exits 1 saying why.
    done = processes.taskforge("dashboard", "secapp:app", "--port", str(free_port()), url=wrong, cwd=app_dir)
    assert done.code == 1, done.output[-2000:]
    shows_no_secret("`taskforge dashboard` refused", done.output, problems)
    report(problems)


def test_an_invalid_url_holding_a_password_shows_none_of_it(processes: Processes, app_dir: Path) -> None:
    """A '/' in the password (not %-escaped): the CLI's usage error and the worker's refusal hide it."""
    problems: list[str] = []
    for command in (("status", "secapp:app"), ("worker", "secapp:app", "--burst")):
        done = processes.taskforge(*command, url=INVALID[0], cwd=app_dir)
        if done.code != 2:
            problems.append(f"`taskforge {command[0]}` exited {done.code}, not 2: {done.output[-300:]!r}")
        shows_no_secret(f"`taskforge {command[0]}` with a '/' in the password", done.output, problems)
    report(problems)


def fetch(port: int, path: str) -> tuple[int, str]:
    """(status, body) of one GET to the dashboard, by its loopback address."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=15) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()
    except OSError:
        return 0, ""
