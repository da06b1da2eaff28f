"""The plan language, as one pipeline: load -> schema -> parse -> validate -> schedule.

:func:`check` runs every stage and returns a :class:`CheckResult` (it never
raises for bad input); :func:`load` returns the Plan or raises
:class:`PlanInvalid` / :class:`LoadError` with every diagnostic found.

Stages are imported inside the functions: ``import dagplan.dsl.ir`` (which
runs this file first) must stay cheap for everyone who only needs the IR.
"""

from __future__ import annotations

import gc
import os
from contextlib import contextmanager
from .record import record
from typing import TYPE_CHECKING, Any, Mapping

from .errors import DEFAULT_LIMITS, Diagnostic, Limits, LoadError, PlanInvalid, error, located
from .ir import SIGIL, Plan, ToolSpec

if TYPE_CHECKING:  # pragma: no cover
    from .load import Document
    from .schedule import Analysis

__all__ = ["CheckResult", "check", "load", "is_text", "no_gc_pauses"]


@record(frozen=True)
class CheckResult:
    """What checking one plan found: the plan (when it parsed) and its diagnostics."""

    name: str
    plan: Plan | None
    analysis: "Analysis | None"
    diagnostics: tuple[Diagnostic, ...]  # located (line/col filled) and sorted
    document: "Document | None"

    @property
    def ok(self) -> bool:
        return not self.errors

    @property
    def errors(self) -> tuple[Diagnostic, ...]:
        return tuple(d for d in self.diagnostics if d.severity == "error")

    @property
    def warnings(self) -> tuple[Diagnostic, ...]:
        return tuple(d for d in self.diagnostics if d.severity == "warning")


def check(
    source: str | os.PathLike | None = None,
    *,
    text: str | bytes | None = None,
    name: str | None = None,
    tools: Mapping[str, ToolSpec] | None = None,
    limits: Limits = DEFAULT_LIMITS,
    budget: Any = None,
    root: str | os.PathLike | None = None,
) -> CheckResult:
    """Every stage of the pipeline on a file (``source``) or on ``text``; never raises for bad input.

    ``budget``: a :class:`dsl.compose.Budget` (default ``max_items`` cap, ``max_steps``). ``root``: a
    folder the plan's sub-plan files must lie under (a plan from an untrusted client reads nothing else)."""
    try:
        with no_gc_pauses():
            document = _load_document(source, text, name, limits)
    except LoadError as exc:
        label = name or (str(source) if source is not None and text is None else "<string>")
        return CheckResult(label, None, None, tuple(sorted(exc.diagnostics, key=Diagnostic.sort_key)), None)
    return check_document(document, tools, budget=budget, root=root)


def check_document(
    document: "Document",
    tools: Mapping[str, ToolSpec] | None = None,
    *,
    budget: Any = None,
    includes: tuple[str, ...] = (),
    root: str | os.PathLike | None = None,
) -> CheckResult:
    """schema -> parse -> validate -> schedule on a loaded document; each stage runs only if the last had no error.

    ``budget`` (a :class:`dsl.compose.Budget`) sets the default ``max_items`` cap and the
    ``max_steps`` budget; ``includes`` is the chain of plan files that led here (sub-plans); ``root``
    the folder sub-plan files must lie under (see :func:`check`).
    """
    from .parse import parse_document
    from .schema import schema_errors
    from .schedule import remember
    from .validate import validate_and_analyze

    plan = analysis = None
    document, bound = bind_document(document, tools)
    found: list[Diagnostic] = [*document.warnings, *bound]
    with no_gc_pauses():
        found += schema_errors(document)
        if not _has_error(found):
            plan, syntax = parse_document(document.data, document.name, document.dialect)
            found += syntax
        else:  # the rest of the file is still worth checking: every independent error in one round
            found += _beyond_schema(document, found, tools)
        if plan is not None:
            problems, analysis = validate_and_analyze(plan, tools)
            found += problems
            if analysis is not None:
                remember(plan, analysis)  # the plan carries its analysis (schedule.analysis_of)
        if plan is not None and (budget is not None or _composes(plan) or _mentions_item(document)):
            plan, more = _compose(plan, document, tools, budget, includes, root)
            found += more
    return CheckResult(document.name, plan, analysis, tuple(_locate(found, document)), document)


def bind_document(document: "Document", tools: Mapping[str, ToolSpec] | None) -> tuple["Document", list[Diagnostic]]:
    """A ReWOO document's ``Tool[text]`` arguments given to the parameter the catalog says the text is for (the
    one rule ``check``, ``run`` and ``fmt`` read them by); any other document as it is."""
    if document.dialect != "rewoo" or not tools:
        return document, []
    from .record import replace
    from .rewoo import bind

    data, bound = bind(document.data, document.source_map, tools)
    return replace(document, data=data), bound


