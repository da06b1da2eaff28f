"""``dagplan test``: run plan test files offline, report like pytest, coverage and untested paths."""

from __future__ import annotations

import os

import click

from ..dsl.errors import DagplanError
from .common import EXIT_FAILED, EXIT_OK, EXIT_USAGE, OUTPUT_FILE, die, exit_code, fail, finish, verbosity


@click.command("test")
@click.argument("paths", nargs=-1)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "json", "junit", "github"]),
    default="text",
    show_default=True,
    help="junit: JUnit XML for CI systems; github: annotations at each failing assertion's line.",
)
@click.option("-o", "--output", type=OUTPUT_FILE, default=None, help="Write the report to FILE (e.g. junit.xml).")
@click.option("-k", "select", default=None, metavar="TEXT", help="Only cases whose name contains TEXT.")
@click.option("--coverage", is_flag=True, help="Report each plan's branch coverage (text, or in the JSON).")
@click.option(
    "--fail-under",
    type=click.FloatRange(0, 100),
    default=None,
    metavar="PERCENT",
    help="Exit 1 when a plan's coverage is below PERCENT (implies --coverage).",
)
@click.option(
    "--paths",
    "paths_of",
    default=None,
    metavar="PLAN",
    help="Print a starting test case for each branch combination of PLAN no case covers.",
)
@click.option(
    "--max-paths", type=click.IntRange(1), default=64, show_default=True, help="Combinations enumerated by --paths."
)
def test(paths, fmt, output, select, coverage, fail_under, paths_of, max_paths) -> None:
    """Run the cases of plan test files (*.test.yaml) offline: mocked tools, models and gates, or
    recorded cassettes. PATHS are test files, directories (searched) or globs; default: the current
    directory. Exit 0 all passed, 1 a case failed (or coverage under --fail-under), 2 a test file
    cannot run."""
    from .. import plantests
    from ..render_tests import RENDERERS, render_coverage, render_json, render_paths, render_text

    selection = list(paths) or ["."]
    try:
        found = plantests.find_tests(selection)
        if not found and paths_of is None:
            die(f"no test files (*.test.yaml) in {', '.join(selection)}", EXIT_USAGE)
        missing = [p for p in found if not os.path.exists(p)]
        if missing:
            die(f"no such file: {missing[0]}", EXIT_USAGE)
        coverage = coverage or fail_under is not None
        report = plantests.test(found, select=select, coverage=coverage or paths_of is not None)
    except DagplanError as exc:
        fail(exc)
    if fmt == "json":
        text = render_json(report, coverage=coverage)
    elif fmt == "text":
        text = render_text(report, verbose=verbosity() > 0)
        if coverage:
            text += "\n" + render_coverage(report.coverage())
    else:
        text = RENDERERS[fmt](report)
    if paths_of is not None:
        try:
            untested = plantests.untested_paths(report, paths_of, max_paths)
        except DagplanError as exc:
            fail(exc)
        text = render_paths(untested) if fmt != "json" else _json_paths(untested)
    _emit(text, output)
    if report.errors:  # a test file that cannot be run: unreadable (2), or wrong (a finding, 1)
        finish(exit_code(d.code for _, exc in report.errors for d in exc.diagnostics))
    low = [c for c in report.coverage() if c.percent < fail_under] if fail_under is not None else []
    for c in low:
        click.echo(f"coverage of {c.plan} is {c.percent:.1f}%, under --fail-under {fail_under:g}", err=True)
    finish(EXIT_FAILED if report.failed or low else EXIT_OK)


def _json_paths(untested) -> str:
    import json

    return json.dumps(untested.to_json(), indent=2, ensure_ascii=False)


def _emit(text: str, output: str | None) -> None:
    if output is None:
        click.echo(text)
        return
    with open(output, "w", encoding="utf-8") as handle:
        handle.write(text + "\n")
