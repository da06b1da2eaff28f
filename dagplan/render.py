"""Renderers: diagnostics as text / json / github annotations, graphs as Mermaid / DOT.

One set of renderers for the CLI and anyone else showing check results. They
take :class:`CheckResult` values and return strings; printing is the caller's.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from .dsl import CheckResult
from .dsl.errors import Diagnostic, counted
from .dsl.ir import Plan, format_path
from .dsl.schedule import Analysis, state_refs, writers_of

# --- diagnostics ------------------------------------------------------------------------


SOURCE_WIDTH = 120  # characters of a source line shown under a diagnostic


def render_text(results: Sequence[CheckResult]) -> str:
    """Compiler-style: ``PATH:LINE:COL: error CODE: message``, the source line, a caret, the hint."""
    blocks = [_text_block(d, _source_lines(r)) for r in results for d in r.diagnostics]
    return "\n".join(blocks) + ("\n" if blocks else "")


def _text_block(diag: Diagnostic, lines: list[str] | None) -> str:
    out = [f"{diag.span}: {diag.severity} {diag.code}: {diag.message}"]
    if lines and 0 < diag.span.line <= len(lines):
        source = lines[diag.span.line - 1].rstrip("\r\n").expandtabs(1)
        caret = max(diag.span.col - 1, 0)
        if len(source) > SOURCE_WIDTH:  # a window around the caret, marked where cut
            start = max(0, min(caret - SOURCE_WIDTH // 2, len(source) - SOURCE_WIDTH))
            shown = source[start : start + SOURCE_WIDTH]
            lead = "\u2026" if start else ""
            source = lead + shown + ("\u2026" if start + SOURCE_WIDTH < len(source) else "")
            caret = caret - start + len(lead)
        out.append("    " + source)
        out.append("    " + " " * caret + "^")
    if diag.hint:
        out.append(f"    hint: {diag.hint}")
    return "\n".join(out)


def _source_lines(result: CheckResult) -> list[str] | None:
    """The document's text as lines: from the source map when it keeps the text, else from disk."""
    source_map = getattr(result.document, "source_map", None)
    text = getattr(source_map, "text", None)
    if isinstance(text, str):
        return text.splitlines()
    try:
        path = Path(result.name)
        if path.is_file() and path.stat().st_size < 16 * 1024 * 1024:
            return path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        pass
    return None


def passes(result: CheckResult, strict: bool = False) -> bool:
    """The one rule of a file's verdict: no error, and with ``--strict`` no warning either."""
    return result.ok and not (strict and result.warnings)


def summarize(results: Sequence[CheckResult], strict: bool = False) -> dict:
    errors = sum(len(r.errors) for r in results)
    warnings = sum(len(r.warnings) for r in results)
    valid = sum(1 for r in results if passes(r, strict))
    return {
        "files": len(results),
        "valid": valid,
        "invalid": len(results) - valid,
        "errors": errors,
        "warnings": warnings,
    }


def summary_line(results: Sequence[CheckResult], strict: bool = False) -> str:
    """``3 files checked: 2 valid, 1 invalid (4 errors, 1 warning)`` (``strict``: a warning invalidates)."""
    s = summarize(results, strict)
    head = f"{counted(s['files'], 'file')} checked: {s['valid']} valid, {s['invalid']} invalid"
    return f"{head} ({counted(s['errors'], 'error')}, {counted(s['warnings'], 'warning')})"


def render_json(results: Sequence[CheckResult], worst: Mapping[str, Any] | None = None) -> str:
    """One object; ``worst`` maps a file to the worst case of a composed plan (steps, LLM steps; with
    model calls, input tokens and cost when it calls models)."""
    files = [
        {"file": r.name, "valid": r.ok, "diagnostics": [d.to_json() for d in r.diagnostics]}
        | ({"worst_case": worst[r.name].to_json()} if worst and r.name in worst else {})
        for r in results
    ]
    return json.dumps({"files": files, "summary": summarize(results)}, ensure_ascii=False, indent=2) + "\n"


