"""``dagplan check``, ``fmt``, ``graph`` and ``schema``: parse arguments, call the API, render.

Exit codes: 0 valid (warnings allowed unless ``--strict``), 1 invalid,
2 usage or I/O error. Nothing heavy is imported here: ``--tools`` imports the
interpreter's tool loader only when given.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from .checking import FORMATS, UsageFailure, expand, run_check
from .common import EXIT_FAILED, EXIT_OK, EXIT_USAGE, exit_code, fail, finish, project_of, tools_option


@click.command("check")
@click.argument("files", nargs=-1, required=True)
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="text", show_default=True)
@click.option("--strict", is_flag=True, help="Treat warnings as errors (exit 1).")
@click.option(
    "--tools",
    "tool_paths",
    multiple=True,
    metavar="PATH_OR_MODULE",
    help="Python file or module registering tools: validate tool names and argument types.",
    hidden=True,  # the group's --tools (dagplan --help), taken here too
)
@click.option(
    "--plans-only",
    is_flag=True,
    help="Check only the files that are plans, leave other YAML/JSON alone (the pre-commit hook): a plan is "
    "under plans/ or examples/, named *.plan.yaml, has the plan $schema modeline or a top-level dagplan: key, "
    "or has steps that name a tool, an llm, a gate, a sub-plan or a loop.",
)
@click.option(
    "--exclude",
    multiple=True,
    metavar="REGEX",
    help="Skip the files a folder or a glob gives whose path matches (repeatable; as pre-commit's exclude).",
)
def check(
    files: tuple[str, ...],
    fmt: str,
    strict: bool,
    tool_paths: tuple[str, ...],
    plans_only: bool = False,
    exclude: tuple[str, ...] = (),
) -> None:
    """Validate plan files (dry run, no execution). FILES may be paths, globs or directories.

    \f
    The same body as the fast path that usually runs it before click is imported (checking.py)."""
    from .common import group_tools

    run_check(files, fmt, strict, group_tools(tool_paths), plans_only, exclude=exclude)


def _load_or_exit(path: str):
    from ..dsl.errors import LoadError
    from .._doors import load_file, load_text
    from ..render import render_text
    from .. import CheckResult

    try:
        return load_file(path) if path != "-" else load_text(sys.stdin.buffer.read(), "<stdin>")
    except LoadError as exc:
        sys.stderr.write(render_text([CheckResult(path, None, None, exc.diagnostics, None)]))
        finish(exit_code(d.code for d in exc.diagnostics))


@click.command("fmt")
@click.argument("files", nargs=-1, required=True)
@click.option("--check", "check_only", is_flag=True, help="Exit 1, with a diff, when a file would change.")
@click.option("--diff", "show_diff", is_flag=True, help="Print a unified diff instead of the formatted text.")
@click.option("-w", "--write", is_flag=True, help="Rewrite the files in place.")
@click.option("--dagger", is_flag=True, help="Spell references with \u2020 ($state.x -> \u2020state.x).")
@tools_option
def fmt(files: tuple[str, ...], check_only: bool, show_diff: bool, write: bool, dagger: bool,
        tool_sources: tuple[str, ...] = ()) -> None:  # fmt: skip
    """Rewrite plans (any dialect; files, globs, directories or - for stdin) as canonical YAML, with the
    project's tools (a ReWOO text's `Tool[text]` goes to the parameter they name, as `check` and `run` read it)."""
    from ..api import write_file
    from ..dsl.errors import DagplanError

    try:
        paths = expand(files)
    except UsageFailure as exc:
        click.echo(f"dagplan fmt: {exc}", err=True)
        finish(EXIT_USAGE)
    status = EXIT_OK
    project = project_of(tool_sources=tool_sources)
    for path in paths:
        document = _load_or_exit(path)
        try:
            formatted = project.format_document(document, refs=dagger)
        except DagplanError as exc:  # cannot-format: the file stays as it is
            for diag in exc.diagnostics:
                click.echo(diag.format(), err=True)
            status = EXIT_FAILED
            continue
        current = document.source_map.text if path == "-" else _read_text(path)
        if path.endswith(".json") and (check_only or show_diff or write):  # a JSON file stays JSON
            formatted = _as_json(formatted)
        if check_only or show_diff:
            if current != formatted:
                sys.stdout.write(_unified(current, formatted, path))
                if check_only:
                    click.echo(f"would reformat {path}", err=True)
                    status = EXIT_FAILED
        elif write and path != "-":
            if current != formatted:
                try:
                    write_file(path, formatted.encode("utf-8"), what="plan")
                except DagplanError as exc:
                    fail(exc)
        else:
            sys.stdout.write(formatted)
    finish(status)


def _as_json(formatted_yaml: str) -> str:
    """The canonical plan as JSON: the same keys in the same order, for a file that is JSON."""
    import json

    import yaml

    return json.dumps(yaml.safe_load(formatted_yaml), indent=2, ensure_ascii=False) + "\n"


def _read_text(path: str) -> str:
    return Path(path).read_bytes().decode("utf-8-sig", errors="surrogateescape")


def _unified(before: str, after: str, path: str) -> str:
    import difflib

    return "".join(
        difflib.unified_diff(before.splitlines(True), after.splitlines(True), f"{path} (as is)", f"{path} (formatted)")
    )


@click.command("graph")
@click.argument("file")
@click.option("--format", "fmt", type=click.Choice(["mermaid", "dot"]), default="mermaid", show_default=True)
def graph(file: str, fmt: str) -> None:
    """Print a plan's graph as Mermaid or DOT (branch edges labelled with the alternative)."""
    from .. import check as check_plan
    from ..render import GRAPH_RENDERERS, render_text

    result = check_plan(file, name=file)
    if result.analysis is None:
        sys.stderr.write(render_text([result]))
        finish(exit_code(d.code for d in result.errors))
    sys.stdout.write(GRAPH_RENDERERS[fmt](result.plan, result.analysis))


@click.command("schema")
@click.option("--tests", is_flag=True, help="The schema of plan test files (*.test.yaml) instead.")
def schema(tests: bool) -> None:
    """Print the plan JSON Schema (point an editor's yaml-language-server at it)."""
    import json

    from .. import plan_schema, test_schema

    found = test_schema() if tests else plan_schema()
    sys.stdout.write(json.dumps(found, indent=2, ensure_ascii=False) + "\n")
