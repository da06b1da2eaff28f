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
    """(from, to, label) per dependency; the label names the alternative of a branching output read (a
    step's own ``when:`` is on the step, once: :func:`_node_label`)."""
    out = []
    for step in plan.steps:
        labels = _branch_labels(plan, analysis, step)
        for dep in analysis.deps.get(step.id, ()):
            out.append((dep, step.id, " / ".join(labels.get(dep, ()))))
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
    when = f" when {step.guard.text}" if step.guard is not None else ""  # the condition, said once
    return f"{step_id}: {what}" + (" (for each)" if step.for_each is not None else "") + when


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
_LABEL_H, _LABEL_CHARS, _CHAR_W = 18, 40, 6.6
LAYOUT_LIMIT = 400  # steps laid out by grandalf; a larger plan gets columns (the layout grows faster than linearly)


def render_svg(plan: Plan, analysis: Analysis, statuses: Mapping[str, str] | None = None) -> str:
    """The plan as SVG, top to bottom: a layered layout (grandalf's Sugiyama: layers by dependency, crossings
    reduced, every edge label given room of its own so none overlaps a node or another label), one node per
    step (``id="node-<id>"``, class ``status-<status>``, ``data-step``), edges labelled with the branch they
    take and the condition they wait for (the whole label in a tooltip). Every text is escaped."""
    from html import escape

    statuses = statuses or {}
    found = edges(plan, analysis)
    layout = _layered(analysis, found) if len(analysis.order) <= LAYOUT_LIMIT else None
    nodes, paths, labels = layout or _columns(analysis, found)
    # the box holds every node, every label and every point an edge is routed through (a layered layout routes
    # some edges around the nodes, outside them)
    routed = [point for parts in paths for part in parts for point in part]
    xs = [x for x, _, w, _ in nodes.values()] + [x - w / 2 for x, _, w in labels] + [x for x, _ in routed]
    ys = [y for _, y, _, _ in nodes.values()] + [y - _LABEL_H / 2 for _, y, _ in labels] + [y for _, y in routed]
    dx, dy = _PAD - min(xs, default=0), _PAD - min(ys, default=0)
    right = [x + w for x, _, w, _ in nodes.values()] + [x + w / 2 for x, _, w in labels] + [x for x, _ in routed]
    bottom = [y + h for _, y, _, h in nodes.values()] + [y + _LABEL_H for _, y, _ in labels] + [y for _, y in routed]
    width = max(right, default=0) + dx + _PAD
    height = max(bottom, default=0) + dy + _PAD
    width, height = max(round(width), 200), max(round(height), 80)
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="graph" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" data-width="{width}" data-height="{height}" role="img" '
        'aria-label="plan graph">'
        '<defs><marker id="arrow" viewBox="0 0 8 8" refX="7" refY="4" markerWidth="7" markerHeight="7" '
        'orient="auto-start-reverse"><path d="M0,0 L8,4 L0,8 z" class="arrow"/></marker></defs>'
    ]
    for (src, dst, _), points in zip(found, paths):
        for i, part in enumerate(points):
            d = " ".join(f"{'M' if j == 0 else 'L'}{x + dx:.1f},{y + dy:.1f}" for j, (x, y) in enumerate(part))
            end = ' marker-end="url(#arrow)"' if i == len(points) - 1 else ""
            out.append(f'<path class="edge" data-from="{escape(src)}" data-to="{escape(dst)}" d="{d}"{end}/>')
    for (x, y, w), text in zip(labels, [label for _, _, label in found if label]):
        shown = text if len(text) <= _LABEL_CHARS else text[: _LABEL_CHARS - 1] + "\u2026"
        out.append(
            f'<g class="edge-label"><title>{escape(text)}</title>'
            f'<rect x="{x + dx - w / 2:.1f}" y="{y + dy - _LABEL_H / 2:.1f}" width="{w:.1f}" '
            f'height="{_LABEL_H}" rx="3"/>'
            f'<text x="{x + dx:.1f}" y="{y + dy + 4:.1f}">{escape(shown)}</text></g>'
        )
    for sid in analysis.order:
        x, y, _, _ = nodes[sid]
        x, y = round(x + dx), round(y + dy)
        step = plan.by_id[sid]
        what = step.tool or str(step.kind)
        kind = f"{what} (for each)" if step.for_each is not None else what
        status = escape(statuses.get(sid, "pending"))
        out.append(
            f'<g class="node status-{status}" id="node-{escape(sid)}" data-step="{escape(sid)}" tabindex="0">'
            f"<title>{escape(sid)}: {escape(kind)}</title>"
            f'<rect x="{x}" y="{y}" width="{_NODE_W}" height="{_NODE_H}" rx="6"/>'
            f'<text class="node-id" x="{x + 10}" y="{y + 19}">{escape(_cut(sid, 20))}</text>'
            f'<text class="node-kind" x="{x + 10}" y="{y + 36}">{escape(_cut(kind, 28))}</text>'
            f'<text class="node-status" x="{x + _NODE_W - 8}" y="{y + 19}" text-anchor="end">{status}</text></g>'
        )
    out.append("</svg>")
    return "".join(out)


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "\u2026"