def render_github(results: Sequence[CheckResult]) -> str:
    """GitHub Actions workflow commands: ``::error file=…,line=…,col=…,title=CODE::message``."""
    lines = []
    for r in results:
        for d in r.diagnostics:
            props = [f"file={_gh_property(d.span.file)}"]
            if d.span.line:
                props += [f"line={d.span.line}", f"col={d.span.col}"]
            props.append(f"title={_gh_property(d.code)}")
            message = d.message + (f" (hint: {d.hint})" if d.hint else "")
            lines.append(f"::{d.severity} {','.join(props)}::{_gh_data(message)}")
    return "".join(line + "\n" for line in lines)


def _gh_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _gh_property(text: str) -> str:
    return _gh_data(text).replace(":", "%3A").replace(",", "%2C")


def render_sarif(results: Sequence[CheckResult]) -> str:
    """SARIF 2.1.0 (GitHub code scanning): one run, a rule per diagnostic code, a result per diagnostic."""
    from dagplan import __version__

    codes = sorted({d.code for r in results for d in r.diagnostics})
    rules = [{"id": code, "name": code} for code in codes]
    found = []
    for r in results:
        for d in r.diagnostics:
            location: dict[str, Any] = {"artifactLocation": {"uri": d.span.file or r.name}}
            if d.span.line:
                location["region"] = {"startLine": d.span.line, "startColumn": max(d.span.col, 1)}
            text = d.message + (f" (hint: {d.hint})" if d.hint else "")
            found.append(
                {
                    "ruleId": d.code,
                    "ruleIndex": codes.index(d.code),
                    "level": "error" if d.severity == "error" else "warning",
                    "message": {"text": text},
                    "locations": [{"physicalLocation": location}],
                }
            )
    log = {
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [
            {
                "tool": {"driver": {"name": "dagplan", "version": __version__, "rules": rules}},
                "results": found,
            }
        ],
    }
    return json.dumps(log, ensure_ascii=False, indent=2) + "\n"


DIAGNOSTIC_RENDERERS = {"text": render_text, "json": render_json, "github": render_github, "sarif": render_sarif}


# --- graphs ---------------------------------------------------------------------------------


def edges(plan: Plan, analysis: Analysis) -> list[tuple[str, str, str]]:
    """(from, to, label) per dependency; the label names the alternative of a branching output read."""
    out = []
    for step in plan.steps:
        labels = _branch_labels(plan, analysis, step)
        guard = f"when {step.guard.text}" if step.guard is not None else None
        for dep in analysis.deps.get(step.id, ()):
            label = " / ".join(labels.get(dep, ()))
            out.append((dep, step.id, " ; ".join(x for x in (label, guard) if x)))
    return out


def _branch_labels(plan: Plan, analysis: Analysis, step) -> dict[str, list[str]]:
    labels: dict[str, list[str]] = {}
    for ref in state_refs(step):
        for writer, alt in writers_of(analysis, ref):
            output = plan.by_id[writer].output
            if output is None or not output.branching:
                continue
            text = " && ".join(format_path(r.path).lstrip(".") for r in output.alternatives[alt])
            if alt >= len(output.own):  # a catch path
                text = "on error: " + text
            if text not in labels.setdefault(writer, []):
                labels[writer].append(text)
    return labels


def _node_label(plan: Plan, step_id: str) -> str:
    step = plan.by_id[step_id]
    what = step.tool or str(step.kind)  # llm, plan (a sub-plan), loop, gate
    return f"{step_id}: {what}" + (" (for each)" if step.for_each is not None else "")


def render_mermaid(plan: Plan, analysis: Analysis) -> str:
    """``graph TD``; nodes are numbered (ids like ``end`` would break Mermaid) and labelled by id."""
    number = {step_id: f"n{i}" for i, step_id in enumerate(analysis.order)}
    lines = ["graph TD"]
    for step_id in analysis.order:
        lines.append(f'    {number[step_id]}["{_mermaid_text(_node_label(plan, step_id))}"]')
    for src, dst, label in edges(plan, analysis):
        arrow = f' -- "{_mermaid_text(label)}" --> ' if label else " --> "
        lines.append(f"    {number[src]}{arrow}{number[dst]}")
    return "\n".join(lines) + "\n"


