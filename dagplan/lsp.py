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
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse


from . import _doors

DEBOUNCE = 0.05  # seconds of quiet before a changed document is checked again (typing bursts coalesce)
STEP_KEYS = ("id", "description", "tool", "args", "llm", "system", "model", "params", "tools", "output_schema",
             "max_iterations", "output", "deps", "when", "retry", "timeout", "catch", "purity", "for_each",
             "max_items", "gate", "plan", "input", "loop")  # fmt: skip
_ID = re.compile(r"""^(\s*)(?:-\s+)?["']?id["']?\s*:\s*["']?([A-Za-z0-9_][A-Za-z0-9_-]*)""")
_WORD = re.compile(r"[A-Za-z0-9_.\u2020$#-]+")
_STATE = re.compile(r"[\u2020$]state\.([A-Za-z0-9_.\[\]]+)")
_PLACEHOLDER = re.compile(r"#([A-Za-z_][A-Za-z0-9_-]*)")
_DID_YOU_MEAN = re.compile(r"did you mean '([^']+)'\?")
_BREAK = re.compile(r"\r\n|\r|\n")  # the line breaks of LSP (str.splitlines also breaks at U+2028, \x0c, ...)


def split_lines(text: str) -> list[str]:
    """A document's lines as LSP (and the loader's positions) count them."""
    return _BREAK.split(text)


class Doc:
    """An open document: its text, its lines as LSP counts them, and positions in the client's encoding
    (``codec``: the negotiated one; columns inside the server are code points, as the loader's)."""

    def __init__(self, text: str, codec: Any):
        self.text, self.lines, self.codec = text, split_lines(text), codec

    def line(self, number: int) -> str:
        return self.lines[number] if 0 <= number < len(self.lines) else ""

    def column(self, position: Any) -> int:
        """A client's position -> the code point column of its line (clamped to the line)."""
        units = 0
        for index, char in enumerate(self.line(position.line)):
            if units >= position.character:
                return index
            units += self.codec.client_num_units(char)
        return len(self.line(position.line))

    def word(self, position: Any) -> tuple[str, int, int]:
        return word_at(self.line(position.line), self.column(position))

    def position(self, t: Any, line: int, col: int) -> Any:
        return t.Position(line, self.codec.client_num_units(self.line(line)[:col]))

    def range(self, t: Any, line: int, start: int, end: int) -> Any:
        return t.Range(self.position(t, line, start), self.position(t, line, end))


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
    """The steps of a plan's text with their lines: where the loader says they are (any dialect, block or
    flow style), else, for a half-written plan the loader refuses, a scan of its lines."""
    lines = split_lines(text)
    found = _doors.outline(text)
    if found:
        steps = []
        for entry in found:
            line, col = (entry["line"] or 1) - 1, (entry["col"] or 1) - 1
            col += lines[line][col : col + 1] in ("'", '"') if line < len(lines) else 0  # past a quote
            written = entry["output_line"] - 1 if entry["output_line"] else None
            steps.append(StepAt(entry["id"], line, col, tool=entry["tool"],
                                writes=_STATE.findall(entry["output"] or ""), output_line=written))  # fmt: skip
        for i, step in enumerate(steps):
            later = [s.line for s in steps[i + 1 :] if s.line > step.line]
            step.end = (min(later) - 1) if later else len(lines) - 1
            step.end = max(step.end, step.line)
        return steps
    return _scanned(text, lines)


def _scanned(text: str, lines: list[str]) -> list[StepAt]:
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


