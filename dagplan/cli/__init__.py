"""The ``dagplan`` command: a thin layer over the library API.

Each subcommand lives in its own module and is imported only when invoked, so
``dagplan check`` never pays for the interpreter (or litellm). Exit codes:
0 success, 1 invalid plan / failed run, 2 usage or I/O error.
"""

from __future__ import annotations

import importlib

import click

# name -> (module, attribute, one-line help)
COMMANDS: dict[str, tuple[str, str, str]] = {
    "check": ("dagplan.cli.check", "check", "Validate plan files (dry run, no execution)."),
    "fmt": ("dagplan.cli.check", "fmt", "Rewrite a plan (any dialect) as canonical YAML."),
    "graph": ("dagplan.cli.check", "graph", "Print a plan's graph as Mermaid or DOT."),
    "schema": ("dagplan.cli.check", "schema", "Print the plan JSON Schema."),
    "diff": ("dagplan.cli.diff", "diff", "What changed between two plans: side effects first (exit 1 if any)."),
    "test": ("dagplan.cli.test", "test", "Run plan test files (*.test.yaml) offline, with coverage."),
    "preview": ("dagplan.cli.run", "preview", "Show what a plan would run, running nothing."),
    "run": ("dagplan.cli.run", "run", "Run a plan."),
    "runs": ("dagplan.cli.runs", "runs", "List runs, or show one."),
    "resume": ("dagplan.cli.runs", "resume", "Resume an interrupted run."),
    "answer": ("dagplan.cli.answer", "answer", "Answer an approval gate a run is waiting at."),
    "cancel": ("dagplan.cli.runs", "cancel", "Stop a running or waiting run for good, keeping its record."),
    "discard": ("dagplan.cli.runs", "discard", "Remove a run and its state."),
    "events": ("dagplan.cli.runs", "events", "Print a run's event log."),
    "submit": ("dagplan.cli.pool", "submit", "Queue a run for the workers of the run database."),
    "worker": ("dagplan.cli.pool", "worker", "Run queued and orphaned runs of the run database."),
    "db": ("dagplan.cli.db", "db", "The run database (PostgreSQL): create or migrate its schema."),
    "serve": ("dagplan.cli.serve", "serve", "Watch runs in the browser (and answer gates, review plans)."),
    "tools": ("dagplan.cli.tools", "tools", "List the tools plans may call; lock MCP servers' tools."),
    "mcp": ("dagplan.cli.mcp", "mcp", "Serve dagplan to MCP hosts: check, preview and run plans."),
    "lsp": ("dagplan.cli.lsp", "lsp", "A language server for plan files (diagnostics, completion, hover...)."),
    "plan": ("dagplan.cli.plan", "plan", "Ask a model for a plan, validate and repair it."),
    "score": ("dagplan.cli.plan", "score", "Complexity score of a task (plan-first gate)."),
    "eval": ("dagplan.cli.plan", "evaluate", "Plan every task of a file with a model and score the plans."),
    "agent": ("dagplan.cli.plan", "agent", "Run the agent loop on a task; a person approves what acts."),
}


class LazyGroup(click.Group):
    def list_commands(self, ctx):
        return list(COMMANDS)

    def get_command(self, ctx, name):
        if name not in COMMANDS:
            return None
        module, attr, _ = COMMANDS[name]
        try:
            return getattr(importlib.import_module(module), attr)
        except (ImportError, AttributeError):
            return None  # not built yet

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


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(None, "-V", "--version", package_name="dagplan")
@click.option("-q", "--quiet", count=True, help="Less output: no progress lines or summaries (errors still show).")
@click.option("-v", "--verbose", count=True, help="More output: every file checked, every step's result.")
@click.pass_context
def cli(ctx: click.Context, quiet: int, verbose: int) -> None:
    """dagplan: validate, preview and run declarative plans for LLM agents."""
    ctx.obj = {"verbosity": verbose - quiet}


def main() -> None:
    from ..dsl.errors import DagplanError
    from .common import fail, guard_streams

    guard_streams()
    try:
        cli(prog_name="dagplan")
    except DagplanError as exc:  # a command's own error it did not render: the table's code, never a traceback
        fail(exc)
