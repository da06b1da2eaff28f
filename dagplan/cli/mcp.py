"""``dagplan mcp``: serve dagplan to MCP hosts (stdio, or streamable HTTP on loopback)."""

from __future__ import annotations

import click

from .common import EXIT_USAGE, die, state_dir_option, tools_option


@click.command("mcp")
@click.option("--allow-run", is_flag=True, help="Offer run_plan, resume_run and run_status (runs kept in the state).")
@click.option(
    "--allow-answer",
    is_flag=True,
    help="Offer answer_gate: the client may answer gates of the runs it started, except those only a person may "
    "answer (the side-effect gate, and every gate of a plan run through MCP).",
)
@click.option(
    "--allow-side-effects",
    is_flag=True,
    help="Let run_plan run side effects without a person answering the approve_side_effects gate first.",
)
@click.option(
    "--http", "port", type=click.IntRange(1, 65535), default=None, help="Serve streamable HTTP on 127.0.0.1:PORT."
)
@click.option("--allow-host", "hosts", multiple=True, metavar="HOST:PORT", help="Another Host header to accept (HTTP).")
@click.option("--token", default=None, help="The bearer token HTTP requests must carry (default: a new one, printed).")
@tools_option
@state_dir_option
def mcp(allow_run: bool, allow_answer: bool, allow_side_effects: bool, port: int | None, hosts: tuple[str, ...],
        token: str | None, tool_sources: tuple[str, ...], state_dir: str | None) -> None:  # fmt: skip
    """Serve dagplan as an MCP server: check_plan, preview_plan, estimate_plan, list_tools, list_runs (and
    with --allow-run: run_plan, resume_run, run_status; with --allow-answer too: answer_gate); resources: the
    plan schema, a reference, examples."""
    if (allow_side_effects or allow_answer) and not allow_run:
        die(f"{'--allow-side-effects' if allow_side_effects else '--allow-answer'} needs --allow-run", EXIT_USAGE)
    if port is not None:
        import secrets

        token = token or secrets.token_urlsafe(18)  # on the loopback too: any local process could call it otherwise
        click.echo(f"dagplan mcp: http://127.0.0.1:{port}/mcp (send the header Authorization: Bearer {token})",
                   err=True)  # fmt: skip
    try:
        from .. import mcp_server
    except ImportError:
        die("dagplan mcp needs the MCP SDK: pip install 'dagplan[mcp]'", EXIT_USAGE)
    mcp_server.serve(
        allow_run,
        allow_side_effects,
        port,
        hosts,
        allow_answer=allow_answer,
        token=token,
        tool_sources=tool_sources,
        state=state_dir,
    )
