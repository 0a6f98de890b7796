"""``taskforge dashboard APP``: serve the web dashboard (extra ``taskforge-redis[dashboard]``)."""

from __future__ import annotations

import ipaddress

import click

from ..errors import ConfigurationError
from .common import USAGE, cli_errors, fail, open_app

DASHBOARD_HELP = """Serve the web dashboard: queues, workers, jobs, dead letters, schedules.

Binds to 127.0.0.1 by default: only this machine can reach it. To serve
other machines, pass --host 0.0.0.0 (or an address of this host), and
--auth, since the dashboard can retry, cancel, abort and purge jobs.
--auth may also come from the TASKFORGE_DASHBOARD_AUTH environment
variable, which keeps the password out of the process list.

\b
Example:
  taskforge dashboard myapp:app
  taskforge dashboard myapp:app --host 0.0.0.0 --port 8080 --auth admin:s3cret

The JSON API (/api/status, /api/jobs/ID, ...) is described in the README.
"""


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


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
def dashboard(app: str, host: str, port: int, auth: str | None) -> None:
    try:
        from ..dashboard import create_app
        from ..dashboard.security import parse_auth
        from ..dashboard.server import bind, serve
    except ImportError as exc:
        fail(f"the dashboard needs its extra ({exc.name} is missing): pip install 'taskforge-redis[dashboard]'", USAGE)
    try:
        credentials = parse_auth(auth) if auth is not None else None
    except ConfigurationError as exc:
        fail(str(exc), USAGE)
    the_app = open_app(app)
    with cli_errors():
        the_app.broker.ping()
        sock = bind(host, port)
    where = "only this machine can reach it" if is_loopback(host) else "reachable from other machines"
    click.echo(f"taskforge dashboard on http://{host}:{port}/ (bound to {host}: {where})", err=True)
    if not is_loopback(host) and credentials is None:
        click.echo("warning: no --auth: anyone who reaches this address can retry, cancel and purge jobs", err=True)
    serve(create_app(the_app, credentials), sock)
