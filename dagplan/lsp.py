"""``dagplan lsp``: a language server for plan files and plan test files, over stdio (pygls).

- Diagnostics on open and on change (debounced): exactly ``dagplan check``'s, codes, positions, hints
  and warnings, read with the same configuration (started in the project's folder).
- Completion: tool names with their signatures after ``tool:``, step ids after ``#`` and in ``deps``,
  ``†state.`` paths the plan writes, ``†input.`` names it declares, the chosen tool's argument names,
  the keys of a step.
- Hover: a tool's signature, description and purity; a step's call, what it writes and who reads it.
- Go to definition (step ids, ``†state`` paths to the writing step, tools to their Python source),
  references and rename of a step id, the steps as an outline, and a quick fix for every diagnostic
  whose hint is a did-you-mean.

Like the CLI and the viewer, it calls only the public API.
"""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from . import api

DEBOUNCE = 0.05  # seconds of quiet before a changed document is checked again (typing bursts coalesce)
STEP_KEYS = ("id", "description", "tool", "args", "llm", "system", "model", "params", "tools", "output_schema",
             "max_iterations", "output", "deps", "when", "retry", "timeout", "catch", "purity", "for_each",
             "max_items", "gate", "plan", "input", "loop")  # fmt: skip
_ID = re.compile(r"""^(\s*)(?:-\s+)?["']?id["']?\s*:\s*["']?([A-Za-z0-9_][A-Za-z0-9_-]*)""")
_WORD = re.compile(r"[A-Za-z0-9_.\u2020$#-]+")
_STATE = re.compile(r"[\u2020$]state\.([A-Za-z0-9_.\[\]]+)")
_PLACEHOLDER = re.compile(r"#([A-Za-z_][A-Za-z0-9_-]*)")
_DID_YOU_MEAN = re.compile(r"did you mean '([^']+)'\?")


@dataclass
class StepAt:
    id: str
    line: int  # 0-based, the line of its `id:`
    col: int
    end: int = 0  # the last line of the step (0-based, inclusive)
    tool: str | None = None
    writes: list[str] = field(default_factory=list)
    output_line: int | None = None


def index(text: str) -> list[StepAt]:
    """The steps of a plan's text with their lines (a scan that works on half-written plans too)."""
    lines = text.splitlines()
    steps: list[StepAt] = []
    for number, line in enumerate(lines):
        found = _ID.match(line)
        if found and (line.lstrip().startswith("-") or (steps and _indent(line) == _indent(lines[steps[-1].line]))):
            steps.append(StepAt(found.group(2), number, line.index(found.group(2))))
    for i, step in enumerate(steps):
        step.end = (steps[i + 1].line - 1) if i + 1 < len(steps) else len(lines) - 1
        for number in range(step.line, step.end + 1):
            line = lines[number]
            tool = re.match(r"""^\s*(?:-\s+)?["']?tool["']?\s*:\s*["']?([^"'\s,}]+)""", line)
            if tool:
                step.tool = tool.group(1)
            if re.match(r"""^\s*(?:-\s+)?["']?output["']?\s*:""", line):
                step.writes += _STATE.findall(line)
                step.output_line = number
    return steps


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" -"))


def word_at(line: str, col: int) -> tuple[str, int, int]:
    for found in _WORD.finditer(line):
        if found.start() <= col <= found.end():
            return found.group(0), found.start(), found.end()
    return "", col, col


