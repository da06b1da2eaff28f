"""Resolving a step's arguments against the run: references, placeholders, templates.

Reading a path that nobody wrote (a branch not taken) is not an error but a
:class:`Dead` signal: the engine skips the step (or, inside ``a || b``, takes the
next alternative).
"""

from __future__ import annotations

import datetime
import enum
import json
import math
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Callable

from ...dsl.ir import MISSING, AllOf, AnyOf, Placeholder, Ref, Template  # MISSING: one sentinel, shared

ELLIPSIS = "\u2026"


class Dead(Exception):
    """A reference that can no longer be written: the reader is skipped."""

    def __init__(self, ref: Ref):
        super().__init__(str(ref))
        self.ref = ref


class BadReference(Exception):
    """A reference into a value that does not have that key or index."""


class MissingInput(BadReference):
    """``†input.NAME`` of an input the run was not given: an error, unless a ``||`` alternative or literal
    default follows it (then it is as unwritten as a branch not taken)."""


def get_path(root: Any, path: tuple) -> Any:
    """The value at ``path`` inside ``root``, or MISSING."""
    node = root
    for key in path:
        if type(node) is dict and type(key) is str:  # the common step (an ABC check costs 5x this)
            if key not in node:
                return MISSING
            node = node[key]
        elif isinstance(key, int):
            if not isinstance(node, (list, tuple)) or not -len(node) <= key < len(node):
                return MISSING
            node = node[key]
        else:
            if not isinstance(node, Mapping) or key not in node:
                return MISSING
            node = node[key]
    return node


def set_path(root: dict, path: tuple, value: Any) -> None:
    """Write ``value`` at ``path``, creating objects (and padding lists) on the way."""
    if len(path) == 1 and type(root) is dict:  # †state.name: the commonest output
        root[path[0]] = value
        return
    node: Any = root
    for key, nxt in zip(path, path[1:]):
        child = _child(node, key)
        if not isinstance(child, (dict, list)):
            child = [] if isinstance(nxt, int) else {}
            _put(node, key, child)
        node = child
    _put(node, path[-1], value)


def _child(node: Any, key: Any) -> Any:
    if isinstance(node, list):
        return node[key] if isinstance(key, int) and key < len(node) else None
    return node.get(key)


def _put(node: Any, key: Any, value: Any) -> None:
    if isinstance(node, list):
        node.extend([None] * (key + 1 - len(node)))
        node[key] = value
    else:
        node[key] = value


def thaw(value: Any) -> Any:
    """A plain, mutable copy of a read-only IR value (mappings -> dicts, tuples -> lists)."""
    if isinstance(value, Mapping):
        return {k: thaw(v) for k, v in value.items()}
    if isinstance(value, (tuple, list)):
        return [thaw(v) for v in value]
    return value


class NotJSON(Exception):
    """A step produced a value that JSON cannot hold (and dependents could not read back after a resume)."""


MAX_VALUE_DEPTH = 512
MAX_WORD_DEPTH = 64  # a value typed on a command line (an input, an answer) is small


def word_value(raw: str) -> Any:
    """A value written as one word (``--input k=V``, ``--answer STEP=V``, ``dagplan answer RUN STEP V``):
    its JSON when it is JSON, else the text itself. The one parse of such words: raises ValueError (with
    the reason) for what JSON-as-dagplan-keeps-it cannot hold: NaN, Infinity, a number past a float's range
    (``1e999``), nesting deeper than :data:`MAX_WORD_DEPTH`."""
    from ...dsl.jsontext import TooDeep, loads

    try:
        return loads(raw, max_depth=MAX_WORD_DEPTH, parse_constant=_no_constant, parse_float=_finite)
    except TooDeep:
        raise
    except _NotFinite as exc:
        raise ValueError(str(exc)) from None
    except ValueError:
        return raw  # not JSON: the text itself


class _NotFinite(ArithmeticError):
    pass


def _no_constant(name: str) -> Any:
    raise _NotFinite(f"{name} is not a JSON value")


def _finite(text: str) -> float:
    number = float(text)
    if math.isinf(number):
        raise _NotFinite(f"{text} is beyond the range of a number")
    return number


