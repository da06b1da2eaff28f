"""Conditions (``when:``): parsing, the static rules, and the one evaluator.

A condition is a small boolean expression over references, literals and a few operators
(grammar: the ``condition`` rule of ``expr.lark``)::

    †state.ci.status == "failed" and †input.attempt < 3
    not †state.cached          "urgent" in †state.labels          len(†state.prs) > 0

It is data, never code: there is no attribute access, no call but ``len``, and its size and
depth are bounded. :func:`evaluate` is the only evaluator (the engine calls it; a property
test compares it with a reference written directly in Python). Values follow JSON: ``true``
is not ``1``; a reference to a path nobody wrote reads as ``null``; ordering compares two
numbers or two strings, anything else is an error of the step (:class:`ConditionError`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Callable, Iterator

from .errors import Diagnostic, Span, error, warning
from .ir import BAD_LITERAL, MISSING, BoolOp, Compare, Const, Contains, Guard, Length, Not, Ref

MAX_LENGTH = 2000  # characters of a condition
MAX_DEPTH = 32  # nesting of operators and parentheses
_ORDER = ("<", "<=", ">", ">=")
_NEGATED = {"==": "!=", "!=": "==", "<": ">=", ">=": "<", ">": "<=", "<=": ">"}


class ConditionError(Exception):
    """A condition cannot be decided for these values (``"a" < 3``, ``len(5)``)."""


# --- parsing ------------------------------------------------------------------------------------


def parse_condition(text: Any, span: Span) -> tuple[Guard | None, list[Diagnostic]]:
    """``when:`` text -> a :class:`Guard`, or the diagnostics saying why not (positions inside the text)."""
    if isinstance(text, bool) or not isinstance(text, str):
        return None, [
            error(
                "bad-condition",
                f"a condition must be text, not {type(text).__name__}",
                span,
                'write it as a string, e.g. when: \u2020state.ready == true or when: "not \u2020state.cached"',
            )
        ]
    body = text.strip()
    if not body:
        return None, [error("bad-condition", "the condition is empty", span, "write a test, e.g. \u2020state.ok")]
    if len(body) > MAX_LENGTH:
        return None, [error("bad-condition", f"the condition is longer than {MAX_LENGTH} characters", span)]
    lead = len(text) - len(text.lstrip())
    from .expr_grammar import UnexpectedInput, build

    try:
        node = build("condition", body)
    except UnexpectedInput as exc:
        offset = getattr(exc, "pos_in_stream", None) or 0
        got = body[offset : offset + 12] or "end of text"
        return None, [
            error(
                "bad-condition",
                f"invalid condition at {got!r} in {body if len(body) <= 80 else body[:77] + '...'!r}",
                _at(span, lead + offset),
                _syntax_hint(body, offset),
            )
        ]
    except RecursionError:
        node = None
    if node is None or _depth(node) > MAX_DEPTH:
        return None, [error("bad-condition", f"the condition is nested deeper than {MAX_DEPTH} levels", span)]
    node = _place(node, span, lead)
    return Guard(node, body, span), []


def _syntax_hint(text: str, offset: int) -> str:
    from .expr import string_hint

    found = string_hint(text, offset)
    if found:
        return found
    if "&&" in text or "||" in text:
        return "conditions use the words and, or, not (&& and || join references in arguments)"
    if "=" in text and "==" not in text and "!=" not in text and "<=" not in text and ">=" not in text:
        return "compare with == (a single = is not a comparison)"
    if any(word in text[offset:] for word in ("True", "False", "None")):
        return "the literals are true, false and null (JSON)"
    return (
        "a condition compares references and literals: == != < <= > >=, and, or, not, in, len(...), "
        'e.g. \u2020state.ci.status == "failed" and not \u2020state.cached'
    )


def _at(span: Span, offset: int) -> Span:
    return Span(span.file, span.path, span.offset + offset)


def _place(node: Any, span: Span, lead: int) -> Any:
    """Attach the document position to every node (the grammar gives offsets inside the text)."""
    if isinstance(node, (Ref, Const)):
        return _with_span(node, _at(span, lead + node.span.offset))
    if isinstance(node, Compare):
        return Compare(node.op, _place(node.left, span, lead), _place(node.right, span, lead), _at(span, lead))
    if isinstance(node, Contains):
        return Contains(
            _place(node.item, span, lead), _place(node.container, span, lead), node.negated, _at(span, lead)
        )
    if isinstance(node, Length):
        return Length(_place(node.value, span, lead), _at(span, lead))
    if isinstance(node, Not):
        return Not(_place(node.value, span, lead), _at(span, lead))
    if isinstance(node, BoolOp):
        return BoolOp(node.op, tuple(_place(v, span, lead) for v in node.values), _at(span, lead))
    return node


def _with_span(node: Any, span: Span) -> Any:
    if isinstance(node, Ref):
        return Ref(node.root, node.path, span)
    return Const(node.value, span, node.source)


def _depth(node: Any) -> int:
    return 1 + max((_depth(c) for c in children(node)), default=0)


def children(node: Any) -> tuple:
    """The operands of a condition's node (none for a reference or a literal)."""
    if isinstance(node, Compare):
        return (node.left, node.right)
    if isinstance(node, Contains):
        return (node.item, node.container)
    if isinstance(node, (Length, Not)):
        return (node.value,)
    if isinstance(node, BoolOp):
        return node.values
    return ()