# Keys whose removal would make later stages report consequences, not mistakes (a read of an output that a
# misspelt key would have written, a dependency on an id): with a schema error there, the rest waits.
_LOAD_BEARING = frozenset({"id", "output", "deps", "steps", "inputs", "initial_state", "plan", "loop", "for_each"})


def _beyond_schema(document: "Document", found: list[Diagnostic], tools: Mapping[str, ToolSpec] | None) -> list:
    """The syntax and validation errors of a document that failed the schema, found on a copy with each key
    the schema refused taken out (its other keys keep their paths, so every diagnostic keeps its line and
    column). Nothing when a refusal is not one key's (a step missing its id, a list item of the wrong kind),
    when it is a key later stages lean on (an id, an output...), or in another dialect."""
    import json

    from .parse import parse_document
    from .schema import schema_errors
    from .validate import validate_and_analyze

    errors = [d for d in found if d.severity == "error"]
    refused = [d.span.path for d in errors]
    if document.dialect != "canonical" or not refused:
        return []
    if any(not path or not isinstance(path[-1], str) or path[-1] in _LOAD_BEARING for path in refused):
        return []
    if any(f"'{key}'" in (d.hint or "") for d in errors for key in _LOAD_BEARING):
        return []  # a misspelt load-bearing key (`ouput`: did you mean 'output'?): its echoes would mislead
    try:
        data = json.loads(json.dumps(document.data))
    except (TypeError, ValueError):
        return []
    for path in refused:
        parent: Any = data
        for key in path[:-1]:
            if isinstance(parent, dict) and key in parent:
                parent = parent[key]
            elif isinstance(parent, list) and isinstance(key, int) and 0 <= key < len(parent):
                parent = parent[key]
            else:
                return []  # a path the data does not have: nothing is guessed
        if not isinstance(parent, dict):
            return []
        parent.pop(path[-1], None)
    from .record import replace

    salvaged = replace(document, data=data)
    if _has_error(schema_errors(salvaged)):
        return []
    plan, syntax = parse_document(data, document.name, document.dialect)
    more = list(syntax)
    if plan is not None:
        problems, _ = validate_and_analyze(plan, tools)
        more += problems
    return [d for d in more if d.severity == "error"]  # its warnings wait for a file that passes the schema


def _mentions_item(document: "Document") -> bool:
    """Whether the text could hold †item / †index (then `item-outside-for-each` is checked);
    a substring test on the text costs nothing next to walking every step."""
    text = getattr(document.source_map, "text", None)
    if not isinstance(text, str):
        return True
    return any(sigil in text for sigil in ("\u2020item", "$item", "\u2020index", "$index"))  # 4 scans beat one regex


def _composes(plan: Plan) -> bool:
    return any(
        s.for_each is not None or s.plan is not None or s.loop is not None or s.gate is not None for s in plan.steps
    )


def _compose(plan: Plan, document: "Document", tools: Any, budget: Any, includes: tuple[str, ...], root: Any):
    """Sub-plans, composition rules and the step budget (see :mod:`.compose`)."""
    from .record import replace

    from .compose import Budget, budget_rule, resolve_children
    from .load import Document, load_file

    budget = budget or Budget()
    if not includes and os.path.isfile(document.name):
        includes = (os.path.realpath(document.name),)

    def check_child(path, inline, parent_name, at, chain):
        if inline is not None:
            child = Document(inline, "canonical", _PrefixedMap(document.source_map, at), parent_name)
            return check_document(child, tools, budget=budget, includes=chain, root=root)
        try:
            if root is not None:
                outside(path, root)
            loaded = load_file(path)
        except LoadError as exc:
            return CheckResult(path, None, None, tuple(exc.diagnostics), None)
        return check_document(loaded, tools, budget=budget, includes=chain, root=root)

    found: list[Diagnostic] = []
    if _composes(plan) or _mentions_item(document):
        plan, found, inlined = resolve_children(plan, document.data, check_child, includes, budget)
        if inlined is not None:
            plan = replace(plan, document=inlined)
    if not _has_error(found):
        found += budget_rule(plan, budget)
    return plan, found


def outside(path: str | os.PathLike, root: str | os.PathLike) -> None:
    """Raise an ``io`` LoadError when ``path`` (links resolved) is not under the folder ``root``."""
    try:
        real, top = os.path.realpath(path), os.path.realpath(root)
    except ValueError:  # a NUL in the path: load_file reports it
        return
    if os.path.commonpath([real, top]) != top:
        raise LoadError(
            error(
                "io",
                f"'{os.fspath(path)}' is outside the project folder {top}: plan files "
                "given by a client must lie under it",
                hint="put the sub-plan beside the plan",
            )
        )


