"""A plan read as it arrives: each step, once its text is complete, as a prefix of the plan that loads.

A model writes its plan a token at a time. :class:`StepStream` is fed those pieces and answers, whenever a
step's text has just been completed, the plan's text so far closed where it stands: the JSON forms (the
canonical ``{"steps": [...]}``, the ``steps`` and ``plan-tool`` dialects, the ``calls`` list or ``{"calls":
[...]}``) are scanned bracket by bracket, outside strings, and a step is complete when the object it is an
element of closes; the closed prefix is the text up to there and the brackets still open, closed. Any other
text (YAML, prose around it) is complete at a line break: every step of what loads but the last, which the
next line may continue (``Prefix.last_open``); such a prefix is offered only where a step may have just been
completed, a line that starts a list item or a top-level key once a ``steps:`` / ``calls:`` line was seen, so
prose (a model reasoning aloud before its plan) costs no check. A code fence starts its body afresh: a JSON
plan after a page of reasoning is scanned bracket by bracket. The prefix is checked by the caller as any
plan is (:func:`dagplan.dsl.check`), so a diagnostic has its line and column in the model's own text: each
character is scanned once, and only prefixes that may hold a new step are offered.

Scanned by hand, not with an incremental JSON library (``ijson``): what is needed is a position in the
text (where a step ends), which such a library does not give, and the check that follows needs the text.
"""

from __future__ import annotations

import re


_STEP_LISTS = frozenset({"steps", "calls"})  # the keys whose array's elements are steps
_CLOSE = {"{": "}", "[": "]"}
_STEPS_LINE = re.compile(r"\s*[\"']?(steps|calls)[\"']?\s*:|-\s+[\"']?_tool\b")  # a steps list, or a calls list
_STEP_BOUNDARY = re.compile(r"\s*-(\s|$)|[A-Za-z_\"'][\w\"'-]*\s*:")  # a list item, or a key at the line's start


class Prefix:
    """The plan's text so far, closed where it stands. Its text is made when asked for (a caller that keeps
    only the newest prefix copies the text once, not once a step)."""

    __slots__ = ("_source", "_end", "_closing", "_text", "steps", "final")

    def __init__(self, text: "str | StepStream", steps: int, final: bool = False, end: int = 0, closing: str = ""):
        self._source, self._end, self._closing = text, end, closing
        self._text: str | None = text if isinstance(text, str) else None
        self.steps = steps  # how many steps it holds whose text is complete (JSON); -1: all that loads but the last
        self.final = final  # the whole answer (the stream ended)

    @property
    def text(self) -> str:
        if self._text is None:
            assert isinstance(self._source, StepStream)
            self._text = self._source.text_between(0, self._end) + self._closing
        return self._text

    @property
    def last_open(self) -> bool:
        return self.steps < 0 and not self.final

    def __eq__(self, other: object) -> bool:
        mine, theirs = (self.text, self.steps, self.final), None
        if isinstance(other, Prefix):
            theirs = (other.text, other.steps, other.final)
        return mine == theirs

    def __repr__(self) -> str:
        return f"Prefix(steps={self.steps}, final={self.final}, text={self.text[:40]!r}...)"


_KEPT = 256  # characters of a string the scan keeps (a key is short: only `steps` / `calls` matter)