def guard_reads_item(guard: Guard) -> bool:
    """Whether a condition reads †item / †index (a fan-out then decides it per item)."""
    return any(ref.root in ("item", "index") for ref in condition_refs(guard.condition))


def condition_refs(node: Any) -> Iterator[Ref]:
    """Every reference a condition reads, in order (its dependencies)."""
    if isinstance(node, Ref):
        yield node
    for child in children(node):
        yield from condition_refs(child)


# --- evaluation ---------------------------------------------------------------------------------


def evaluate(node: Any, read: Callable[[Ref], Any]) -> bool:
    """Whether the condition holds; ``read(ref)`` gives a reference's value, or :data:`MISSING`."""
    return truthy(_value(node, read))


def _value(node: Any, read: Callable[[Ref], Any]) -> Any:
    kind = type(node)
    if kind is Ref:
        found = read(node)
        return None if found is MISSING else found
    if kind is Const:
        if node.value is BAD_LITERAL:
            raise ConditionError(f"the literal {node.source} cannot be read")
        return node.value
    if kind is BoolOp:
        if node.op == "and":
            return all(truthy(_value(v, read)) for v in node.values)
        return any(truthy(_value(v, read)) for v in node.values)
    if kind is Not:
        return not truthy(_value(node.value, read))
    if kind is Compare:
        return compare(node.op, _value(node.left, read), _value(node.right, read))
    if kind is Contains:
        found = contains(_value(node.item, read), _value(node.container, read))
        return not found if node.negated else found
    if kind is Length:
        return length(_value(node.value, read))
    raise ConditionError(f"cannot evaluate {node!r}")