def build() -> Any:
    """The language server (a pygls ``LanguageServer``) with every feature registered."""
    from lsprotocol import types as t
    from pygls.lsp.server import LanguageServer

    server = LanguageServer("dagplan", api_version())
    pending: dict[str, asyncio.Task] = {}

    def text_of(uri: str) -> str:
        return server.workspace.get_text_document(uri).source

    def publish(uri: str) -> None:
        name = Path(unquote(urlparse(uri).path)).name or "plan.yaml"
        try:
            result = api.check_text(text_of(uri), name)
            found = [_diagnostic(t, d, text_of(uri)) for d in result.diagnostics]
        except Exception as exc:  # noqa: BLE001 - a configuration or tools problem: say it, at the top
            found = [t.Diagnostic(range=t.Range(t.Position(0, 0), t.Position(0, 1)), message=str(exc),
                                  severity=t.DiagnosticSeverity.Error, source="dagplan")]  # fmt: skip
        server.text_document_publish_diagnostics(t.PublishDiagnosticsParams(uri=uri, diagnostics=found))

    @server.feature(t.TEXT_DOCUMENT_DID_OPEN)
    def did_open(ls: Any, params: t.DidOpenTextDocumentParams) -> None:
        publish(params.text_document.uri)

    @server.feature(t.TEXT_DOCUMENT_DID_CHANGE)
    async def did_change(ls: Any, params: t.DidChangeTextDocumentParams) -> None:
        uri = params.text_document.uri
        if uri in pending:
            pending[uri].cancel()

        async def later() -> None:
            await asyncio.sleep(DEBOUNCE)
            publish(uri)

        pending[uri] = asyncio.ensure_future(later())

    @server.feature(t.TEXT_DOCUMENT_DID_SAVE)
    def did_save(ls: Any, params: t.DidSaveTextDocumentParams) -> None:
        publish(params.text_document.uri)

    @server.feature(t.TEXT_DOCUMENT_COMPLETION, t.CompletionOptions(trigger_characters=["#", ".", " "]))
    def completion(ls: Any, params: t.CompletionParams) -> t.CompletionList:
        text = text_of(params.text_document.uri)
        line = (text.splitlines() or [""])[params.position.line] if text.splitlines() else ""
        prefix = line[: params.position.character]
        return t.CompletionList(is_incomplete=False, items=complete(t, text, prefix, params.position.line))

    @server.feature(t.TEXT_DOCUMENT_HOVER)
    def hover(ls: Any, params: t.HoverParams) -> t.Hover | None:
        text = text_of(params.text_document.uri)
        lines = text.splitlines()
        if params.position.line >= len(lines):
            return None
        word, _, _ = word_at(lines[params.position.line], params.position.character)
        shown = describe(text, word)
        return t.Hover(contents=t.MarkupContent(kind=t.MarkupKind.Markdown, value=shown)) if shown else None

    @server.feature(t.TEXT_DOCUMENT_DEFINITION)
    def definition(ls: Any, params: t.DefinitionParams) -> t.Location | None:
        uri = params.text_document.uri
        text = text_of(uri)
        word, _, _ = word_at(text.splitlines()[params.position.line], params.position.character)
        found = define(text, word)
        if found is None:
            return None
        target, (line, col) = found
        return t.Location(uri=target or uri, range=t.Range(t.Position(line, col), t.Position(line, col)))

    @server.feature(t.TEXT_DOCUMENT_REFERENCES)
    def references(ls: Any, params: t.ReferenceParams) -> list[t.Location]:
        uri = params.text_document.uri
        text = text_of(uri)
        word, _, _ = word_at(text.splitlines()[params.position.line], params.position.character)
        return [t.Location(uri=uri, range=t.Range(t.Position(n, a), t.Position(n, b)))
                for n, a, b in occurrences(text, word.lstrip("#"))]  # fmt: skip

    @server.feature(t.TEXT_DOCUMENT_RENAME)
    def rename(ls: Any, params: t.RenameParams) -> t.WorkspaceEdit | None:
        uri = params.text_document.uri
        text = text_of(uri)
        word, _, _ = word_at(text.splitlines()[params.position.line], params.position.character)
        edits = [t.TextEdit(range=t.Range(t.Position(n, a), t.Position(n, b)), new_text=params.new_name)
                 for n, a, b in occurrences(text, word.lstrip("#"))]  # fmt: skip
        return t.WorkspaceEdit(changes={uri: edits}) if edits else None

    @server.feature(t.TEXT_DOCUMENT_DOCUMENT_SYMBOL)
    def symbols(ls: Any, params: t.DocumentSymbolParams) -> list[t.DocumentSymbol]:
        text = text_of(params.text_document.uri)
        out = []
        for step in index(text):
            whole = t.Range(t.Position(step.line, 0), t.Position(step.end, 0))
            name = t.Range(t.Position(step.line, step.col), t.Position(step.line, step.col + len(step.id)))
            out.append(t.DocumentSymbol(name=step.id, detail=step.tool or "", kind=t.SymbolKind.Function,
                                        range=whole, selection_range=name))  # fmt: skip
        return out

    @server.feature(t.TEXT_DOCUMENT_CODE_ACTION)
    def code_actions(ls: Any, params: t.CodeActionParams) -> list[t.CodeAction]:
        uri = params.text_document.uri
        lines = text_of(uri).splitlines()
        out = []
        for diagnostic in params.context.diagnostics:
            found = _DID_YOU_MEAN.search(diagnostic.message)
            start = diagnostic.range.start
            if not found or start.line >= len(lines):
                continue
            _, a, b = word_at(lines[start.line], start.character)
            edit = t.TextEdit(range=t.Range(t.Position(start.line, a), t.Position(start.line, b)),
                              new_text=found.group(1))  # fmt: skip
            out.append(t.CodeAction(title=f"Replace with '{found.group(1)}'", kind=t.CodeActionKind.QuickFix,
                                    diagnostics=[diagnostic], edit=t.WorkspaceEdit(changes={uri: [edit]})))  # fmt: skip
        return out

    return server


