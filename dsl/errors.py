"""One error family for everything a user can get wrong.

Every user-facing problem is a :class:`Diagnostic` (a value) and every raised
error is a :class:`DagplanError` carrying one or more of them. Stages produce
spans that name a *document path* (``("steps", 2, "args", "x")``) and an
offset inside a string; line and column are filled in later, only when a
diagnostic is shown, by :meth:`dagplan.dsl.source.SourceMap.locate`. The happy
path therefore never pays for a position map.
"""

from __future__ import annotations

import re
from .record import record, field, replace
from typing import Any, Callable, Iterable, Literal

Severity = Literal["error", "warning"]
DocPath = tuple[str | int, ...]


@record(frozen=True, slots=True)
class Span:
    """Where something is: a file, a document path, and (once located) line:col.

    ``line``/``col`` are 1-based; 0 means "not located yet". ``offset`` is a
    character offset inside the string scalar at ``path`` (for expression
    syntax errors that point inside a string); ``key``: the key naming ``path``
    is meant (an unknown key), not its value.
    """

    file: str = "<string>"
    path: DocPath = ()
    offset: int = 0
    line: int = 0
    col: int = 0
    key: bool = False  # the key naming ``path`` is meant, not its value (an unknown key)

    def at(self, *more: str | int, offset: int = 0) -> "Span":
        """The span of a child of this node."""
        return replace(self, path=self.path + more, offset=offset, line=0, col=0)

    @property
    def located(self) -> bool:
        return self.line > 0

    def __str__(self) -> str:
        if self.line:
            return f"{self.file}:{self.line}:{self.col}"
        return self.file


NOSPAN = Span()

# what a terminal would act on rather than show: C0 controls but tab and newline, DEL and C1 controls,
# line/paragraph separators, bidirectional overrides and isolates, and lone surrogates (unprintable)
_UNPRINTABLE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]")


def printable(text: str) -> str:
    """``text`` safe to write to a terminal: every character it would act on is shown as its escape
    (``\\u001b``), which is also how JSON writes it, so a JSON document stays the same document."""
    if _UNPRINTABLE.search(text) is None:
        return text
    return _UNPRINTABLE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


@record(frozen=True, slots=True)
class Diagnostic:
    """A problem found in a plan: its severity, code, message, where, and a hint."""

    severity: Severity
    code: str
    message: str
    span: Span = NOSPAN
    hint: str | None = None

    def format(self) -> str:
        """``PATH:LINE:COL: error CODE: message`` plus a ``hint:`` line (no location when there is none)."""
        where = "" if self.span.file == NOSPAN.file and not self.span.located else f"{self.span}: "
        head = f"{where}{self.severity} {self.code}: {self.message}"
        return head if not self.hint else f"{head}\n    hint: {self.hint}"

    def to_json(self) -> dict:
        return {
            "severity": self.severity,
            "code": self.code,
            "message": self.message,
            "file": self.span.file,
            "line": self.span.line,
            "col": self.span.col,
            "path": list(self.span.path),
            "hint": self.hint,
        }

    def sort_key(self) -> tuple:
        return (self.span.file, self.severity != "error", self.span.line, self.span.col, self.code)  # causes first


