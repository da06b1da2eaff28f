"""The lark side of :mod:`.expr`: the grammar (``expr.lark``) and the transformer to IR nodes.

Kept apart so that ``lark`` (about 45 ms to import) is loaded only when a string is not one
of the common forms the fast paths of :mod:`.expr` read themselves.
"""

from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources
from typing import Any, cast

from lark import Lark, Token, Transformer, UnexpectedInput  # noqa: F401 - UnexpectedInput is used by expr

from .errors import Span
from .ir import (
    BoolOp,
    Compare,
    Const,
    Contains,
    Length,
    Not,
    Placeholder,
    Ref,
    Root,
    Template,
    View,
    literal_value,
    view_length,
)


@lru_cache(maxsize=None)
def _parser(start: str) -> Lark:
    grammar = resources.files(__package__).joinpath("expr.lark").read_text(encoding="utf-8")
    return Lark(grammar, start=start, parser="lalr", maybe_placeholders=False)


class _Build(Transformer):
    """Tree -> IR nodes. Spans carry only the offset inside the string; never raises."""

    def template(self, parts):
        merged: list = []
        for part in parts:
            if isinstance(part, str) and merged and isinstance(merged[-1], str):
                merged[-1] += part
            else:
                merged.append(part)
        return Template(tuple(merged))

    def text(self, items):
        (tok,) = items
        return tok[1:] if tok.type == "ESCAPE" else str(tok)

    def ref(self, items):
        sigil, root, *path = items
        return Ref(cast(Root, str(root)), tuple(path), Span(offset=sigil.start_pos or 0))

    def key(self, items):
        return str(items[1])

    def index(self, items):
        return int(items[1])

    def quoted_key(self, items):
        return json.loads(items[1])

    def placeholder(self, items):
        tok: Token = items[0]
        view, n = "full", None
        if len(items) > 1:
            suffix = str(items[1])[1:]
            view, _, count = suffix.partition("=")
            n = view_length(count)
        return Placeholder(tok[1:], cast(View, view), n, Span(offset=tok.start_pos or 0))

    def alt(self, refs):
        return tuple(refs)

    def expr(self, alts):
        ops = {"||"} if len(alts) > 1 else set()
        return alts, ops | ({"&&"} if any(len(a) > 1 for a in alts) else set())

    # --- conditions: build nodes, never judge (a bad literal becomes BAD_LITERAL for the validator)

    def condition(self, items):
        return items[0]

    def or_test(self, items):
        return BoolOp("or", tuple(items), items[0].span if hasattr(items[0], "span") else Span())

    def and_test(self, items):
        return BoolOp("and", tuple(items), items[0].span if hasattr(items[0], "span") else Span())

    def negation(self, items):
        return Not(items[0], getattr(items[0], "span", Span()))

    def compare(self, items):
        left, op, right = items
        return Compare(op.strip(), left, right, Span(offset=op.start_pos))

    def contains(self, items):
        item, op, container = items
        return Contains(item, container, op.type == "NOT_IN", Span(offset=op.start_pos))

    def length(self, items):
        return Length(items[0], getattr(items[0], "span", Span()))

    def literal(self, items):
        (tok,) = items
        return Const(_literal(tok), Span(offset=tok.start_pos), str(tok))


def _literal(tok: Token) -> Any:
    return literal_value(str(tok))


_BUILD = _Build()


def build(start: str, text: str) -> Any:
    """Parse ``text`` from rule ``start`` into IR nodes; raises lark's ``UnexpectedInput``."""
    return _BUILD.transform(_parser(start).parse(text))
