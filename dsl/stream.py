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

from .record import record

_STEP_LISTS = frozenset({"steps", "calls"})  # the keys whose array's elements are steps
_CLOSE = {"{": "}", "[": "]"}
_STEPS_LINE = re.compile(r"\s*[\"']?(steps|calls)[\"']?\s*:|-\s+[\"']?_tool\b")  # a steps list, or a calls list
_STEP_BOUNDARY = re.compile(r"\s*-(\s|$)|[A-Za-z_\"'][\w\"'-]*\s*:")  # a list item, or a key at the line's start


@record(frozen=True)
class Prefix:
    """The plan's text so far, closed where it stands."""

    text: str
    steps: int  # how many steps it holds whose text is complete (JSON); -1: all of what loads but the last
    final: bool = False  # the whole answer (the stream ended)

    @property
    def last_open(self) -> bool:
        return self.steps < 0 and not self.final


class StepStream:
    """Feed the model's text as it comes (:meth:`feed`); each call answers the prefixes that complete a step."""

    def __init__(self) -> None:
        self.text = ""
        self._at = 0  # where scanning resumes
        self._mode: str | None = None  # "json" | "lines", decided at the first character that says
        self._stack: list[tuple[str, str | None]] = []  # open brackets and the key each was opened under
        self._string = False
        self._escaped = False
        self._string_start = 0
        self._last_string: str | None = None
        self._key: str | None = None  # the key whose value comes next
        self._steps = 0
        self._fence = False
        self._start = 0  # where the document (or the prose before it) begins: after a fence's language line
        self._line_at = 0  # lines mode: where the next complete line begins
        self._steps_seen = False  # lines mode: a `steps:` / `calls:` line was seen

    def feed(self, piece: str) -> list[Prefix]:
        self.text += piece
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
        body = self.text[self._start :].lstrip()
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
            self._at = len(self.text) - len(body)
        else:
            self._mode = "lines"
            self._line_at = len(self.text) - len(body)

    def _lines(self) -> list[Prefix]:
        """The complete lines since the last call: a prefix when one of them may complete a step; a fence
        that opens hands the rest to its body's mode."""
        end = self.text.rfind("\n")
        offer = False
        at = self._line_at
        while at <= end:
            stop = self.text.index("\n", at)
            line = self.text[at:stop]
            at = stop + 1
            if not self._fence and line.lstrip().startswith("```"):  # the plan's fence, after prose
                self._mode, self._start, self._line_at = None, stop + 1, at
                self._fence = True
                self._decide()
                if self._mode == "json":
                    return self._scan()
                if self._mode is None:
                    return []
                at = self._line_at
                continue
            offer = offer or (self._steps_seen and _STEP_BOUNDARY.match(line) is not None)
            if _STEPS_LINE.match(line):
                self._steps_seen = True
        self._line_at = max(self._line_at, end + 1)
        return [Prefix(self.text[: end + 1], -1)] if offer else []

    def _scan(self) -> list[Prefix]:
        found: list[Prefix] = []
        text, stack = self.text, self._stack
        i = self._at
        while i < len(text):
            ch = text[i]
            if self._string:
                if self._escaped:
                    self._escaped = False
                elif ch == "\\":
                    self._escaped = True
                elif ch == '"':
                    self._string = False
                    self._last_string = text[self._string_start : i]
            elif ch == '"':
                self._string, self._string_start = True, i + 1
            elif ch == ":":
                self._key = self._last_string
            elif ch in "{[":
                stack.append((ch, self._key if stack and stack[-1][0] == "{" else None))
                self._key = None
            elif ch in "}]":
                if not stack:  # past the document's end (prose after it): nothing more is a step
                    self._mode = "done"
                    break
                opened, _ = stack.pop()
                if ch == "}" and self._is_step_list(stack):
                    self._steps += 1
                    closing = "".join(_CLOSE[b] for b, _ in reversed(stack))
                    found.append(Prefix(text[: i + 1] + closing, self._steps))
                if not stack:
                    self._mode = "done"
                    i += 1
                    break
            elif ch == ",":
                self._key = None
            i += 1
        self._at = i
        return found

    @staticmethod
    def _is_step_list(stack: list[tuple[str, str | None]]) -> bool:
        """Whether the innermost open bracket is the plan's list of steps: the top-level array (calls), or
        an array under ``steps`` / ``calls`` of the top-level object."""
        if len(stack) == 1:
            return stack[0][0] == "["
        return len(stack) == 2 and stack[0][0] == "{" and stack[1][0] == "[" and stack[1][1] in _STEP_LISTS