def json_value(value: Any) -> Any:
    """A step's output as the JSON value every reader sees, in a fresh run and after a resume alike.

    Conversions (documented in the README): tuples -> lists; sets and frozensets -> lists
    sorted by their JSON text; ``datetime``/``date``/``time`` -> ISO 8601 text; enum
    members -> their value; mapping keys must be text. Anything else (bytes, objects,
    a list that contains itself, nesting deeper than 512) raises :class:`NotJSON`.
    """
    if type(value) in PLAIN:
        return value
    return _json(value, 0, set())


def _json(value: Any, depth: int, active: set[int]) -> Any:
    kind = type(value)
    if kind in PLAIN:
        return value
    if depth > MAX_VALUE_DEPTH:
        raise NotJSON(f"the value is nested deeper than {MAX_VALUE_DEPTH} levels")
    if isinstance(value, enum.Enum):
        return _json(value.value, depth + 1, active)
    for base in (str, int, float):  # subclasses become the plain type (bool is plain already)
        if isinstance(value, base):
            return base(value)
    if isinstance(value, (datetime.datetime, datetime.date, datetime.time)):
        return value.isoformat()
    if isinstance(value, (Mapping, list, tuple, set, frozenset)):
        if id(value) in active:
            raise NotJSON(f"the value contains itself (a {kind.__name__} inside itself)")
        active.add(id(value))
        try:
            return _container(value, depth, active)
        finally:
            active.discard(id(value))
    raise NotJSON(f"a {kind.__name__} is not a JSON value")


def _container(value: Any, depth: int, active: set[int]) -> Any:
    if isinstance(value, Mapping):
        out = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise NotJSON(f"an object key must be text, not {type(key).__name__} ({key!r})")
            out[str(key)] = _json(item, depth + 1, active)
        return out
    items = [_json(item, depth + 1, active) for item in value]
    if isinstance(value, (set, frozenset)):
        items.sort(key=lambda v: json.dumps(v, sort_keys=True))
    return items


def as_text(value: Any) -> str:
    """A step output as placeholder text: strings as they are, anything else as JSON."""
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return str(value)


def view_text(text: str, view: str, n: int | None) -> str:
    """``#E1`` trimmed, ``.summary`` first non-empty line, ``.head=N`` / ``.last=N`` with an ellipsis when cut."""
    text = text.strip()
    if view == "summary":
        return next((line.strip() for line in text.splitlines() if line.strip()), "")
    if view == "head" and n is not None and len(text) > n:
        return text[:n] + ELLIPSIS
    if view == "last" and n is not None and len(text) > n:
        return ELLIPSIS + text[len(text) - n :]
    return text


PLAIN = frozenset({str, int, float, bool, type(None)})  # JSON as it is (nothing to convert)


class Resolver:
    """Resolves IR values against ``inputs``, ``state`` and step outputs as text.

    ``placeholder_text(step_id)`` returns a step's output text, or raises Dead
    when that step was skipped.
    """

    def __init__(self, inputs: Mapping[str, Any], state: dict, placeholder_text: Callable[[str], str]):
        self.inputs = inputs
        self.state = state
        self.placeholder_text = placeholder_text
        # state paths that hold a failed step's "(FAILED: ...)" text: a reader of a path
        # below one of them receives that text instead of being skipped
        self.failed: dict[tuple, str] = {}

    def value(self, node: Any) -> Any:
        """The run-time value of an IR value (dispatch on the exact type first: this is the hot path)."""
        kind = type(node)
        if kind in PLAIN:
            return node
        if kind is MappingProxyType or kind is dict:
            return {
                k: v if type(v) in PLAIN else self.ref(v) if type(v) is Ref else self.value(v) for k, v in node.items()
            }
        if kind is Ref:
            return self.ref(node)
        if kind is Template:
            return "".join(self.text(p) for p in node.parts)
        if kind is AnyOf:
            return self.any_of(node)
        if kind is AllOf:
            return [self.ref(r) for r in node.refs][-1]
        if isinstance(node, Mapping):
            return {k: self.value(v) for k, v in node.items()}
        if isinstance(node, (tuple, list)):
            return [self.value(v) for v in node]
        return node

    def ref(self, ref: Ref) -> Any:
        root = self.inputs if ref.root == "input" else self.state
        if ref.root != "state" and root is self.state:  # †item / †index outside a for_each step
            raise BadReference(f"{ref} is only meaningful in a step with for_each")
        found = get_path(root, ref.path)
        if found is MISSING:
            if ref.root == "input":
                raise MissingInput(f"{ref} is not among the run's inputs")
            for end in range(len(ref.path) - 1, 0, -1):
                if ref.path[:end] in self.failed:
                    return self.failed[ref.path[:end]]
            raise Dead(ref)
        # a copy: a tool that mutates its argument must not change what other steps read
        return thaw(found) if isinstance(found, (dict, list)) else found

    def any_of(self, node: AnyOf) -> Any:
        for option in node.options[:-1]:
            try:
                return Resolver.ref(self, option)  # the first written (a lenient reader too: not its null)
            except (Dead, MissingInput):  # an input never given is as unwritten as a branch not taken
                continue
        if not node.has_default:
            return self.ref(node.options[-1])
        try:
            return Resolver.ref(self, node.options[-1])
        except (Dead, MissingInput):  # none was written, or given: the plan's literal default
            return thaw(node.default) if isinstance(node.default, (dict, list)) else node.default

    def text(self, part: Any) -> str:
        if isinstance(part, str):
            return part
        if isinstance(part, Placeholder):
            try:
                return view_text(self.placeholder_text(part.step), part.view, part.n)
            except Dead:  # the step was skipped: the plan's default, when it gives one
                if part.has_default:
                    return as_text(part.default)
                raise
        return as_text(self.any_of(part) if type(part) is AnyOf else self.ref(part))


