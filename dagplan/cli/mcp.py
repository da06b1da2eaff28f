"""``dagplan mcp``: serve dagplan to MCP hosts (stdio, or streamable HTTP on loopback)."""

from __future__ import annotations

import click

from .common import EXIT_USAGE, die


@click.command("mcp")
@click.option("--allow-run", is_flag=True, help="Offer run_plan, answer_gate and run_status (runs kept in the state).")
@click.option(
    "--allow-side-effects",
    is_flag=True,
    help="Let run_plan run side effects without a person answering the approve_side_effects gate first.",
)
@click.option(
    "--http", "port", type=click.IntRange(1, 65535), default=None, help="Serve streamable HTTP on 127.0.0.1:PORT."
)
@click.option("--allow-host", "hosts", multiple=True, metavar="HOST:PORT", help="Another Host header to accept (HTTP).")
def mcp(allow_run: bool, allow_side_effects: bool, port: int | None, hosts: tuple[str, ...]) -> None:
    """Serve dagplan as an MCP server: check_plan, preview_plan, estimate_plan, list_tools, list_runs (and
    with --allow-run: run_plan, answer_gate, run_status); resources: the plan schema, a reference, examples."""
    if allow_side_effects and not allow_run:
        die("--allow-side-effects needs --allow-run", EXIT_USAGE)
    try:
        from .. import mcp_server
    except ImportError:
        die("dagplan mcp needs the MCP SDK: pip install 'dagplan[mcp]'", EXIT_USAGE)
    mcp_server.serve(allow_run, allow_side_effects, port, hosts)
