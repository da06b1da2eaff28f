"""The ``dagplan`` click group: each subcommand (:data:`~dagplan.cli.COMMANDS`) imported when invoked."""

from __future__ import annotations

import importlib

import click

from ..dsl.errors import DagplanError

from . import COMMANDS
from .checking import QUIET, VERBOSE
from .common import STATE_HELP


class LazyGroup(click.Group):
    def list_commands(self, ctx):
        return list(COMMANDS)

    def get_command(self, ctx, name):
        if name not in COMMANDS:
            return None
        module, attr, _ = COMMANDS[name]
        try:
            command = getattr(importlib.import_module(module), attr)
        except (ImportError, AttributeError):
            return None  # not built yet
        return _saying_project_options(command)

    def resolve_command(self, ctx, args):
        """An unknown subcommand suggests the closest one (``dagplan chek`` -> ``check``), as click does
        for eager groups."""
        name = args[0] if args else ""
        if name and not name.startswith("-") and name not in COMMANDS:
            from ..dsl.errors import did_you_mean

            close = did_you_mean(name, COMMANDS)
            ctx.fail(f"No such command {name!r}." + (f" {close[0].upper()}{close[1:]}" if close else ""))
        return super().resolve_command(ctx, args)

    def format_commands(self, ctx, formatter):
        rows = [(name, help_) for name, (_, _, help_) in COMMANDS.items() if self.get_command(ctx, name)]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


def _saying_project_options(command: click.Command) -> click.Command:
    """A command that takes the group's --state / --tools after its name too says so once, under its options
    (they are declared on the group: ``dagplan --help``)."""
    from .common import PROJECT_OPTIONS

    taken = [p.opts[0] for p in command.params if p.name in PROJECT_OPTIONS]
    if taken and not command.epilog:
        command.epilog = (f"Also takes {' and '.join(sorted(taken, reverse=True))} (where runs are kept, the tools):"
                          " see dagplan --help.")  # fmt: skip
    return command


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(None, "-V", "--version", package_name="dagplan")
@click.option(*QUIET, count=True, help="Less output: no progress lines or summaries (errors still show).")
@click.option(*VERBOSE, count=True, help="More output: every file checked, every step's result.")
@click.option("--state", "state", default=None, metavar="DIR|URL", help=STATE_HELP)
@click.option("--tools", "tools", multiple=True, metavar="FILE_OR_MODULE",
              help="Python file or module defining @dagplan.tool functions, for every command (repeatable; with "
              "`tools` in the configuration).")  # fmt: skip
@click.pass_context
def cli(ctx: click.Context, quiet: int, verbose: int, state: str | None, tools: tuple[str, ...]) -> None:
    """dagplan: validate, preview and run declarative plans for LLM agents.

    Every command works on the project of the working directory (its dagplan.toml, found up to the project's
    root): its tools, where its runs are kept, its secrets. --state and --tools apply to every command, given
    here or after the command's name (dagplan run plan.yaml --tools tools.py)."""
    ctx.obj = {"verbosity": verbose - quiet, "state": state, "tools": tools}
    from .common import project_of

    try:
        project_of().use_secrets()  # the project's secrets, masked at every sink this command writes to
    except DagplanError:
        pass  # a configuration that cannot be read: the command says so (an MCP server, to its client)
