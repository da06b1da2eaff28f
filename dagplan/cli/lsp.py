"""``dagplan lsp``: the language server for plan files, over stdio."""

from __future__ import annotations

import click

from .common import EXIT_USAGE, die, project_of, state_dir_option, tools_option


@click.command("lsp")
@click.option("--stdio", is_flag=True, help="Talk over stdin and stdout (the default; editors pass it).")
@tools_option
@state_dir_option
def lsp(stdio: bool, tool_sources: tuple[str, ...], state_dir: str | None) -> None:
    """Serve plan files to an editor: check's diagnostics, completion, hover, go to definition,
    references, rename, outline and quick fixes. Start it in the project's folder (its dagplan.toml)."""
    try:
        from .. import lsp as server
    except ImportError:
        die("dagplan lsp needs pygls: pip install 'dagplan[lsp]'", EXIT_USAGE)
    server.serve(project_of(state_dir, tool_sources))