def counted(n: int, noun: str) -> str:
    """``1 step``, ``3 steps``: the one way a count is written (nouns here take an s)."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def did_you_mean(
    word: Any,
    choices: Iterable[str],
    otherwise: str | None = None,
    cutoff: float = 0.6,
    shown: Callable[[str], str] = str,
) -> str | None:
    """The one did-you-mean hint: ``did you mean 'x'?`` for the closest of ``choices``, else ``otherwise``;
    ``shown`` spells the choice as the hint shows it (matched without it: ``isue.title`` to ``issue.title``,
    shown as ``†state.issue.title``)."""
    import difflib

    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=cutoff) if isinstance(word, str) else []
    return f"did you mean {shown(close[0])!r}?" if close else otherwise


def error(code: str, message: str, span: Span = NOSPAN, hint: str | None = None) -> Diagnostic:
    return Diagnostic("error", code, message, span, hint)


def warning(code: str, message: str, span: Span = NOSPAN, hint: str | None = None) -> Diagnostic:
    return Diagnostic("warning", code, message, span, hint)


class DagplanError(Exception):
    """Base of every error dagplan raises on purpose.

    Carries its diagnostics; ``str()`` is the formatted headline. Pickles (it
    crosses threads and processes and is stored in run records).
    """

    def __init__(self, diagnostics: Diagnostic | Iterable[Diagnostic]):
        if isinstance(diagnostics, Diagnostic):
            diagnostics = (diagnostics,)
        self.diagnostics: tuple[Diagnostic, ...] = tuple(diagnostics)
        super().__init__(self.headline.format() if self.diagnostics else "")

    @classmethod
    def make(cls, code: str, message: str, span: Span = NOSPAN, hint: str | None = None):
        return cls(error(code, message, span, hint))

    def relocated(self, span: Span) -> "DagplanError":
        """The same error at ``span``'s file and line (its column kept where it had one): an error found in
        a piece of a file (a line of JSON Lines) placed where that piece stands."""
        moved = [replace(d, span=replace(span, col=d.span.col or span.col)) for d in self.diagnostics]
        return type(self)(moved)

    @property
    def headline(self) -> Diagnostic:
        """The first error by position (else the first diagnostic): it leads a repair prompt."""
        errors = [d for d in self.diagnostics if d.severity == "error"] or list(self.diagnostics)
        return min(errors, key=Diagnostic.sort_key)

    @property
    def code(self) -> str:
        return self.headline.code

    @property
    def span(self) -> Span:
        return self.headline.span

    @property
    def hint(self) -> str | None:
        return self.headline.hint

    def __reduce__(self):
        return (type(self), (self.diagnostics,))


class LoadError(DagplanError):
    """The text could not be read as a document (I/O, encoding, YAML/JSON syntax, limits)."""


class PlanInvalid(DagplanError):
    """The document is not a valid plan; ``diagnostics`` holds every problem found, and ``str()`` shows
    them all, in the order of the file (a repair needs every one, not the first)."""

    def __str__(self) -> str:
        if len(self.diagnostics) <= 1:
            return super().__str__()
        ordered = sorted(self.diagnostics, key=Diagnostic.sort_key)
        errors, others = sum(d.severity == "error" for d in ordered), sum(d.severity != "error" for d in ordered)
        kinds = f"{counted(errors, 'error')}, {counted(others, 'warning')}"
        head = f"{counted(errors, 'error')}:" if not others else f"{counted(len(ordered), 'problem')} ({kinds}):"
        return "\n".join([head, *(d.format() for d in ordered)])


class RunError(DagplanError):
    """A run could not start or continue (bad inputs, unknown run, refused approval...)."""


def located(diags: Iterable[Diagnostic], locate) -> list[Diagnostic]:
    """Fill in line/col of every diagnostic with ``locate(span) -> span``, sorted."""
    out = [replace(d, span=locate(d.span)) if not d.span.located else d for d in diags]
    return sorted(out, key=Diagnostic.sort_key)


@record(frozen=True)
class Limits:
    """Bounds that keep hostile input from costing unbounded time or memory.

    Documented in the README; all can be raised by the caller.
    """

    max_bytes: int = 16 * 1024 * 1024
    max_depth: int = 64
    max_nodes: int = 2_000_000
    max_steps: int = 100_000
    max_id_length: int = 64
    max_string: int = 4 * 1024 * 1024
    extra: dict = field(default_factory=dict)


DEFAULT_LIMITS = Limits()


def first_line(text: str, width: int = 0) -> str:
    """A message's first non-blank line (cut to ``width`` characters with an ellipsis when given): what a
    one-line report shows of a long message (a traceback, a replay miss's diff)."""
    line = next((x.strip() for x in str(text).splitlines() if x.strip()), "")
    return line if not width or len(line) <= width else line[: width - 1] + "\u2026"


def translating(catch: type[BaseException] | tuple[type[BaseException], ...],
                convert: Callable[[BaseException], BaseException]) -> Callable[[Any], Any]:  # fmt: skip
    """A decorator: what a function (plain, async or a generator) raises of ``catch`` is raised as
    ``convert(exc)`` instead, its cause dropped (the one way a boundary turns another library's errors, or
    any error, into the words its caller reads: the MCP server's tools, the PostgreSQL store)."""
    import functools
    import inspect

    def wrap(fn: Any) -> Any:
        if inspect.iscoroutinefunction(fn):

            @functools.wraps(fn)
            async def awaiting(*args: Any, **kwargs: Any) -> Any:
                try:
                    return await fn(*args, **kwargs)
                except catch as exc:
                    raise convert(exc) from None

            return awaiting
        if inspect.isgeneratorfunction(fn):

            @functools.wraps(fn)
            def generating(*args: Any, **kwargs: Any) -> Any:
                try:
                    yield from fn(*args, **kwargs)
                except catch as exc:
                    raise convert(exc) from None

            return generating

        @functools.wraps(fn)
        def calling(*args: Any, **kwargs: Any) -> Any:
            try:
                return fn(*args, **kwargs)
            except catch as exc:
                raise convert(exc) from None

        return calling

    return wrap