class StepStream:
    """Feed the model's text as it comes (:meth:`feed`); each call answers the prefixes that complete a step.
    Each piece is scanned once, on its own: the time is linear in the text, whatever the size of the pieces."""

    def __init__(self) -> None:
        self._pieces: list[str] = []  # the text, as fed (joined when the whole of it is asked for)
        self._size = 0
        self._at = 0  # where scanning resumes
        self._mode: str | None = None  # "json" | "lines", decided at the first character that says
        self._stack: list[tuple[str, str | None]] = []  # open brackets and the key each was opened under
        self._string = False
        self._escaped = False
        self._string_kept: list[str] | None = []  # the open string's text so far (None: longer than a key)
        self._last_string: str | None = None
        self._key: str | None = None  # the key whose value comes next
        self._steps = 0
        self._fence = False
        self._start = 0  # where the document (or the prose before it) begins: after a fence's language line
        self._line_at = 0  # lines mode: where the next complete line begins
        self._steps_seen = False  # lines mode: a `steps:` / `calls:` line was seen

    @property
    def text(self) -> str:
        """All that was fed."""
        if len(self._pieces) > 1:
            self._pieces = ["".join(self._pieces)]
        return self._pieces[0] if self._pieces else ""

    def text_between(self, begin: int, end: int) -> str:
        """``text[begin:end]``, reading only the pieces it spans from the end (the recent text is what a scan
        asks for)."""
        out: list[str] = []
        stop = self._size
        for piece in reversed(self._pieces):
            first = stop - len(piece)
            if first < end and stop > begin:
                out.append(piece[max(begin - first, 0) : min(end, stop) - first])
            if first <= begin:
                break
            stop = first
        return "".join(reversed(out))

    def feed(self, piece: str) -> list[Prefix]:
        if not piece:
            return []
        self._pieces.append(piece)
        self._size += len(piece)
        if len(self._pieces) > 4096:  # keep the list short: a join now and then, amortized linear
            self._pieces = ["".join(self._pieces)]
        if self._mode is None:
            self._decide()
        if self._mode == "lines" and "\n" in piece:
            return self._lines()
        if self._mode == "json":
            return self._scan()
        return []

    def end(self) -> Prefix:
        """The whole answer."""
        return Prefix(self.text, self._steps if self._mode in ("json", "done") else -1, final=True)

    def _decide(self) -> None:
        body = self.text_between(self._start, self._size).lstrip()
        if len(body) < 3 and "```".startswith(body):
            return  # a fence may be starting
        if body.startswith("```"):  # a code fence: its language line first
            if "\n" not in body:
                return
            body = body.split("\n", 1)[1].lstrip()
            self._fence = True
        if not body:
            return
        if body[0] in "{[":
            self._mode = "json"
            self._at = self._size - len(body)
        else:
            self._mode = "lines"
            self._line_at = self._size - len(body)

    def _lines(self) -> list[Prefix]:
        """The complete lines since the last call: a prefix when one of them may complete a step; a fence
        that opens hands the rest to its body's mode."""
        base = self._line_at
        segment = self.text_between(base, self._size)
        end = segment.rfind("\n")
        offer = False
        at = 0
        while 0 <= at <= end:
            stop = segment.index("\n", at)
            line = segment[at:stop]
            at = stop + 1
            if not self._fence and line.lstrip().startswith("```"):  # the plan's fence, after prose
                self._mode, self._start, self._line_at = None, base + stop + 1, base + at
                self._fence = True
                self._decide()
                if self._mode == "json":
                    return self._scan()
                if self._mode is None:
                    return []
                at = self._line_at - base
                continue
            offer = offer or (self._steps_seen and _STEP_BOUNDARY.match(line) is not None)
            if _STEPS_LINE.match(line):
                self._steps_seen = True
        self._line_at = max(self._line_at, base + end + 1)
        return [Prefix(self, -1, end=base + end + 1)] if offer else []

    def _scan(self) -> list[Prefix]:
        found: list[Prefix] = []
        base = self._at
        text, stack = self.text_between(base, self._size), self._stack
        i = 0
        opened_at = 0  # where the open string's text begins in this segment
        while i < len(text):
            ch = text[i]
            if self._string:
                if self._escaped:
                    self._escaped = False
                elif ch == "\\":
                    self._escaped = True
                elif ch == '"':
                    self._string = False
                    kept = self._string_kept
                    self._last_string = None if kept is None else "".join(kept) + text[opened_at:i]
                    if self._last_string is not None and len(self._last_string) > _KEPT:
                        self._last_string = None
            elif ch == '"':
                self._string, self._string_kept, opened_at = True, [], i + 1
            elif ch == ":":
                self._key = self._last_string
            elif ch in "{[":
                stack.append((ch, self._key if stack and stack[-1][0] == "{" else None))
                self._key = None
            elif ch in "}]":
                if not stack:  # past the document's end (prose after it): nothing more is a step
                    self._mode = "done"
                    break
                stack.pop()
                if ch == "}" and self._is_step_list(stack):
                    self._steps += 1
                    closing = "".join(_CLOSE[b] for b, _ in reversed(stack))
                    found.append(Prefix(self, self._steps, end=base + i + 1, closing=closing))
                if not stack:
                    self._mode = "done"
                    i += 1
                    break
            elif ch == ",":
                self._key = None
            i += 1
        if self._string and self._string_kept is not None:  # a string still open: keep its text while short
            self._string_kept.append(text[opened_at:i])
            if sum(map(len, self._string_kept)) > _KEPT:
                self._string_kept = None
        self._at = base + i
        return found

    @staticmethod
    def _is_step_list(stack: list[tuple[str, str | None]]) -> bool:
        """Whether the innermost open bracket is the plan's list of steps: the top-level array (calls), or
        an array under ``steps`` / ``calls`` of the top-level object."""
        if len(stack) == 1:
            return stack[0][0] == "["
        return len(stack) == 2 and stack[0][0] == "{" and stack[1][0] == "[" and stack[1][1] in _STEP_LISTS
