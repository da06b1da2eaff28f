"""Renderers of plan tests: a summary like pytest's, JSON, JUnit XML, GitHub annotations, coverage."""

from __future__ import annotations

import json
from typing import Any, Sequence
from xml.sax.saxutils import escape as _escape
from xml.sax.saxutils import quoteattr as _quoteattr

from .render import _gh_data, _gh_property


def render_text(report: Any, verbose: bool = False) -> str:
    lines: list[str] = []
    by_file: dict[str, list] = {}
    for result in report.results:
        by_file.setdefault(result.suite.path, []).append(result)
    for path, results in by_file.items():
        if verbose:
            lines += [
                f"{path}::{r.name} {'PASSED' if r.passed else 'FAILED'} ({r.duration * 1000:.0f} ms)" for r in results
            ]
        else:
            lines.append(f"{path} {''.join('.' if r.passed else 'F' for r in results)}")
    for path, _ in report.errors:
        lines.append(f"{path} E")
    failed = [r for r in report.results if not r.passed]
    if failed or report.errors:
        lines.append("")
    for path, error in report.errors:
        lines.append(f"ERROR {path}: cannot run its cases")
        lines += ["  " + d.format().replace("\n", "\n  ") for d in error.diagnostics]
    for result in failed:
        lines.append(f"FAILED {result.span} {result.name}")
        for failure in result.failures:
            text = failure.message.replace("\n", "\n      ")
            lines.append(f"  {failure.span.line}:{failure.span.col}: {text}")
        lines += _step_table(result.steps)
    lines.append(summary_line(report))
    return "\n".join(lines)


def _step_table(steps: Sequence[dict]) -> list[str]:
    """A failing case's steps, like the run table: what each did, who answered its call, its output."""
    if not steps:
        return []
    from .dsl.errors import printable
    from .views import cut, table

    rows = [("step", "call", "by", "status", "output")]
    rows += [(s["step"], s["call"], s["by"] or "-", s["status"], printable(cut(s["output"], 60))) for s in steps]
    return ["    " + line for line in table(rows)]


def summary_line(report: Any) -> str:
    parts = []
    if report.failed:
        parts.append(f"{report.failed} failed")
    parts.append(f"{report.passed} passed")
    if report.errors:
        parts.append(f"{len(report.errors)} error{'s' if len(report.errors) > 1 else ''}")
    return f"{', '.join(parts)} in {report.duration:.2f}s"


def render_json(report: Any, coverage: bool = False) -> str:
    return json.dumps(report.to_json(coverage), indent=2, ensure_ascii=False, default=str)


def _xml_safe(text: str) -> str:
    """What XML 1.0 cannot hold (control characters, surrogates, U+FFFE/U+FFFF) shown as escapes."""
    from .dsl.errors import printable

    return printable(text).replace("\ufffe", "\\ufffe").replace("\uffff", "\\uffff")


def quoteattr(text: str) -> str:
    return _quoteattr(_xml_safe(text))


def escape(text: str) -> str:
    return _escape(_xml_safe(text))


def render_junit(report: Any) -> str:
    """JUnit XML: a testsuite per test file, a testcase per case (errors for files that cannot run)."""
    out = ['<?xml version="1.0" encoding="UTF-8"?>']
    total_failed = report.failed
    out.append(
        f'<testsuites name="dagplan" tests="{len(report.results) + len(report.errors)}" failures="{total_failed}" '
        f'errors="{len(report.errors)}" time="{report.duration:.3f}">'
    )
    by_file: dict[str, list] = {}
    for result in report.results:
        by_file.setdefault(result.suite.path, []).append(result)
    for path, results in by_file.items():
        failed = sum(not r.passed for r in results)
        time = sum(r.duration for r in results)
        out.append(
            f'  <testsuite name={quoteattr(path)} tests="{len(results)}" failures="{failed}" errors="0" '
            f'time="{time:.3f}">'
        )
        for r in results:
            head = (
                f"    <testcase classname={quoteattr(path)} name={quoteattr(r.name)} file={quoteattr(path)} "
                f'line="{r.span.line}" time="{r.duration:.3f}"'
            )
            if r.passed:
                out.append(head + "/>")
                continue
            out.append(head + ">")
            text = "\n".join(f"{f.span}: {f.message}" for f in r.failures)
            out.append(
                f"      <failure message={quoteattr(r.failures[0].message.splitlines()[0])}>{escape(text)}</failure>"
            )
            out.append("    </testcase>")
        out.append("  </testsuite>")
    for path, error in report.errors:
        text = "\n".join(d.format() for d in error.diagnostics)
        out.append(f'  <testsuite name={quoteattr(path)} tests="1" failures="0" errors="1" time="0">')
        out.append(f'    <testcase classname={quoteattr(path)} name="(load)">')
        out.append(f"      <error message={quoteattr(error.diagnostics[0].message)}>{escape(text)}</error>")
        out.append("    </testcase>")
        out.append("  </testsuite>")
    out.append("</testsuites>")
    return "\n".join(out)


def render_github(report: Any) -> str:
    """GitHub workflow commands: an error annotation at each failing assertion's line."""
    out = []
    for _, error in report.errors:
        for d in error.diagnostics:
            where = f"file={_gh_property(d.span.file)}" + (
                f",line={d.span.line},col={d.span.col}" if d.span.line else ""
            )
            out.append(f"::error {where},title={_gh_property('dagplan test: ' + d.code)}::{_gh_data(d.message)}")
    for r in report.results:
        for f in r.failures:
            where = f"file={_gh_property(r.suite.path)},line={f.span.line},col={f.span.col}"
            out.append(f"::error {where},title={_gh_property('dagplan test: ' + r.name)}::{_gh_data(f.message)}")
    out.append(summary_line(report))
    return "\n".join(out)


RENDERERS = {"text": render_text, "json": render_json, "junit": render_junit, "github": render_github}


def render_coverage(coverage: Sequence[Any]) -> str:
    lines = ["", "branch coverage"]
    width = max((len(c.plan) for c in coverage), default=4)
    for c in coverage:
        lines.append(f"  {c.plan:<{width}}  {len(c.hit):>3}/{len(c.points):<3} {c.percent:5.1f}%")
        for p in c.missed:
            lines.append(f"  {'':<{width}}    missed: {p.label}")
    return "\n".join(lines)


def render_paths(paths: Any) -> str:
    if not paths.untested:
        more = " (enumeration stopped at the bound)" if paths.truncated else ""
        return f"{paths.plan}: every one of {paths.total} branch combinations is covered{more}"
    head = (
        f"# {paths.plan}: {len(paths.untested)} of {paths.total} branch combinations have no case"
        + (" (more were not enumerated: raise --max-paths)" if paths.truncated else "")
        + "\n# starting cases (fill in the TODOs):\n"
    )
    return head + paths.to_yaml()