def provenance(resolver: Resolver, template: Any, writer: Callable[[Any], str | None]) -> tuple[str, list[dict]]:
    """A template's text and where each part of it came from: per reference or placeholder, its span in the
    text (``start``, ``end``), its spelling (``source``: ``#E1.head=200``, ``†state.x || 'none'``), the step
    whose output it read (``step``; ``writer(ref)`` finds the step that wrote a state path) and whether the
    plan's default stood in (``default``). Each part is redacted on its own before the spans are counted,
    so a secret never reaches the record and the spans still fit the text kept."""
    from .redact import redact

    text: list[str] = []
    spans: list[dict] = []
    at = 0
    for part in getattr(template, "parts", (template,)):
        value = part if isinstance(part, str) else resolver.text(part)
        shown = redact(value)
        if not isinstance(part, str):
            span: dict[str, Any] = {"start": at, "end": at + len(shown), "source": str(part)}
            if isinstance(part, Placeholder):
                span["step"] = part.step
                span["default"] = part.has_default and _dead(resolver.placeholder_text, part.step)
            else:
                chosen = _chosen(resolver, part)
                span["default"] = chosen is None
                if chosen is not None:
                    span["read"] = str(chosen)
                    if chosen.root == "state":
                        span["step"] = writer(chosen)
                    elif chosen.root == "input":
                        span["input"] = chosen.path[0] if chosen.path else None
            spans.append({k: v for k, v in span.items() if v is not None})
        text.append(shown)
        at += len(shown)
    return "".join(text), spans


def _dead(read: Callable[[str], Any], step: str) -> bool:
    try:
        read(step)
    except Dead:
        return True
    return False


def _chosen(resolver: Resolver, part: Any) -> Ref | None:
    """The reference a part's value came from (the first written of ``a || b``), None for its default."""
    options = part.options if type(part) is AnyOf else (part,)
    for option in options:
        try:
            Resolver.ref(resolver, option)
        except (Dead, MissingInput, BadReference):
            continue
        return option
    return None


class Lenient(Resolver):
    """The resolver of a step whose trigger rule is not ``all_succeeded``: a value never written (a branch
    not taken, a step skipped) reads as null, a skipped step's ``#ID`` as empty text, and the step runs."""

    def __init__(self, strict: Resolver):
        super().__init__(strict.inputs, strict.state, strict.placeholder_text)
        self.failed = strict.failed

    def ref(self, ref: Ref) -> Any:
        try:
            return super().ref(ref)
        except Dead:
            return None

    def text(self, part: Any) -> str:
        try:
            return super().text(part)
        except Dead:
            return ""


def read_or_missing(resolver: Resolver, ref: Ref) -> Any:
    """A reference's value for a condition: MISSING where nothing was written (it reads as null)."""
    try:
        return resolver.ref(ref)
    except (Dead, BadReference):
        return MISSING