_Layout = tuple[dict[str, tuple[float, float, float, float]], list[list[list[tuple[float, float]]]],
                list[tuple[float, float, float]]]  # fmt: skip


def _layered(analysis: Analysis, found: list[tuple[str, str, str]]) -> _Layout | None:
    """Nodes (left, top, width, height) by step, each edge's polylines (one, or two around its label),
    labels (centre x, centre y, width); None when grandalf is not installed."""
    try:
        from grandalf.graphs import Edge, Graph, Vertex
        from grandalf.layouts import SugiyamaLayout
        from grandalf.routing import route_with_lines
    except ImportError:
        return None

    class Box:  # what grandalf reads of a vertex (its size) and writes (its centre)
        def __init__(self, w: float, h: float):
            self.w, self.h, self.xy = w, h, (0.0, 0.0)

    class Line:  # what grandalf writes of an edge: its route
        points: list = []

        def setpath(self, points: list) -> None:
            self.points = [tuple(p) for p in points]

    vertices = {sid: Vertex(sid) for sid in analysis.order}
    for v in vertices.values():
        v.view = Box(_NODE_W, _NODE_H)
    links: list[list[Any]] = []
    label_vertices = []
    for i, (src, dst, label) in enumerate(found):
        if label:
            middle = Vertex(("label", i))
            shown = min(len(label), _LABEL_CHARS)
            middle.view = Box(shown * _CHAR_W + 12, _LABEL_H)
            label_vertices.append(middle)
            links.append([Edge(vertices[src], middle), Edge(middle, vertices[dst])])
        else:
            links.append([Edge(vertices[src], vertices[dst])])
    for part in (e for chain in links for e in chain):
        part.view = Line()
    graph = Graph(list(vertices.values()) + label_vertices, [e for chain in links for e in chain])
    left = 0.0
    for component in graph.C:  # side by side, each laid out on its own
        sugiyama = SugiyamaLayout(component)
        sugiyama.xspace, sugiyama.yspace = 28, 34
        sugiyama.route_edge = route_with_lines
        sugiyama.init_all()
        sugiyama.draw(4)
        boxes = [v.view for v in component.sV]
        low = min(b.xy[0] - b.w / 2 for b in boxes)
        shift = left - low
        for v in component.sV:
            v.view.xy = (v.view.xy[0] + shift, v.view.xy[1])
        for e in component.sE:
            e.view.points = [(x + shift, y) for x, y in e.view.points]
        left = max(b.xy[0] + b.w / 2 for b in boxes) + 48
    nodes: dict[str, tuple[float, float, float, float]] = {
        sid: (v.view.xy[0] - _NODE_W / 2, v.view.xy[1] - _NODE_H / 2, float(_NODE_W), float(_NODE_H))
        for sid, v in vertices.items()
    }
    paths: list[list[list[tuple[float, float]]]] = [[list(e.view.points) for e in chain] for chain in links]
    labels: list[tuple[float, float, float]] = [(v.view.xy[0], v.view.xy[1], v.view.w) for v in label_vertices]
    return nodes, paths, labels


def _columns(analysis: Analysis, found: list[tuple[str, str, str]]) -> _Layout:
    """The layout of a plan too large for :func:`_layered`: parallel groups as columns, labels at the middle."""
    nodes: dict[str, tuple[float, float, float, float]] = {}
    for col, group in enumerate(analysis.groups):
        for row, sid in enumerate(group):
            nodes[sid] = (col * (_NODE_W + _COL_GAP), row * (_NODE_H + _ROW_GAP), _NODE_W, _NODE_H)
    paths, labels = [], []
    for src, dst, label in found:
        (x1, y1, _, _), (x2, y2, _, _) = nodes[src], nodes[dst]
        start, end = (x1 + _NODE_W, y1 + _NODE_H / 2), (x2, y2 + _NODE_H / 2)
        paths.append([[start, end]])
        if label:
            labels.append(
                ((start[0] + end[0]) / 2, (start[1] + end[1]) / 2, min(len(label), _LABEL_CHARS) * _CHAR_W + 12)
            )
    return nodes, paths, labels
