"""``dagplan serve``: the run viewer in the browser (Starlette on uvicorn)."""

from __future__ import annotations

import secrets

import click

from ..dsl.errors import DagplanError
from .common import EXIT_USAGE, die, fail, project_of, state_dir_option, tools_option

_LOOPBACK = {"127.0.0.1", "localhost", "::1"}


@click.command("serve")
@state_dir_option
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="Address to bind (any other than the loopback needs a token).",
)
@click.option("--port", type=click.IntRange(0, 65535), default=8765, show_default=True, help="0: any free port.")
@click.option(
    "--token", default=None, help="The token requests must carry (default: a new one, printed in the start-up URL)."
)
@click.option(
    "--allow-host",
    "hosts",
    multiple=True,
    metavar="NAME",
    help="Another name browsers reach this server by (the loopback names and --host are always allowed).",
)
@click.option(
    "--plan",
    "plan_file",
    default=None,
    metavar="FILE",
    help="Open this plan's page (its graph, check's diagnostics, approval).",
)
@tools_option
def serve(state_dir, host, port, token, hosts, plan_file, tool_sources) -> None:
    """Watch runs in the browser: every run of the state directory, each run's graph live, gates to
    answer, plans to review and approve. Prints its URL."""
    import socket

    token = token or secrets.token_urlsafe(18)  # on the loopback too: any local page could call it otherwise
    project = project_of(state_dir, tool_sources)
    try:
        project.tools  # noqa: B018 - loaded now: a tools file that does not import is said before the URL
    except DagplanError as exc:
        fail(exc)
    from ..web.app import Viewer

    names = (*hosts, host if ":" not in host else f"[{host}]")
    viewer = Viewer(token=token, hosts=names, project=project)
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(128)  # before the URL is printed: a client that connects at once waits in the backlog
    except OSError as exc:
        die(f"cannot listen on {host}:{port}: {exc.strerror or exc}", EXIT_USAGE)
    bound = sock.getsockname()[1]
    shown = f"[{host}]" if ":" in host else host
    path = viewer.url("/plan", file=plan_file) if plan_file else "/"
    query = ("&" if "?" in path else "?") + f"token={token}" if token else ""
    click.echo(f"dagplan serve: http://{shown}:{bound}{path}{query}", err=True)
    import uvicorn

    config = uvicorn.Config(viewer.app, log_level="warning", lifespan="off", timeout_graceful_shutdown=2)
    uvicorn.Server(config).run(sockets=[sock])  # open event streams end on shutdown
