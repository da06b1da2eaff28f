"""``dagplan tools``: the tools plans may call here, and the lock of MCP servers' tools."""

from __future__ import annotations

import json

import click

from ..dsl.errors import DagplanError, printable
from .common import fail, project_of, tools_option


@click.group("tools")
def tools() -> None:
    """The tools plans may call: list them; lock MCP servers' tools for offline checks."""


@tools.command("lock")
def lock() -> None:
    """Connect to every MCP server declared in dagplan.toml and write dagplan.lock: each tool's schemas,
    annotations and hash. `check` reads the lock (no server needed); `run` refuses a tool that drifted."""
    from .common import project_of

    try:
        path, counts = project_of().lock_tools()
    except DagplanError as exc:
        fail(exc)
    listed = ", ".join(f"{name} ({n} tool{'s' if n != 1 else ''})" for name, n in counts.items())
    click.echo(f"locked {printable(listed)} in {printable(path)}", err=True)


@tools.command("list")
@tools_option
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text")
def list_(tool_sources: tuple[str, ...], fmt: str) -> None:
    """Every tool a plan may call here: name, purity, parameters (MCP tools from dagplan.lock)."""
    try:
        specs = project_of(None, tool_sources).catalog()
    except DagplanError as exc:
        fail(exc)
    if fmt == "json":
        click.echo(json.dumps([s.to_json() for s in specs], indent=2, ensure_ascii=False))
        return
    from ..views import signature

    for spec in specs:
        flags = (spec.purity or "undeclared") + (", destructive" if spec.destructive else "")
        summary = spec.description.splitlines()[0] if spec.description else ""
        click.echo(printable(f"{signature(spec)}  [{flags}]  {summary}".rstrip()))
