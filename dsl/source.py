"""Where things are in the text: document paths -> line:col, built only when a diagnostic needs it.

:class:`SourceMap` is what a :class:`~.load.Document` carries. On first use it records where
every value (and mapping key) of the document starts: for JSON with a small scanner
(:func:`_json_positions`), for YAML by reading the text again with positions on (the YAML
builder of :mod:`.load`). A span's ``offset`` inside a string scalar is turned into a source
position by :func:`_string_position`, which knows quoting, escapes, folding and block scalars.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from .record import replace
from typing import Callable, Protocol

from .errors import DEFAULT_LIMITS, DocPath, Limits, LoadError, Span
from .yaml_reader import Index, _read_yaml


def _identity(path: DocPath) -> DocPath:
    return path


class Positions(Protocol):
    """What a document knows of where its values are written: a :class:`SourceMap`, or the map of a plan
    written inline inside another one."""

    text: str

    def locate(self, span: Span) -> Span: ...

    def key_position(self, path: DocPath) -> tuple[int, int] | None: ...


class SourceMap:
    """Document paths -> line:col in the original text, built on first use."""

    def __init__(self, text: str, name: str, syntax: str, parse_text: str, limits: Limits = DEFAULT_LIMITS):
        self.text, self.name, self.syntax, self.parse_text = text, name, syntax, parse_text
        self.limits = limits
        self.to_original: Callable[[DocPath], DocPath] = _identity
        self._index: Index | None = None
        self._line_starts: list[int] | None = None
        self._walks: dict = {}  # _string_position's checkpoints, per string

    def locate(self, span: Span) -> Span:
        """Fill line/col (1-based) of the value at ``span.path`` (+ ``span.offset`` inside a string)."""
        path = self.to_original(span.path)
        index = self.index()
        if span.key and path in index.keys:
            line, col = self.line_col(index.keys[path])
            return replace(span, file=span.file if span.file != "<string>" else self.name, line=line, col=col)
        offset = span.offset
        while path not in index.values and path:
            path, offset = path[:-1], 0  # a missing key: point at the mapping that lacks it
        start, style = index.values.get(path, (0, ""))
        position = _string_position(self.parse_text, start, style, offset, self._walks) if offset else start
        line, col = self.line_col(position)
        return replace(span, file=span.file if span.file != "<string>" else self.name, line=line, col=col)

    def key_position(self, path: DocPath) -> tuple[int, int] | None:
        """Line:col of the key naming ``path`` (for "unknown key" messages)."""
        where = self.index().keys.get(self.to_original(path))
        return self.line_col(where) if where is not None else None

    def index(self) -> Index:
        if self._index is None:
            self._index = Index()
            try:
                if self.syntax == "json":
                    _json_positions(self.parse_text, self._index)
                else:
                    _read_yaml(self.parse_text, self.name, self.limits, self._index)
            except (LoadError, ValueError, IndexError):
                pass  # positions are best effort; a span then points at the top
        return self._index

    def line_col(self, position: int) -> tuple[int, int]:
        if self._line_starts is None:
            self._line_starts = [0] + [m.end() for m in re.finditer("\n", self.text)]
        line = bisect_right(self._line_starts, position)
        return line, position - self._line_starts[line - 1] + 1


def _json_positions(text: str, index: Index) -> None:
    """A tiny JSON scanner recording where every value (and key) starts; no recursion."""
    from json.decoder import scanstring

    ws = re.compile(r"[ \t\r\n]*")
    scalar = re.compile(r"-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?|true|false|null")
    stack: list[list] = []  # [path, is_map, next_key_or_index]
    pos = ws.match(text, 0).end()
    path: DocPath = ()
    while True:
        pos = ws.match(text, pos).end()
        char = text[pos]
        if stack and stack[-1][1] and stack[-1][2] is None:  # expecting a key or }
            if char == "}":
                stack.pop()
                pos = _after_value(text, pos + 1, stack, ws)
                if pos < 0:
                    return
                continue
            key, end = scanstring(text, pos + 1)
            index.keys[stack[-1][0] + (key,)] = pos
            stack[-1][2] = key
            pos = ws.match(text, end).end() + 1  # past ':'
            continue
        if stack:
            frame = stack[-1]
            path = frame[0] + (frame[2],)
        if char == "]" and stack and not stack[-1][1]:
            stack.pop()
        else:
            index.values[path] = (pos, '"' if char == '"' else "")
            if char in "{[":
                stack.append([path, char == "{", None if char == "{" else 0])
                pos += 1
                continue
            end = scanstring(text, pos + 1)[1] if char == '"' else scalar.match(text, pos).end()
            pos = end - 1
        pos = _after_value(text, pos + 1, stack, ws)
        if pos < 0:
            return


def _after_value(text: str, pos: int, stack: list[list], ws: re.Pattern) -> int:
    """Move past a finished value: a comma advances the container, a closer pops it."""
    while stack:
        pos = ws.match(text, pos).end()
        char = text[pos] if pos < len(text) else ""
        frame = stack[-1]
        if char == ",":
            frame[2] = None if frame[1] else frame[2] + 1
            return pos + 1
        if char in "}]":
            stack.pop()
            pos += 1
            continue
        return -1
    return -1


_ESCAPE_WIDTH = {"x": 4, "u": 6, "U": 10}


def _string_position(text: str, start: int, style: str, offset: int, walks: dict | None = None) -> int:
    """Source index of character ``offset`` of the string scalar starting at ``start``. ``walks`` keeps, per
    string, checkpoints of the walk (every :data:`_EVERY` characters): the diagnostics of one long string are
    then placed in time linear in the string, not once per diagnostic from its start."""
    if style in ("|", ">"):
        first, indent = _block_start(text, start)
        if first < 0:
            return start
        step, pos = _block_step(text, indent), first + indent
    else:
        step, pos = _flow_step(text, style), start + (1 if style in ('"', "'") else 0)
    marks = walks.setdefault((start, style), [(0, pos)]) if walks is not None else [(0, pos)]
    at = bisect_right(marks, (offset, len(text) + 1)) - 1
    seen, pos = marks[at]
    end = len(text)
    while seen < offset and pos < end:
        pos = step(pos)
        seen += 1
        if seen % _EVERY == 0 and seen > marks[-1][0]:
            marks.append((seen, pos))
    return pos


_EVERY = 512  # characters of a string between two checkpoints of its walk


def _flow_step(text: str, style: str) -> Callable[[int], int]:
    """The walk over a plain or quoted scalar: from one value character's source index to the next's."""

    def step(pos: int) -> int:
        char = text[pos]
        if char == "\\" and style == '"':
            return pos + _ESCAPE_WIDTH.get(text[pos + 1 : pos + 2], 2)
        if char == "'" and style == "'" and text.startswith("''", pos):
            return pos + 2
        if char in "\r\n":
            return _skip_fold(text, pos)
        return pos + 1

    return step


def _skip_fold(text: str, pos: int) -> int:
    """A line break inside a flow scalar folds with the indentation after it."""
    while pos < len(text) and text[pos] in " \t\r\n":
        pos += 1
    return pos


_SPACES = re.compile(" *")


def _block_start(text: str, start: int) -> tuple[int, int]:
    """``|`` / ``>`` scalars: where the content starts (the line after the header), and its indentation."""
    line_end = text.find("\n", start)
    if line_end < 0:
        return -1, 0
    first = line_end + 1
    while first < len(text) and text.startswith("\n", first):
        first += 1
    spaces = _SPACES.match(text, first)
    return first, (spaces.end() - first) if spaces else 0


def _block_step(text: str, indent: int) -> Callable[[int], int]:
    """The walk over a block scalar: one source line per value line (exact for ``|``, the right line for
    ``>``), the indentation removed."""

    def step(pos: int) -> int:
        if text[pos] != "\n":
            return pos + 1
        pos += 1
        spaces = _SPACES.match(text, pos, pos + indent)
        return spaces.end() if spaces else pos

    return step