class Checks:
    """Diagnostics of open documents, computed off the event loop, so that completion, hover and the rest
    answer while a large plan is checked. A change waits for quiet (the debounce), then its text is
    checked in one worker thread (checks never pile up); the result is published only while the document
    is still that text, and a newer version cancels the check it makes stale (a queued one does nothing
    when its turn comes, whatever the timing of asyncio's cancellation of the thread's future; a running
    one's result is thrown away)."""

    def __init__(self, version: Any, diagnose: Any, publish: Any) -> None:
        self.version, self.diagnose, self.publish = version, diagnose, publish  # (uri), (uri, text), (uri, found)
        self.pending: dict[str, asyncio.Task] = {}
        self._worker: Any = None

    def schedule(self, uri: str, delay: float) -> asyncio.Task:
        stale = self.pending.pop(uri, None)
        if stale is not None:
            stale.cancel()
        task = self.pending[uri] = asyncio.ensure_future(self._check(uri, delay))
        return task

    async def _check(self, uri: str, delay: float) -> None:
        try:
            if delay:
                await asyncio.sleep(delay)
            seen = self.version(uri)
            if seen is None:
                return
            if self._worker is None:
                from concurrent.futures import ThreadPoolExecutor

                self._worker = ThreadPoolExecutor(1, thread_name_prefix="dagplan-check")

            def work() -> list | None:  # in the thread: a check made stale while queued does nothing
                return self.diagnose(uri, seen[1]) if self.version(uri) == seen else None

            found = await asyncio.get_running_loop().run_in_executor(self._worker, work)
            if found is not None and self.version(uri) == seen:  # still the text it was computed for
                self.publish(uri, found)
        finally:
            if self.pending.get(uri) is asyncio.current_task():
                del self.pending[uri]