def truthy(value: Any) -> bool:
    """JSON truthiness: null, false, 0, "", [] and {} are false."""
    return bool(value)


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def same(a: Any, b: Any) -> bool:
    """JSON equality: a boolean is never a number (``true != 1``), ``1 == 1.0``."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if _number(a) and _number(b):
        return a == b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


def compare(op: str, a: Any, b: Any) -> bool:
    if op == "==":
        return same(a, b)
    if op == "!=":
        return not same(a, b)
    if not ((_number(a) and _number(b)) or (isinstance(a, str) and isinstance(b, str))):
        raise ConditionError(f"cannot order {json_type(a)} and {json_type(b)} ({op})")
    if op == "<":
        return a < b
    if op == "<=":
        return a <= b
    if op == ">":
        return a > b
    return a >= b


def contains(item: Any, container: Any) -> bool:
    if isinstance(container, str):
        if not isinstance(item, str):
            raise ConditionError(f"cannot look for {json_type(item)} in a string")
        return item in container
    if isinstance(container, list):
        return any(same(item, x) for x in container)
    if isinstance(container, Mapping):
        return isinstance(item, str) and item in container
    raise ConditionError(f"`in` needs a string, a list or an object, not {json_type(container)}")


def length(value: Any) -> int:
    if isinstance(value, (str, list, Mapping)):
        return len(value)
    raise ConditionError(f"len() needs a string, a list or an object, not {json_type(value)}")


def json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if _number(value):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    return "an object" if isinstance(value, Mapping) else type(value).__name__


# --- text and exclusivity ------------------------------------------------------------------------


def to_text(node: Any) -> str:
    """The canonical spelling of a condition (for preview, graph labels and comparing conditions)."""
    if isinstance(node, Ref):
        return str(node)
    if isinstance(node, Const):
        import json

        return node.source if node.value is BAD_LITERAL else json.dumps(node.value, ensure_ascii=False)
    if isinstance(node, Compare):
        return f"{_operand_text(node.left)} {node.op} {_operand_text(node.right)}"
    if isinstance(node, Contains):
        return f"{_operand_text(node.item)} {'not in' if node.negated else 'in'} {_operand_text(node.container)}"
    if isinstance(node, Length):
        return f"len({to_text(node.value)})"
    if isinstance(node, Not):
        return f"not {_operand_text(node.value)}"
    if isinstance(node, BoolOp):
        return f" {node.op} ".join(_operand_text(v) if isinstance(v, BoolOp) else to_text(v) for v in node.values)
    return repr(node)


def _operand_text(node: Any) -> str:
    text = to_text(node)
    return f"({text})" if isinstance(node, (BoolOp, Compare, Contains, Not)) else text


def atom(node: Any) -> tuple[str, int]:
    """``(key, polarity)``: two conditions with one key and different polarities exclude each other.

    ``x == "a"`` / ``x != "a"``, ``x < 3`` / ``x >= 3``, ``C`` / ``not C`` share a key.
    """
    polarity = 0
    while isinstance(node, Not):
        node, polarity = node.value, 1 - polarity
    if isinstance(node, Compare) and node.op in ("!=", ">=", ">"):
        node, polarity = Compare(_NEGATED[node.op], node.left, node.right), 1 - polarity  # type: ignore[arg-type]
    if isinstance(node, Contains) and node.negated:
        node, polarity = Contains(node.item, node.container), 1 - polarity
    return to_text(node), polarity


# --- static rules ---------------------------------------------------------------------------------


def condition_rules(guard: Guard, inputs: Mapping[str, Any] | None, step_id: str) -> Iterator[Diagnostic]:
    """What can be known before running: unreadable literals, comparisons the input schema rules
    out, a condition that reads nothing (constant)."""
    node = guard.condition
    refs = list(condition_refs(node))
    for const in _consts(node):
        if const.value is BAD_LITERAL:
            yield error(
                "bad-condition",
                f"the literal {const.source} cannot be read",
                const.span,
                "strings are quoted with valid escapes; numbers have at most 4300 digits",
            )
    yield from _type_rules(node, inputs or {})
    if not refs:
        yield warning(
            "constant-condition",
            f"step {step_id}: the condition {guard.text!r} reads no reference, so it never changes",
            guard.span,
            "test a reference (\u2020state... or \u2020input...), or remove `when:`",
        )


def _consts(node: Any) -> Iterator[Const]:
    if isinstance(node, Const):
        yield node
    for child in children(node):
        yield from _consts(child)


def _static_type(node: Any, inputs: Mapping[str, Any]) -> str | None:
    """The JSON type an operand certainly has, when known before running."""
    if isinstance(node, Const):
        value = node.value
        if value is BAD_LITERAL:
            return None
        return (
            "boolean"
            if isinstance(value, bool)
            else "number"
            if _number(value)
            else ("string" if isinstance(value, str) else "null" if value is None else None)
        )
    if isinstance(node, Length):
        return "number"
    if isinstance(node, Ref) and node.root == "input" and len(node.path) == 1:
        schema = inputs.get(str(node.path[0]))
        wanted = schema.get("type") if isinstance(schema, Mapping) else None
        return {"integer": "number"}.get(wanted, wanted) if isinstance(wanted, str) else None
    return None


def _type_rules(node: Any, inputs: Mapping[str, Any]) -> Iterator[Diagnostic]:
    if isinstance(node, Compare) and node.op in _ORDER:
        kinds = [_static_type(side, inputs) for side in (node.left, node.right)]
        for side, kind in zip((node.left, node.right), kinds):
            if kind is not None and kind not in ("number", "string"):
                yield _type_error(node, side, kind)
        if kinds[0] in ("number", "string") and kinds[1] in ("number", "string") and kinds[0] != kinds[1]:
            side = node.left if isinstance(node.left, Ref) else node.right
            yield _type_error(node, side, kinds[1], kinds[0])
    if isinstance(node, Length):
        kind = _static_type(node.value, inputs)
        if kind in ("number", "boolean", "null"):
            yield error(
                "bad-condition",
                f"len() of {to_text(node.value)}, which is a {kind}",
                getattr(node.value, "span", node.span),
                "len() counts the items of a list or an object, or the characters of a string",
            )
    for child in children(node):
        yield from _type_rules(child, inputs)


def _type_error(node: Compare, side: Any, kind: str, other: str | None = None) -> Diagnostic:
    what = f"compares a {other} with a {kind}" if other else f"orders a {kind}"
    return error(
        "bad-condition",
        f"{to_text(node)} {what}: {node.op} orders two numbers or two strings",
        getattr(side, "span", node.span),
        "compare values of one type (the input's schema says what it holds), or use == / !=",
    )