def api_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("dagplan")
    except PackageNotFoundError:
        return "0"


def _diagnostic(t: Any, d: Any, text: str) -> Any:
    line = max(0, (d.span.line or 1) - 1)
    col = max(0, (d.span.col or 1) - 1)
    lines = text.splitlines()
    _, _, end = word_at(lines[line], col) if line < len(lines) else ("", col, col + 1)
    message = d.message + (f" ({d.hint})" if d.hint else "")
    severity = t.DiagnosticSeverity.Error if d.severity == "error" else t.DiagnosticSeverity.Warning
    return t.Diagnostic(range=t.Range(t.Position(line, col), t.Position(line, max(end, col + 1))), message=message,
                        severity=severity, code=d.code, source="dagplan")  # fmt: skip


def _catalog() -> dict[str, Any]:
    try:
        return {spec.name: spec for spec in api.tool_catalog()}
    except Exception:  # noqa: BLE001 - no tools here yet: nothing to complete
        return {}


def signature(spec: Any) -> str:
    props = (spec.parameters or {}).get("properties", {})
    required = set((spec.parameters or {}).get("required", ()))
    args = ", ".join(f"{k}{'' if k in required else '?'}: {v.get('type', 'any') if isinstance(v, dict) else 'any'}"
                     for k, v in props.items())  # fmt: skip
    return f"{spec.name}({args})"


def complete(t: Any, text: str, prefix: str, line: int) -> list[Any]:
    """The completion items at a line whose text before the cursor is ``prefix``."""
    steps = index(text)
    if re.search(r"tool:\s*[\"']?[\w.-]*$", prefix):
        return [t.CompletionItem(label=name, kind=t.CompletionItemKind.Function, detail=signature(spec),
                                 documentation=spec.description or None)
                for name, spec in sorted(_catalog().items())]  # fmt: skip
    if re.search(r"#[\w-]*$", prefix) or re.search(r"deps:\s*\[?[\w\s,-]*$", prefix):
        return [t.CompletionItem(label=s.id, kind=t.CompletionItemKind.Reference, detail=s.tool or "")
                for s in steps if not (s.line <= line <= s.end)]  # fmt: skip
    if re.search(r"[\u2020$]state\.[\w.]*$", prefix):
        paths = sorted({p for s in steps for p in s.writes})
        return [t.CompletionItem(label=p, kind=t.CompletionItemKind.Variable) for p in paths]
    if re.search(r"[\u2020$]input\.\w*$", prefix):
        return [t.CompletionItem(label=n, kind=t.CompletionItemKind.Variable) for n in _inputs(text)]
    here = next((s for s in steps if s.line <= line <= s.end), None)
    if here is not None and here.tool and (re.search(r"args:\s*\{[^}]*$", prefix) or _under_args(text, line)):
        spec = _catalog().get(here.tool)
        props = (spec.parameters or {}).get("properties", {}) if spec is not None else {}
        return [t.CompletionItem(label=k, kind=t.CompletionItemKind.Field, detail=str(v.get("type", "")))
                for k, v in props.items()]  # fmt: skip
    if here is not None and re.fullmatch(r"\s*[\w]*", prefix):
        return [t.CompletionItem(label=k, kind=t.CompletionItemKind.Keyword) for k in STEP_KEYS]
    return []


