"""What every subcommand shares: the exit codes, the rule that picks one, and the common options.

Exit codes (documented in the README): 0 success; 1 the plan or the run failed; 2 usage or
environment (a file that cannot be read, an unknown run or step, a bad configuration or
tools module); 3 a run stopped at an approval gate; 130 interrupted.
"""

from __future__ import annotations

import sys
from typing import NoReturn

import click

from ..dsl.errors import DagplanError

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_WAITING, EXIT_INTERRUPTED = 0, 1, 2, 3, 130

# diagnostics that are the caller's or the environment's fault, not the plan's
USAGE_CODES = frozenset(
    {
        "io",
        "not-found",
        "tools-import",
        "config",
        "unknown-run",
        "ambiguous-run",
        "unknown-step",
        "unknown-event-type",
        "bad-run-id",
        "bad-input",
        "missing-input",
        "extra-input",
        "empty-data",
        "bad-data",
        "no-model",
        "no-llm-support",
        "no-credentials",
    }
)


def exit_code(codes) -> int:
    """The one rule: 2 when any diagnostic is a usage or environment problem, else 1."""
    return EXIT_USAGE if any(code in USAGE_CODES for code in codes) else EXIT_FAILED


def fail(exc: DagplanError, code: int | None = None) -> NoReturn:
    """Print every diagnostic of ``exc`` and exit with ``code`` or the rule's code."""
    for diag in exc.diagnostics:
        click.echo(diag.format(), err=True)
    sys.exit(code if code is not None else exit_code(d.code for d in exc.diagnostics))


def verbosity() -> int:
    """-q / -v of the top command: below 0 quiet, 0 normal, above 0 verbose."""
    ctx = click.get_current_context(silent=True)
    obj = ctx.find_root().obj if ctx is not None else None
    return int((obj or {}).get("verbosity", 0))


def die(message: str, code: int) -> NoReturn:
    click.echo(f"error: {message}", err=True)
    sys.exit(code)


def tools_option(f):
    return click.option(
        "--tools",
        "tool_sources",
        multiple=True,
        metavar="FILE_OR_MODULE",
        help="Python file or module defining @dagplan.tool functions (repeatable; also `tools` in the config).",
    )(f)


def state_dir_option(f):
    """``--state`` / ``--state-dir``: a directory, or a ``postgresql://`` URL (the one option of every command)."""
    return click.option(
        "--state",
        "--state-dir",
        "state_dir",
        envvar=["DAGPLAN_STATE", "DAGPLAN_STATE_DIR"],
        default=None,
        metavar="DIR|URL",
        help="Where runs are kept: a directory or a postgresql:// URL (default: `state` in the configuration, "
        "$DAGPLAN_STATE, $DAGPLAN_STATE_DIR or ./.dagplan).",
    )(f)