class _PrefixedMap:
    """The source map of an inline child: its paths live under the parent's ``plan`` key."""

    def __init__(self, parent: Any, prefix: tuple):
        self.parent, self.prefix = parent, tuple(prefix)
        self.text: str = parent.text

    def locate(self, span):
        from .record import replace

        return self.parent.locate(replace(span, path=self.prefix + tuple(span.path)))

    def key_position(self, path):
        return self.parent.key_position(self.prefix + tuple(path))

    def __getattr__(self, name: str) -> Any:
        return getattr(self.parent, name)


@contextmanager
def no_gc_pauses():
    """Around work that builds many small acyclic objects at once (the IR of a plan, a run's folded
    journal): cyclic GC passes over a large heap would cost more than the work itself (measured: parse
    of 10,000 steps 1.5-2x slower; opening a 100,000-step run 2x). Nested uses are one."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            # What was built is long-lived: straight to the oldest generation (freeze, then unfreeze, moves
            # every tracked object there at once), so the first collection after this is not a pass over
            # all of it (measured: 54 ms of a 10,000-step check).
            gc.freeze()
            gc.unfreeze()
            gc.enable()


def load(
    source: str | os.PathLike | None = None,
    *,
    text: str | bytes | None = None,
    name: str | None = None,
    tools: Mapping[str, ToolSpec] | None = None,
    limits: Limits = DEFAULT_LIMITS,
    budget: Any = None,
) -> Plan:
    """The Plan of a valid document; raises :class:`PlanInvalid` (all diagnostics) or :class:`LoadError`."""
    document = _load_document(source, text, name, limits)
    result = check_document(document, tools, budget=budget)
    if not result.ok or result.plan is None:
        raise PlanInvalid(result.diagnostics)
    return result.plan


def is_text(source: Any) -> bool:
    """A ``str`` holding a document rather than naming a file: not an existing file's name (file names
    come first: ``[draft]-triage.yaml`` is a file), and it has a newline or starts like a document."""
    if not isinstance(source, (str, bytes)):
        return False
    if len(source) < 4096 and "\n" not in (source if isinstance(source, str) else source.decode("utf-8", "replace")):
        if os.path.isfile(source):
            return False
    return ("\n" in source if isinstance(source, str) else b"\n" in source) or source.lstrip()[:1] in (
        "{", "[", "-", b"{", b"[", b"-",
    )  # fmt: skip


def _load_document(source: Any, text: Any, name: str | None, limits: Limits) -> "Document":
    from .load import load_file, load_text

    if text is None and source is not None and os.fspath(source) == "-":  # the command-line convention
        import sys

        text, source, name = sys.stdin.buffer.read(), None, name or "<stdin>"
    if text is None and is_text(source):
        text, source = source, None
    if text is not None:
        return load_text(text, name or "<string>", limits)
    if source is None:
        raise LoadError(error("io", "nothing to load: give a file path or text"))
    return load_file(source, limits)


def _has_error(diags: list[Diagnostic]) -> bool:
    return any(d.severity == "error" for d in diags)


def with_diagnostics(result: CheckResult, more: list[Diagnostic]) -> CheckResult:
    """The result with more diagnostics (from a later stage that knows more, e.g. the configuration), located."""
    if not more:
        return result
    located_more = _locate(more, result.document) if result.document is not None else more
    diagnostics = tuple(sorted((*result.diagnostics, *located_more), key=Diagnostic.sort_key))
    return CheckResult(result.name, result.plan, result.analysis, diagnostics, result.document)


def _locate(diags: list[Diagnostic], document: "Document") -> list[Diagnostic]:
    """Line/col for every diagnostic, sorted, in the document's own spelling of references (a position we
    cannot find is not worth a crash)."""

    def locate(span):
        try:
            return document.source_map.locate(span)
        except Exception:  # noqa: BLE001 - diagnostics must still be shown, at the file level
            return span

    dollars = _dollar_spelling(document)  # once a document: it reads the whole text
    return [as_written(d, dollars) for d in located(diags, locate)]


def as_written(diagnostic: Diagnostic, dollars: bool) -> Diagnostic:
    """A diagnostic that quotes references as its document writes them: an author who types ``$state.x``
    (the dagger is on no keyboard) reads ``$state.x`` in the message and the hint, not ``\u2020state.x``
    (``dollars``: the document spells them so, :func:`_dollar_spelling`)."""
    if not dollars or (SIGIL not in diagnostic.message and SIGIL not in (diagnostic.hint or "")):
        return diagnostic
    from .record import replace

    return replace(diagnostic, message=diagnostic.message.replace(SIGIL, "$"),
                   hint=diagnostic.hint.replace(SIGIL, "$") if diagnostic.hint else diagnostic.hint)  # fmt: skip


def _dollar_spelling(document: "Document") -> bool:
    """Whether the document spells its references with ``$`` (and never with the dagger)."""
    text = getattr(document.source_map, "text", "")
    return SIGIL not in text and ("$state" in text or "$input" in text or "$item" in text)