def _under_args(text: str, line: int) -> bool:
    lines = text.splitlines()
    here = _indent(lines[line]) if line < len(lines) else 0
    for number in range(line - 1, -1, -1):
        above = lines[number]
        if not above.strip():
            continue
        if _indent(above) < here:
            return bool(re.match(r"^\s*args:\s*$", above))
    return False


def _inputs(text: str) -> list[str]:
    try:
        import yaml

        data = yaml.safe_load(text)
        return sorted((data.get("inputs") or {}).keys()) if isinstance(data, dict) else []
    except Exception:  # noqa: BLE001 - a half-written file: no input names yet
        return []


def describe(text: str, word: str) -> str | None:
    """What hovering ``word`` shows (Markdown), or None."""
    word = word.lstrip("#")
    spec = _catalog().get(word)
    if spec is not None:
        flags = (spec.purity or "purity undeclared") + (", destructive" if spec.destructive else "")
        return f"```\n{signature(spec)}\n```\n{spec.description or ''}\n\n*{flags}*"
    steps = {s.id: s for s in index(text)}
    step = steps.get(word)
    if step is None:
        return None
    readers = sorted({s.id for s in steps.values() if s.id != word and _reads(text, s, step)})
    writes = ", ".join(f"†state.{p}" for p in step.writes) or "nothing"
    return (f"**step {step.id}**: {step.tool or 'a model or gate step'}\n\nwrites {writes}; "
            f"read by {', '.join(readers) or 'no step'}")  # fmt: skip


def _reads(text: str, reader: StepAt, step: StepAt) -> bool:
    body = "\n".join(text.splitlines()[reader.line : reader.end + 1])
    if re.search(rf"#{re.escape(step.id)}\b", body) or re.search(rf"deps:.*\b{re.escape(step.id)}\b", body):
        return True
    return any(re.search(rf"[\u2020$]state\.{re.escape(p.split('.')[0])}\b", body) for p in step.writes)


def define(text: str, word: str) -> tuple[str | None, tuple[int, int]] | None:
    """Where ``word`` is defined: (a file URI or None for this document, (line, col))."""
    steps = index(text)
    state = _STATE.match(word)
    if state:
        head = state.group(1).split(".")[0]
        for step in steps:
            if any(p.split(".")[0] == head for p in step.writes):
                return None, (step.output_line if step.output_line is not None else step.line, 0)
        return None
    name = word.lstrip("#")
    for step in steps:
        if step.id == name:
            return None, (step.line, step.col)
    return _tool_source(name)


def _tool_source(name: str) -> tuple[str | None, tuple[int, int]] | None:
    try:
        from . import load_tools

        tool = load_tools(api.load_config().tools).get(name)
    except Exception:  # noqa: BLE001 - tools that do not import: no definition to go to
        return None
    code = getattr(getattr(tool, "fn", None), "__code__", None)
    if code is None:
        return None
    return Path(code.co_filename).resolve().as_uri(), (code.co_firstlineno - 1, 0)


def occurrences(text: str, step_id: str) -> list[tuple[int, int, int]]:
    """Every place a step id is written: its ``id:``, ``#id`` placeholders, ``deps`` entries."""
    if not any(s.id == step_id for s in index(text)):
        return []
    found = []
    pattern = re.compile(rf"(?<![\w-]){re.escape(step_id)}(?![\w-])")
    for number, line in enumerate(text.splitlines()):
        for match in pattern.finditer(line):
            before = line[: match.start()]
            if (
                before.endswith("#")
                or re.search(r"(?:^|[\s-])[\"']?id[\"']?\s*:\s*[\"']?$", before)
                or re.search(r"deps\s*:", before)
            ):
                found.append((number, match.start(), match.end()))
    return found


def serve() -> None:
    from .framing import serve_lsp_stdio

    serve_lsp_stdio(build())
