"""JSON read from text dagplan did not write: one reader, one depth limit, never a ``RecursionError``.

A gate's answer file, a model's answer and its tool-call arguments, an MCP lock, a cassette, a value on the
command line: each is JSON someone else wrote, and ``json.loads`` of ``[[[[...`` a few thousand deep raises
``RecursionError``, which no ``except ValueError`` catches. :func:`loads` is ``json.loads`` that refuses
nesting past a limit as :class:`TooDeep`, a ``ValueError`` (so the reader's own "not JSON" path says it), and
:func:`depth` is the one walk that measures nesting (level by level: linear, no recursion).
``tests/test_json_readers.py`` walks the source: every ``json.loads`` of text from outside goes through here.
"""

from __future__ import annotations

import json
from typing import Any

MAX_DEPTH = 64  # JSON from outside nests at most this deep (a plan's own limit: dsl.errors.Limits.max_depth)


class TooDeep(ValueError):
    """JSON nested deeper than its reader's limit (a ``ValueError``: a reader's "not JSON" path takes it)."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"it nests deeper than {limit} levels")
        self.limit = limit


def depth(value: Any, limit: int = MAX_DEPTH) -> int:
    """How deep ``value`` (parsed JSON: dicts, lists, scalars) nests, counted up to ``limit + 1``: a scalar
    is 0, ``[]`` 1, ``[[1]]`` 2. Level by level, each container once: linear in its size, never recursive."""
    level = [value] if isinstance(value, (dict, list)) else []
    found = 0
    while level and found <= limit:
        found += 1
        below: list = []
        for container in level:
            items = container.values() if isinstance(container, dict) else container
            below += [v for v in items if isinstance(v, (dict, list))]
        level = below
    return found


def loads(text: str | bytes, *, max_depth: int = MAX_DEPTH, **options: Any) -> Any:
    """``json.loads(text, **options)``, refusing nesting deeper than ``max_depth`` with :class:`TooDeep`."""
    try:
        value = json.loads(text, **options)
    except RecursionError:
        raise TooDeep(max_depth) from None
    if depth(value, max_depth) > max_depth:
        raise TooDeep(max_depth)
    return value


def value_or_text(text: str, *, max_depth: int = MAX_DEPTH) -> Any:
    """The JSON value ``text`` holds, else the text itself (a model's tool-call arguments that are no JSON)."""
    try:
        return loads(text, max_depth=max_depth)
    except ValueError:
        return text


def raw_decode(text: str, start: int = 0, *, max_depth: int = MAX_DEPTH) -> tuple[Any, int]:
    """``json.JSONDecoder().raw_decode(text, start)`` (a value and where it ends) with :func:`loads`' limit."""
    try:
        value, end = _DECODER.raw_decode(text, start)
    except RecursionError:
        raise TooDeep(max_depth) from None
    if depth(value, max_depth) > max_depth:
        raise TooDeep(max_depth)
    return value, end


_DECODER = json.JSONDecoder()
