"""``taskforge dashboard APP``: serve the web dashboard (extra ``taskforge-redis[dashboard]``)."""

from __future__ import annotations

import ipaddress

import click

from ..errors import ConfigurationError
from .common import USAGE, cli_errors, fail, open_app

DASHBOARD_HELP = """Serve the web dashboard: queues, workers, jobs, dead letters, schedules.

Binds to 127.0.0.1 by default: only this machine can reach it. To serve
other machines, pass --host 0.0.0.0 (or an address of this host) and
--auth, since the dashboard can retry, cancel, abort and purge jobs: a
non-loopback --host without --auth exits 2 unless --no-auth says that an
open dashboard is meant (behind a proxy that checks who comes in, say).
--auth may also come from the TASKFORGE_DASHBOARD_AUTH environment
variable, which keeps the password out of the process list.

It answers only to requests whose Host is a loopback name or address
(localhost, 127.0.0.1, ::1), the --host address when it is a single one,
or a name given with --allow-host (any port): a page of another site
whose name was pointed at this machine (DNS rebinding) gets 400.

\b
Example:
  taskforge dashboard myapp:app
  taskforge dashboard myapp:app --host 0.0.0.0 --allow-host ops.example.com --auth admin:s3cret

The JSON API (/api/status, /api/jobs/ID, ...) is described in docs/howto/dashboard.md.
"""


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def refuse_open(host: str, has_auth: bool, no_auth: bool) -> None:
    """Exit 2 for a dashboard other machines could reach with no password, unless ``--no-auth`` says so."""
    if has_auth and no_auth:
        fail("--auth and --no-auth contradict each other: give one (TASKFORGE_DASHBOARD_AUTH counts as --auth)", USAGE)
    if not has_auth and not no_auth and not is_loopback(host):
        fail(
            f"refusing to serve the dashboard on {host} without --auth: anyone who reaches it could retry, "
            "cancel and purge jobs; give --auth USER:PASSWORD, or --no-auth to serve it open anyway",
            USAGE,
        )


@click.command(help=DASHBOARD_HELP)
@click.argument("app")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind.")
@click.option("--port", type=click.IntRange(min=1, max=65535), default=8080, show_default=True)
@click.option(
    "--auth",
    envvar="TASKFORGE_DASHBOARD_AUTH",
    default=None,
    metavar="USER:PASSWORD",
    help="Require HTTP Basic auth on every page, action and API call.",
)
@click.option(
    "--no-auth",
    is_flag=True,
    help="Serve a non-loopback --host without --auth: anyone who reaches it can act on jobs.",
)
@click.option(
    "--allow-host",
    "allow_hosts",
    multiple=True,
    metavar="NAME",
    help="Also answer to requests for this host name or address (repeatable; loopback names always).",
)
def dashboard(app: str, host: str, port: int, auth: str | None, no_auth: bool, allow_hosts: tuple[str, ...]) -> None:
    try:
        from ..dashboard import create_app
        from ..dashboard.hosts import allowed_hosts
        from ..dashboard.security import parse_auth
        from ..dashboard.server import bind, serve
    except ImportError as exc:
        missing = (exc.name or "a module").split(".")[0]  # the package to install, not one of its modules
        fail(f"the dashboard needs its extra ({missing} is missing): pip install 'taskforge-redis[dashboard]'", USAGE)
    try:
        credentials = parse_auth(auth) if auth is not None else None
        allowed = allowed_hosts(allow_hosts, host)
    except ConfigurationError as exc:
        fail(str(exc), USAGE)
    refuse_open(host, credentials is not None, no_auth)
    the_app = open_app(app)
    with cli_errors():
        the_app.broker.ping()
        sock = bind(host, port)
    where = "only this machine can reach it" if is_loopback(host) else "reachable from other machines"
    click.echo(f"taskforge dashboard on http://{host}:{port}/ (bound to {host}: {where})", err=True)
    click.echo(f"answering to Host: {', '.join(sorted(allowed.names))} (add more with --allow-host)", err=True)
    if not is_loopback(host) and credentials is None:
        click.echo("warning: --no-auth: anyone who reaches this address can retry, cancel and purge jobs", err=True)
    serve(create_app(the_app, credentials, allow_hosts, host), sock)
