"""The ``dagplan`` command: a thin layer over the library API.

Each subcommand lives in its own module and is imported only when invoked, so
``dagplan check`` never pays for the interpreter (or litellm); and ``check``, started by pre-commit for
every commit, usually runs before click is even imported (``checking.py``). Exit codes:
0 success, 1 invalid plan / failed run, 2 usage or I/O error.
"""

from __future__ import annotations

import sys
from typing import Any

# name -> (module, attribute, one-line help)
COMMANDS: dict[str, tuple[str, str, str]] = {
    "init": ("dagplan.cli.init", "init", "Start a project: tools, a plan, its test, the configuration, a hook."),
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
    "schedule": ("dagplan.cli.pool", "schedule", "List the schedules the workers fire: next time, last run."),
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


def main() -> None:
    from ..dsl.errors import DagplanError
    from .common import fail, guard_streams

    guard_streams()
    try:
        from .checking import fast_check, run_check

        found = fast_check(sys.argv[1:])
        if found is not None:
            run_check(found["files"], found["fmt"], found["strict"], found["tool_paths"], found["plans_only"],
                      found["verbosity"], found["exclude"])  # fmt: skip
        from .group import cli

        cli(prog_name="dagplan")
    except DagplanError as exc:  # a command's own error it did not render: the table's code, never a traceback
        fail(exc)


def __getattr__(name: str) -> Any:
    """``dagplan.cli.cli``, the click group (group.py), imported when asked for."""
    if name == "cli":
        from .group import cli

        return cli
    raise AttributeError(name)
