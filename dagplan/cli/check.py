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

from .common import EXIT_FAILED, EXIT_OK, EXIT_USAGE, Exit, exit_code, fail, finish, verbosity

PLAN_SUFFIXES = (".yaml", ".yml", ".json")


class UsageFailure(Exception):
    """A problem with the command line or the files named on it (exit 2)."""


def expand(patterns: Iterable[str]) -> list[str]:
    """Files named by the arguments: a path that exists is that file (``[draft].yaml`` too), ``-`` is
    standard input, globs are expanded (quoted ones too), directories walked for plan files. A
    selection that names no plan file is a usage error (exit 2), whatever produced it."""
    files: list[str] = []
    for pattern in patterns:
        if pattern == "-" or (os.path.exists(pattern) and not os.path.isdir(pattern)):
            files.append(pattern)
        elif os.path.isdir(pattern):
            found = sorted(str(p) for p in Path(pattern).rglob("*") if p.suffix in PLAN_SUFFIXES and p.is_file())
            if not found:
                raise UsageFailure(f"no plan files ({', '.join(PLAN_SUFFIXES)}) in {pattern!r}")
            files += found
        elif glob.has_magic(pattern):
            matches = [m for m in sorted(glob.glob(pattern, recursive=True)) if os.path.isfile(m)]
            if not matches:
                raise UsageFailure(f"no files match {pattern!r}")
            files += matches
        else:
            files.append(pattern)  # a missing file: the loader says so (io)
    return list(dict.fromkeys(files))


def _exit_code(results, strict: bool) -> Exit:
    if exit_code(d.code for r in results for d in r.errors) == EXIT_USAGE:
        return EXIT_USAGE
    from ..render import passes

    if not all(passes(r, strict) for r in results):
        return EXIT_FAILED
    return EXIT_OK


@click.command("check")
@click.argument("files", nargs=-1, required=True)
@click.option(
    "--format", "fmt", type=click.Choice(["text", "json", "github", "sarif"]), default="text", show_default=True
)
@click.option("--strict", is_flag=True, help="Treat warnings as errors (exit 1).")
@click.option(
    "--tools",
    "tool_paths",
    multiple=True,
    metavar="PATH_OR_MODULE",
    help="Python file or module registering tools: validate tool names and argument types.",
)
@click.option(
    "--plans-only",
    is_flag=True,
    help="Check only the files that are plans, leave other YAML/JSON alone (the pre-commit hook): a plan is "
    "under plans/ or examples/, named *.plan.yaml, has the plan $schema modeline or a top-level dagplan: key, "
    "or has steps that name a tool, an llm, a gate, a sub-plan or a loop.",
)
def check(
    files: tuple[str, ...], fmt: str, strict: bool, tool_paths: tuple[str, ...], plans_only: bool = False
) -> None:
    """Validate plan files (dry run, no execution). FILES may be paths, globs or directories."""
    from .. import api, check_files, load_config
    from ..dsl.errors import DagplanError, counted
    from ..render import DIAGNOSTIC_RENDERERS, render_json, summary_line

    try:
        paths = expand(files)
    except UsageFailure as exc:
        click.echo(f"dagplan check: {exc}", err=True)
        finish(EXIT_USAGE)
    others = 0
    if plans_only:
        kept = [p for p in paths if p == "-" or api.is_plan_file(p)]
        others, paths = len(paths) - len(kept), kept
        if not paths:
            click.echo(f"dagplan check: no plan among {counted(others, 'YAML/JSON file')}: nothing to check (a plan "
                       "is under plans/ or examples/, named *.plan.yaml, has the plan $schema modeline, or has "
                       "steps that name a tool, an llm or a gate)", err=True)  # fmt: skip
            finish(EXIT_OK)
    try:
        config = load_config()
        results = check_files(paths, tool_paths, config)  # the configuration run uses, tools included
    except DagplanError as exc:
        fail(exc)
    untooled = not tool_paths and not config.tools and any(r.plan is not None and r.plan.tool_names for r in results)
    worst = _worst_cases(results, config.max_items)
    if fmt == "json":
        sys.stdout.write(render_json(results, worst))
    else:
        sys.stdout.write(DIAGNOSTIC_RENDERERS[fmt](results))
    sys.stdout.flush()  # before the summary on stderr: a terminal (2>&1) shows them in order
    if fmt == "text" and verbosity() >= 0:
        if verbosity() > 0:
            for r in results:
                if r.ok and not r.diagnostics:
                    click.echo(f"{r.name}: valid", err=True)
        for name, bounds in worst.items():
            text = (
                bounds.summary()
                if hasattr(bounds, "summary")
                else (f"worst case {counted(bounds.steps, 'step')}, {counted(bounds.llm_steps, 'LLM step')}")
            )
            click.echo(f"{name}: {text}", err=True)
        if untooled:
            click.echo("note: tool names and arguments were not checked (no tools known here): give --tools FILE, "
                       "or `tools = [...]` in dagplan.toml", err=True)  # fmt: skip
        line = summary_line(results, strict)
        click.echo(line + (f"; {counted(others, 'other YAML/JSON file')} left alone (not plans)" if others else ""),
                   err=True)  # fmt: skip
    finish(_exit_code(results, strict))


def _worst_cases(results, max_items: int | None) -> dict:
    """For plans with fan-out, sub-plans, loops or model calls: the most steps they can execute, and
    what their model calls can cost (``worst case 61 steps, 12 model calls, <= 38k input tokens, <= $0.19``)."""
    from .. import worst_case

    out = {}
    for r in results:
        if r.plan is None:
            continue
        if any(s.llm for s in r.plan.steps) or any(s.plan or s.loop for s in r.plan.steps):
            from .. import api

            found = api.estimate(r.plan)
            if found.llm:
                out[r.name] = found
                continue
        if any(s.for_each or s.plan or s.loop for s in r.plan.steps):
            out[r.name] = worst_case(r.plan, max_items)
    return out


def _load_or_exit(path: str):
    from ..dsl.errors import LoadError
    from .. import load_file, load_text
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
def fmt(files: tuple[str, ...], check_only: bool, show_diff: bool, write: bool, dagger: bool) -> None:
    """Rewrite plans (any dialect; files, globs, directories or - for stdin) as canonical YAML."""
    from .. import format_document
    from ..api import write_file
    from ..dsl.errors import DagplanError

    try:
        paths = expand(files)
    except UsageFailure as exc:
        click.echo(f"dagplan fmt: {exc}", err=True)
        finish(EXIT_USAGE)
    status = EXIT_OK
    for path in paths:
        document = _load_or_exit(path)
        try:
            formatted = format_document(document, refs=dagger)
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