def _mermaid_text(text: str) -> str:
    return text.replace('"', "#quot;")


def render_dot(plan: Plan, analysis: Analysis) -> str:
    lines = ["digraph plan {", "    rankdir=TB;", "    node [shape=box];"]
    for step_id in analysis.order:
        lines.append(f"    {_dot_quote(step_id)} [label={_dot_quote(_node_label(plan, step_id))}];")
    for src, dst, label in edges(plan, analysis):
        attrs = f" [label={_dot_quote(label)}]" if label else ""
        lines.append(f"    {_dot_quote(src)} -> {_dot_quote(dst)}{attrs};")
    lines.append("}")
    return "\n".join(lines) + "\n"


def _dot_quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


GRAPH_RENDERERS = {"mermaid": render_mermaid, "dot": render_dot}


def iter_diagnostics(results: Iterable[CheckResult]) -> Iterable[Diagnostic]:
    for r in results:
        yield from r.diagnostics


# --- the run viewer's graph ---------------------------------------------------------------------

_NODE_W, _NODE_H, _COL_GAP, _ROW_GAP, _PAD = 190, 46, 90, 22, 20


def render_svg(plan: Plan, analysis: Analysis, statuses: Mapping[str, str] | None = None) -> str:
    """The plan as SVG: parallel groups as columns, one node per step (``id="node-<id>"``, class
    ``status-<status>``, ``data-step``), edges labelled with the branch they take. Every text is escaped."""
    from html import escape

    statuses = statuses or {}
    where: dict[str, tuple[int, int]] = {}
    rows = 0
    for col, group in enumerate(analysis.groups):
        for row, sid in enumerate(group):
            where[sid] = (_PAD + col * (_NODE_W + _COL_GAP), _PAD + row * (_NODE_H + _ROW_GAP))
        rows = max(rows, len(group))
    width = _PAD * 2 + len(analysis.groups) * (_NODE_W + _COL_GAP) - _COL_GAP
    height = _PAD * 2 + rows * (_NODE_H + _ROW_GAP) - _ROW_GAP
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="graph" width="{max(width, 200)}" '
        f'height="{max(height, 80)}" role="img" aria-label="plan graph">'
    ]
    for src, dst, label in edges(plan, analysis):
        (x1, y1), (x2, y2) = where[src], where[dst]
        x1, y1, x2, y2 = x1 + _NODE_W, y1 + _NODE_H // 2, x2, y2 + _NODE_H // 2
        mid = (x1 + x2) // 2
        out.append(
            f'<path class="edge" data-from="{escape(src)}" data-to="{escape(dst)}" '
            f'd="M{x1},{y1} C{mid},{y1} {mid},{y2} {x2},{y2}"/>'
        )
        if label:
            out.append(f'<text class="edge-label" x="{mid}" y="{(y1 + y2) // 2 - 4}">{escape(label[:40])}</text>')
    for sid in analysis.order:
        x, y = where[sid]
        step = plan.by_id[sid]
        what = step.tool or str(step.kind)
        kind = f"{what} (for each)" if step.for_each is not None else what
        status = escape(statuses.get(sid, "pending"))
        out.append(
            f'<g class="node status-{status}" id="node-{escape(sid)}" data-step="{escape(sid)}" tabindex="0">'
            f'<rect x="{x}" y="{y}" width="{_NODE_W}" height="{_NODE_H}" rx="6"/>'
            f'<text class="node-id" x="{x + 10}" y="{y + 19}">{escape(sid[:26])}</text>'
            f'<text class="node-kind" x="{x + 10}" y="{y + 36}">{escape(kind[:30])}</text>'
            f'<text class="node-status" x="{x + _NODE_W - 8}" y="{y + 19}" text-anchor="end">{status}</text></g>'
        )
    out.append("</svg>")
    return "".join(out)
