"""``dagplan check``, ``fmt``, ``graph`` and ``schema``: parse arguments, call the API, render.

Exit codes: 0 valid (warnings allowed unless ``--strict``), 1 invalid,
2 usage or I/O error. Nothing heavy is imported here: ``--tools`` imports the
interpreter's tool loader only when given.
"""

from __future__ import annotations

import glob
import os
import sys
from pathlib import Path
from typing import Iterable

import click

from .common import EXIT_FAILED, EXIT_OK, EXIT_USAGE, exit_code, fail

PLAN_SUFFIXES = (".yaml", ".yml", ".json")


class UsageFailure(Exception):
    """A problem with the command line or the files named on it (exit 2)."""


def expand(patterns: Iterable[str]) -> list[str]:
    """Files named by the arguments: paths as given, globs expanded (quoted ones too), dirs walked."""
    files: list[str] = []
    for pattern in patterns:
        if os.path.isdir(pattern):
            files += sorted(str(p) for p in Path(pattern).rglob("*") if p.suffix in PLAN_SUFFIXES and p.is_file())
        elif not os.path.exists(pattern) and glob.has_magic(pattern):
            matches = sorted(glob.glob(pattern, recursive=True))
            if not matches:
                raise UsageFailure(f"no files match {pattern!r}")
            files += [m for m in matches if os.path.isfile(m)]
        else:
            files.append(pattern)
    return list(dict.fromkeys(files))


def _exit_code(results, strict: bool) -> int:
    if exit_code(d.code for r in results for d in r.errors) == EXIT_USAGE:
        return EXIT_USAGE
    if any(not r.ok or (strict and r.warnings) for r in results):
        return EXIT_FAILED
    return EXIT_OK


@click.command("check")
@click.argument("files", nargs=-1, required=True)
@click.option("--format", "fmt", type=click.Choice(["text", "json", "github"]), default="text", show_default=True)
@click.option("--strict", is_flag=True, help="Treat warnings as errors (exit 1).")
@click.option(
    "--tools",
    "tool_paths",
    multiple=True,
    metavar="PATH_OR_MODULE",
    help="Python file or module registering tools: validate tool names and argument types.",
)
def check(files: tuple[str, ...], fmt: str, strict: bool, tool_paths: tuple[str, ...]) -> None:
    """Validate plan files (dry run, no execution). FILES may be paths, globs or directories."""
    from .. import check_files, load_config
    from ..dsl.errors import DagplanError
    from ..render import DIAGNOSTIC_RENDERERS, render_json, summary_line

    try:
        paths = expand(files)
    except UsageFailure as exc:
        click.echo(f"dagplan check: {exc}", err=True)
        sys.exit(EXIT_USAGE)
    try:
        config = load_config()
        results = check_files(paths, tool_paths, config)  # the configuration run uses, tools included
    except DagplanError as exc:
        fail(exc)
    worst = _worst_cases(results, config.max_items)
    if fmt == "json":
        sys.stdout.write(render_json(results, worst))
    else:
        sys.stdout.write(DIAGNOSTIC_RENDERERS[fmt](results))
    if fmt == "text":
        for name, bounds in worst.items():
            click.echo(f"{name}: worst case {bounds.steps} steps, {bounds.llm_steps} LLM steps", err=True)
        click.echo(summary_line(results), err=True)
    sys.exit(_exit_code(results, strict))


def _worst_cases(results, max_items: int | None) -> dict:
    """For plans with fan-out, sub-plans or loops: the most steps (and LLM steps) they can execute."""
    from .. import worst_case

    return {
        r.name: worst_case(r.plan, max_items)
        for r in results
        if r.plan is not None and any(s.for_each or s.plan or s.loop for s in r.plan.steps)
    }


def _load_or_exit(path: str):
    from ..dsl.errors import LoadError
    from .. import load_file
    from ..render import render_text
    from .. import CheckResult

    try:
        return load_file(path)
    except LoadError as exc:
        sys.stderr.write(render_text([CheckResult(path, None, None, exc.diagnostics, None)]))
        sys.exit(exit_code(d.code for d in exc.diagnostics))


@click.command("fmt")
@click.argument("file")
@click.option("--check", "check_only", is_flag=True, help="Exit 1 if the file is not already formatted.")
@click.option("-w", "--write", is_flag=True, help="Rewrite the file in place.")
def fmt(file: str, check_only: bool, write: bool) -> None:
    """Rewrite a plan (any dialect) as canonical YAML."""
    from .. import format_document

    from ..dsl.errors import DagplanError

    document = _load_or_exit(file)
    try:
        formatted = format_document(document)
    except DagplanError as exc:  # cannot-format: the file stays as it is
        for diag in exc.diagnostics:
            click.echo(diag.format(), err=True)
        sys.exit(EXIT_FAILED)
    if check_only:
        current = Path(file).read_text(encoding="utf-8", errors="surrogateescape")
        if current != formatted:
            click.echo(f"would reformat {file}", err=True)
            sys.exit(1)
        return
    if write:
        _write_atomically(Path(file), formatted)
        return
    sys.stdout.write(formatted)


def _write_atomically(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.dagplan-fmt.tmp")
    with open(tmp, "w", encoding="utf-8", newline="") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


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
        sys.exit(exit_code(d.code for d in result.errors))
    sys.stdout.write(GRAPH_RENDERERS[fmt](result.plan, result.analysis))


@click.command("schema")
def schema() -> None:
    """Print the plan JSON Schema (point an editor's yaml-language-server at it)."""
    import json

    from .. import plan_schema

    sys.stdout.write(json.dumps(plan_schema(), indent=2, ensure_ascii=False) + "\n")