def build(project: Any = None) -> Any:
    """The language server (a pygls ``LanguageServer``) with every feature registered, for ``project`` (a
    :class:`dagplan.Project`; default: the working directory's, as every door builds it)."""
    from lsprotocol import types as t
    from pygls.lsp.server import LanguageServer

    project = _project(project)
    others: dict[Any, Any] = {}  # the other roots of a workspace: each document is its own project's

    def project_at(uri: str) -> Any:
        """The project a document belongs to: the server's, or (a workspace of several roots) the one its file
        is in, with that root's configuration, tools and secrets, as `dagplan check` run there would have."""
        parsed = urlparse(uri)
        if parsed.scheme != "file":
            return project
        from .project import Project

        path = os.path.abspath(unquote(parsed.path))
        if path.startswith(str(project.root) + os.sep):  # under the server's folder: its project
            return project
        found = Project.of_file(path)
        return project if found.root == project.root else others.setdefault(found.root, found)

    # Full sync: every change carries the whole text, so no line model but ours ever applies an edit.
    server = LanguageServer("dagplan", api_version(), text_document_sync_kind=t.TextDocumentSyncKind.Full,
                            protocol_cls=_protocol())  # fmt: skip

    def opened(uri: str) -> Doc | None:
        """The document the client opened, or None: an unopened URI is never read from disk (a FIFO or a
        device would hang the server; the client's buffer is what counts)."""
        document = server.workspace.text_documents.get(unquote(uri))
        return Doc(document.source, server.workspace.position_codec) if document is not None else None

    def version(uri: str) -> Any:
        document = server.workspace.text_documents.get(unquote(uri))
        return None if document is None else (document.version, document.source)

    def diagnose(uri: str, text: str) -> list:
        """What ``check`` says of the text, as LSP diagnostics (in a worker thread: never on the loop)."""
        doc = Doc(text, server.workspace.position_codec)
        path = unquote(urlparse(uri).path) if urlparse(uri).scheme == "file" else ""
        name = path or Path(unquote(urlparse(uri).path)).name or "plan.yaml"
        if not _doors.is_ours(doc.text, name):  # a workflow, a compose file, package.json: not ours to judge
            return []
        try:
            here = project_at(uri)
            with here.secrets():  # what it says is masked by its own project's patterns
                result = here.check_text(doc.text, name, test_file=bool(path))  # a file: as `check` would see it
            return [_diagnostic(t, d, doc, name) for d in result.diagnostics] if result is not None else []
        except Exception as exc:  # noqa: BLE001 - a configuration or tools problem: say it, at the top
            return [t.Diagnostic(range=t.Range(t.Position(0, 0), t.Position(0, 1)), message=str(exc),
                                 severity=t.DiagnosticSeverity.Error, source="dagplan")]  # fmt: skip

    def publish(uri: str, found: list) -> None:
        server.text_document_publish_diagnostics(t.PublishDiagnosticsParams(uri=uri, diagnostics=found))

    checks = Checks(version, diagnose, publish)

    @server.feature(t.TEXT_DOCUMENT_DID_OPEN)
    def did_open(ls: Any, params: t.DidOpenTextDocumentParams) -> None:
        checks.schedule(params.text_document.uri, 0.0)

    @server.feature(t.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(ls: Any, params: t.DidChangeTextDocumentParams) -> None:
        checks.schedule(params.text_document.uri, DEBOUNCE)

    @server.feature(t.TEXT_DOCUMENT_DID_SAVE)
    def did_save(ls: Any, params: t.DidSaveTextDocumentParams) -> None:
        checks.schedule(params.text_document.uri, 0.0)

    @server.feature(t.TEXT_DOCUMENT_COMPLETION, t.CompletionOptions(trigger_characters=["#", ".", " "]))
    def completion(ls: Any, params: t.CompletionParams) -> t.CompletionList:
        doc = opened(params.text_document.uri)
        if doc is None:
            return t.CompletionList(is_incomplete=False, items=[])
        prefix = doc.line(params.position.line)[: doc.column(params.position)]
        items = complete(t, doc.text, prefix, params.position.line, project_at(params.text_document.uri))
        return t.CompletionList(is_incomplete=False, items=items)

    @server.feature(t.TEXT_DOCUMENT_HOVER)
    def hover(ls: Any, params: t.HoverParams) -> t.Hover | None:
        doc = opened(params.text_document.uri)
        if doc is None:
            return None
        word, _, _ = doc.word(params.position)
        shown = describe(doc.text, word, project_at(params.text_document.uri))
        return t.Hover(contents=t.MarkupContent(kind=t.MarkupKind.Markdown, value=shown)) if shown else None

    @server.feature(t.TEXT_DOCUMENT_DEFINITION)
    def definition(ls: Any, params: t.DefinitionParams) -> t.Location | None:
        uri = params.text_document.uri
        doc = opened(uri)
        if doc is None:
            return None
        found = define(doc.text, doc.word(params.position)[0], project_at(uri))
        if found is None:
            return None
        target, (line, col) = found
        at = doc.position(t, line, col) if target is None else t.Position(line, col)
        return t.Location(uri=target or uri, range=t.Range(at, at))

    @server.feature(t.TEXT_DOCUMENT_REFERENCES)
    def references(ls: Any, params: t.ReferenceParams) -> list[t.Location]:
        uri = params.text_document.uri
        doc = opened(uri)
        if doc is None:
            return []
        word = doc.word(params.position)[0]
        return [t.Location(uri=uri, range=doc.range(t, n, a, b)) for n, a, b in occurrences(doc.text, word.lstrip("#"))]

    @server.feature(t.TEXT_DOCUMENT_PREPARE_RENAME)
    def prepare_rename(ls: Any, params: t.PrepareRenameParams) -> t.Range | None:
        doc = opened(params.text_document.uri)
        if doc is None:
            return None
        word, a, b = doc.word(params.position)
        return (
            doc.range(t, params.position.line, a + word.startswith("#"), b)
            if occurrences(doc.text, word.lstrip("#"))
            else None
        )

    @server.feature(t.TEXT_DOCUMENT_RENAME)
    def rename(ls: Any, params: t.RenameParams) -> t.WorkspaceEdit | None:
        from pygls.exceptions import JsonRpcInvalidParams

        uri = params.text_document.uri
        doc = opened(uri)
        if doc is None:
            return None
        word = doc.word(params.position)[0].lstrip("#")
        places = occurrences(doc.text, word)
        if not places or params.new_name == word:
            return None
        problem = _doors.step_id_problem(params.new_name)
        if problem is None and any(s.id == params.new_name for s in index(doc.text)):
            problem = f"step {params.new_name!r} exists already: two steps cannot share an id"
        if problem is not None:
            raise JsonRpcInvalidParams(f"cannot rename {word!r}: {problem}")
        edits = [t.TextEdit(range=doc.range(t, n, a, b), new_text=params.new_name) for n, a, b in places]
        return t.WorkspaceEdit(changes={uri: edits})

    @server.feature(t.TEXT_DOCUMENT_DOCUMENT_SYMBOL)
    def symbols(ls: Any, params: t.DocumentSymbolParams) -> list[t.DocumentSymbol]:
        doc = opened(params.text_document.uri)
        if doc is None:
            return []
        out = []
        for step in index(doc.text):
            whole = t.Range(t.Position(step.line, 0), doc.position(t, step.end, len(doc.line(step.end))))
            name = doc.range(t, step.line, step.col, step.col + len(step.id))
            out.append(t.DocumentSymbol(name=step.id, detail=step.tool or "", kind=t.SymbolKind.Function,
                                        range=whole, selection_range=name))  # fmt: skip
        return out

    @server.feature(t.TEXT_DOCUMENT_CODE_ACTION)
    def code_actions(ls: Any, params: t.CodeActionParams) -> list[t.CodeAction]:
        uri = params.text_document.uri
        doc = opened(uri)
        if doc is None:
            return []
        out = []
        for diagnostic in params.context.diagnostics:
            found = _DID_YOU_MEAN.search(diagnostic.message)
            start = diagnostic.range.start
            if not found or start.line >= len(doc.lines):
                continue
            _, a, b = doc.word(start)
            edit = t.TextEdit(range=doc.range(t, start.line, a, b), new_text=found.group(1))
            out.append(t.CodeAction(title=f"Replace with '{found.group(1)}'", kind=t.CodeActionKind.QuickFix,
                                    diagnostics=[diagnostic], edit=t.WorkspaceEdit(changes={uri: [edit]})))  # fmt: skip
        return out

    return server


def _protocol() -> Any:
    """pygls's protocol, made to answer every request: one whose params do not fit the method's types gets
    ``-32602`` (pygls logged it and answered nothing), one after ``shutdown`` gets ``-32600``, and an
    error's data never carries a traceback."""
    from lsprotocol.types import ResponseError
    from pygls.exceptions import JsonRpcException
    from pygls.protocol import LanguageServerProtocol

    class Answering(LanguageServerProtocol):
        def structure_message(self, data: Any) -> Any:
            try:
                return super().structure_message(data)
            except JsonRpcException:
                if isinstance(data, dict) and "id" in data and "method" in data:
                    method = str(data.get("method"))[:80]
                    self._send_response(data["id"], error=ResponseError(-32602, f"Invalid params for {method}"))
                raise

        def handle_message(self, message: Any) -> None:
            method, id_ = getattr(message, "method", ""), getattr(message, "id", None)
            if self._shutdown and method != "exit" and id_ is not None and method:
                self._send_response(id_, error=ResponseError(-32600, "the server is shutting down"))
                return
            super().handle_message(message)

        def _send_response(self, msg_id: Any, result: Any = None, error: Any = None) -> None:
            if error is not None and isinstance(error.data, dict) and "traceback" in error.data:
                error = ResponseError(error.code, error.message)  # the traceback stays in the server
            super()._send_response(msg_id, result, error)

    return Answering


def api_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("dagplan")
    except PackageNotFoundError:
        return "0"


def _diagnostic(t: Any, d: Any, doc: Doc, name: str) -> Any:
    """A diagnostic of ``check`` (line and code point column, 1-based, from the loader's positions) at
    its place in the client's encoding; one of another file (a sub-plan) at the top, naming that file."""
    here = d.span.file in (None, "", "<string>", name) and d.span.line is not None
    line = max(0, (d.span.line or 1) - 1) if here else 0
    col = min(max(0, (d.span.col or 1) - 1), len(doc.line(line))) if here else 0
    _, _, end = word_at(doc.line(line), col)
    message = d.message + (f" ({d.hint})" if d.hint else "")
    if not here and d.span.file and d.span.file != name:
        message = f"{os.path.basename(d.span.file)}:{d.span.line or 1}:{d.span.col or 1}: {message}"
    severity = t.DiagnosticSeverity.Error if d.severity == "error" else t.DiagnosticSeverity.Warning
    return t.Diagnostic(range=doc.range(t, line, col, max(end, col + 1)), message=message, severity=severity,
                        code=d.code, source="dagplan")  # fmt: skip


def _catalog(project: Any) -> dict[str, Any]:
    try:
        return {spec.name: spec for spec in _project(project).catalog()}
    except Exception:  # noqa: BLE001 - no tools here yet: nothing to complete
        return {}


from .views import signature  # noqa: E402 - one spelling of a tool's signature (`tools list` too)


def complete(t: Any, text: str, prefix: str, line: int, project: Any = None) -> list[Any]:
    """The completion items at a line whose text before the cursor is ``prefix``."""
    steps = index(text)
    if re.search(r"tool:\s*[\"']?[\w.-]*$", prefix):
        return [t.CompletionItem(label=name, kind=t.CompletionItemKind.Function, detail=signature(spec),
                                 documentation=spec.description or None)
                for name, spec in sorted(_catalog(project).items())]  # fmt: skip
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
        spec = _catalog(project).get(here.tool)
        props = (spec.parameters or {}).get("properties", {}) if spec is not None else {}
        return [t.CompletionItem(label=k, kind=t.CompletionItemKind.Field, detail=str(v.get("type", "")))
                for k, v in props.items()]  # fmt: skip
    if here is not None and re.fullmatch(r"\s*[\w]*", prefix):
        return [t.CompletionItem(label=k, kind=t.CompletionItemKind.Keyword) for k in STEP_KEYS]
    return []


def _under_args(text: str, line: int) -> bool:
    lines = split_lines(text)
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


def describe(text: str, word: str, project: Any = None) -> str | None:
    """What hovering ``word`` shows (Markdown), or None."""
    word = word.lstrip("#")
    spec = _catalog(project).get(word)
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
    body = "\n".join(split_lines(text)[reader.line : reader.end + 1])
    if re.search(rf"#{re.escape(step.id)}\b", body) or re.search(rf"deps:.*\b{re.escape(step.id)}\b", body):
        return True
    return any(re.search(rf"[\u2020$]state\.{re.escape(p.split('.')[0])}\b", body) for p in step.writes)


def define(text: str, word: str, project: Any = None) -> tuple[str | None, tuple[int, int]] | None:
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
    return _tool_source(name, project)


def _tool_source(name: str, project: Any = None) -> tuple[str | None, tuple[int, int]] | None:
    try:
        tool = (_project(project).tools or {}).get(name)
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
    for number, line in enumerate(split_lines(text)):
        for match in pattern.finditer(line):
            before = line[: match.start()]
            if (
                before.endswith("#")
                or re.search(r"(?:^|[\s{,-])[\"']?id[\"']?\s*:\s*[\"']?$", before)
                or re.search(r"deps\s*:", before)
            ):
                found.append((number, match.start(), match.end()))
    return found


def _project(project: Any) -> Any:
    from .project import Project

    return project if project is not None else Project.default()


def serve(project: Any = None) -> None:
    from .framing import serve_lsp_stdio

    serve_lsp_stdio(build(project))
