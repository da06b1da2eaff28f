"""YAML text -> plain data, from libyaml's event stream, with the limits checked as it goes.

PyYAML's C parser (libyaml) gives the events when it is installed, else ruamel.yaml's; a
small builder turns them into dicts, lists and scalars without recursion. Scalars follow
the YAML 1.2 core schema (``yes``/``no`` stay strings, timestamps stay strings); tags other
than the core ones are refused; a key repeated in a mapping is a ``duplicate-key`` error;
aliases count their whole value towards ``Limits.max_nodes`` (so alias bombs stop early).
Given an index (:class:`Index`), the builder also records where every value and
key starts: that is how :class:`.source.SourceMap` locates YAML diagnostics.
"""

from __future__ import annotations

import sys

import json
import re
from typing import Any, Callable, Iterator

from .errors import DocPath, Limits, LoadError, Span
from .record import field, record


@record
class Index:
    """Where each value and key of a document starts in its text: filled by the YAML builder here, or by
    :func:`.source._json_positions` for JSON, and read by :class:`.source.SourceMap`."""

    values: dict[DocPath, tuple[int, str]] = field(default_factory=dict)  # value start, scalar style
    keys: dict[DocPath, int] = field(default_factory=dict)


def _too_deep(name: str, limits: Limits, mark: Any) -> LoadError:
    return LoadError.make(
        "too-deep",
        f"the document nests deeper than {limits.max_depth} levels",
        _span_at(name, mark),
        "a plan needs only a few levels; raise Limits.max_depth if this one really does",
    )


def _too_many(name: str, limits: Limits, mark: Any) -> LoadError:
    return LoadError.make(
        "too-many-nodes",
        f"the document expands to more than {limits.max_nodes:,} values (YAML aliases count once per use)",
        _span_at(name, mark),
        "an alias repeated inside aliases multiplies (a 'billion laughs' document); write the values out",
    )


def _too_long_string(name: str, limits: Limits, size: int, mark: Any) -> LoadError:
    return LoadError.make(
        "too-large",
        f"a string of {size:,} characters is over the limit of {limits.max_string:,}",
        _span_at(name, mark),
        "keep large data out of the plan; pass it as an input",
    )


def _span_at(name: str, mark: Any) -> Span:
    return Span(name, line=mark.line + 1, col=mark.column + 1) if mark is not None else Span(name)


def _events(text: str) -> Iterator[Any]:
    """Parser events from libyaml (PyYAML's C parser, the fastest), else ruamel.yaml."""
    try:
        from yaml import _yaml  # type: ignore[attr-defined]
    except ImportError:
        from ruamel.yaml import YAML

        return iter(YAML(typ="safe").parse(text))
    # get_event() returns None once the stream has ended: a C-level loop, no generator.
    return iter(_yaml.CParser(text).get_event, None)


def _read_yaml(text: str, name: str, limits: Limits, index: "Index | None" = None) -> Any:
    try:
        return _YamlBuilder(name, limits, index).run(_events(text))
    except LoadError:
        raise
    except RecursionError:
        raise _too_deep(name, limits, None) from None
    except Exception as exc:  # every parser error of either library
        deep = _flow_too_deep(text, limits.max_depth)
        if deep is not None:  # our limit, whatever limit (or error) the installed parser has
            raise _too_deep(name, limits, deep) from None
        raise _yaml_syntax(exc, name) from None


_FLOW_TOKEN = re.compile(r"""[\[\]{}]|(?:(?<=[\s\[{,:])|^)(?:"(?:[^"\\]|\\.)*"?|'(?:[^']|'')*'?|\#[^\n]*)""", re.M)


class _Mark:
    def __init__(self, line: int, column: int):
        self.line, self.column = line, column


def _flow_too_deep(text: str, max_depth: int) -> "_Mark | None":
    """Where flow collections (``[``, ``{``) of ``text`` nest deeper than ``max_depth``, skipping quoted
    scalars and comments; None when they do not. Asked when a parser refused the text, so that a document
    too deep for us is ``too-deep`` whatever the installed parser's own nesting limit says."""
    if text.count("[") + text.count("{") <= max_depth:
        return None
    depth = 0
    for token in _FLOW_TOKEN.finditer(text):
        char = token.group()[0]
        if char in "[{":
            depth += 1
            if depth > max_depth:
                start = token.start()
                line = text.count("\n", 0, start)
                return _Mark(line, start - (text.rfind("\n", 0, start) + 1))
        elif char in "]}":
            depth = max(depth - 1, 0)
    return None


_YAML_HINTS = (
    ("mapping values are not allowed", "quote a string that contains ': ' (or write it as a block scalar with |)"),
    ("cannot start any token", "quote a string that starts with @, ` or another reserved character"),
    ("'\\t'", "indent with spaces; YAML does not allow tabs there"),
    ("expected ':'", "a key needs ': ' after it; check the indentation of this line"),
    ("expected key", "check the indentation: items of one mapping line up, and `- ` starts a list item"),
    ("did not find expected", "check the indentation and that brackets and quotes are closed"),
)


def _yaml_syntax(exc: Exception, name: str) -> LoadError:
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    context = getattr(exc, "context", None)
    message = f"{problem} ({context})" if context else str(problem)
    hint = next(
        (h for key, h in _YAML_HINTS if key in message),
        "check the indentation and quote strings with special characters",
    )
    return LoadError.make("yaml-syntax", message, _span_at(name, mark), hint)


_CORE = "tag:yaml.org,2002:"
_INT = re.compile(r"[-+]?[0-9]+$")
_FLOAT = re.compile(r"[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?$")
_SPECIAL = {"~": None, "null": None, "Null": None, "NULL": None, "": None,
            "true": True, "True": True, "TRUE": True, "false": False, "False": False, "FALSE": False,
            ".inf": float("inf"), ".Inf": float("inf"), ".INF": float("inf"),
            "+.inf": float("inf"), "-.inf": float("-inf"), "-.Inf": float("-inf"), "-.INF": float("-inf"),
            ".nan": float("nan"), ".NaN": float("nan"), ".NAN": float("nan")}  # fmt: skip
_NUMERIC_START = frozenset("0123456789+-.")


def _short(tag: str) -> str:
    return "!!" + tag[len(_CORE) :] if tag.startswith(_CORE) else tag


def _collection_tag(name: str, event: Any) -> None:
    """A tag on a mapping or a list: only ``!!map`` / ``!!seq`` on the matching kind (they change nothing)."""
    mapping = type(event).__name__ == "MappingStartEvent"
    if event.tag in (_CORE + ("map" if mapping else "seq"), "!"):
        return
    raise LoadError.make(
        "yaml-syntax",
        f"unsupported tag {_short(event.tag)} on a {'mapping' if mapping else 'list'}",
        _span_at(name, event.start_mark),
        "plans are plain JSON-like data: drop the tag",
    )


def _plain(value: str, name: str, event: Any) -> Any:
    """:func:`_plain_scalar`, with an integer past Python's digit limit as a positioned diagnostic."""
    try:
        return _plain_scalar(value)
    except ValueError:
        raise too_many_digits(name, len(value), _span_at(name, event.start_mark)) from None


def too_many_digits(name: str, digits: int, span: Span) -> LoadError:
    """A number longer than Python converts (``sys.get_int_max_str_digits()``): the one rule and message."""
    return LoadError.make(
        "too-large",
        f"a number with {digits:,} digits is longer than the {sys.get_int_max_str_digits():,} digits that can be read",
        span,
        "quote it if it is an identifier, not a quantity",
    )


def _plain_scalar(value: str) -> Any:
    """YAML 1.2 core schema for an untagged plain scalar."""
    if value in _SPECIAL:
        return _SPECIAL[value]
    if value[0] not in _NUMERIC_START:
        return value
    if _INT.match(value):
        return int(value)
    if _FLOAT.match(value):
        return float(value)
    if value.startswith(("0x", "0o")) and len(value) > 2:
        try:
            return int(value, 16 if value[1] == "x" else 8)
        except ValueError:
            return value
    return value


def _ignore(event: Any) -> None:
    pass


_TAG_TYPES: dict[str, type | tuple[type, ...]] = {"int": int, "float": (int, float), "bool": bool, "null": type(None)}


class _Frame:
    __slots__ = ("container", "is_map", "key", "key_mark", "anchor", "first_node", "height", "path_key")

    def __init__(self, container: Any, anchor: str | None, path_key: Any, first_node: int):
        self.container = container
        self.is_map = isinstance(container, dict)
        self.key: Any = _NO_KEY
        self.key_mark: Any = None
        self.anchor = anchor
        self.first_node = first_node  # the node count when it started (its size is the difference at its end)
        self.height = 1
        self.path_key = path_key


_SCALAR, _START, _END, _OTHER = range(4)
_EVENT_CODES = {
    "ScalarEvent": _SCALAR,
    "MappingStartEvent": _START,
    "SequenceStartEvent": _START,
    "MappingEndEvent": _END,
    "SequenceEndEvent": _END,
}


_NO_KEY: Any = object()


class _YamlBuilder:
    """Events -> plain data, without recursion; checks limits as it goes and, when given
    an index, records where every value starts."""

    def __init__(self, name: str, limits: Limits, index: "Index | None"):
        self.name, self.limits, self.index = name, limits, index
        self.stack: list[_Frame] = []
        self.anchors: dict[str, tuple[Any, int, int]] = {}
        self.nodes = 0
        self.documents = 0
        self.root: Any = None

    def run(self, events: Iterator[Any]) -> Any:
        handlers: dict[str, Callable[[Any], None]] = {
            "ScalarEvent": self.scalar,
            "AliasEvent": self.alias,
            "MappingStartEvent": self.start,
            "SequenceStartEvent": self.start,
            "MappingEndEvent": self.end,
            "SequenceEndEvent": self.end,
            "DocumentStartEvent": self.document,
        }
        if self.index is None:
            self.run_plain(events, handlers)
        else:
            for event in events:
                handlers.get(event.__class__.__name__, _ignore)(event)
        if self.nodes > self.limits.max_nodes:
            raise _too_many(self.name, self.limits, None)
        return self.root

    def run_plain(self, events: Iterator[Any], handlers: dict[str, Callable[[Any], None]]) -> None:
        """``run`` without positions: the commonest events (untagged, unanchored scalars inside a
        collection, collections starting and ending) handled inline, everything else by its
        handler. This loop was two thirds of YAML load time; it must do what the handlers do."""
        codes: dict[type, int] = {}
        stack, max_string, max_depth = self.stack, self.limits.max_string, self.limits.max_depth
        max_nodes = self.limits.max_nodes
        top: _Frame | None = None  # stack[-1]
        nodes = self.nodes
        for event in events:
            cls = event.__class__
            code = codes.get(cls)
            if code is None:
                code = codes[cls] = _EVENT_CODES.get(cls.__name__, _OTHER)
            if code == _SCALAR and top is not None and not event.anchor and not event.tag:
                value = event.value
                if len(value) > max_string:
                    raise _too_long_string(self.name, self.limits, len(value), event.start_mark)
                if event.implicit[0] and not event.style:
                    value = _plain(value, self.name, event)
                nodes += 1
                if not top.is_map:
                    top.container.append(value)
                elif top.key is not _NO_KEY:
                    top.container[top.key] = value
                    top.key = _NO_KEY
                elif type(value) is str and value not in top.container:
                    top.key = value
                    top.key_mark = event.start_mark
                else:
                    top.key = self.key_of(value, event)
                    top.key_mark = event.start_mark
                continue
            if code == _START and top is not None and not event.anchor and len(stack) < max_depth:
                if event.tag:
                    _collection_tag(self.name, event)
                top = _Frame({} if cls.__name__ == "MappingStartEvent" else [], None, None, nodes)
                stack.append(top)
                continue
            if code == _END and len(stack) > 1 and top is not None and not top.anchor:
                frame = stack.pop()
                nodes += 1
                if nodes > max_nodes:
                    raise _too_many(self.name, self.limits, event.start_mark)
                top = stack[-1]
                if top.height <= frame.height:
                    top.height = frame.height + 1
                if not top.is_map:
                    top.container.append(frame.container)
                    continue
                if top.key is _NO_KEY:
                    self.key_of(frame.container, event)  # raises: a collection as a key
                top.container[top.key] = frame.container
                top.key = _NO_KEY
                continue
            self.nodes = nodes
            handlers.get(cls.__name__, _ignore)(event)
            nodes = self.nodes
            top = stack[-1] if stack else None
        self.nodes = nodes

    def document(self, event: Any) -> None:
        self.documents += 1
        if self.documents > 1:
            raise LoadError.make(
                "yaml-syntax",
                "more than one YAML document (a second `---`)",
                _span_at(self.name, event.start_mark),
                "a plan file holds one document",
            )

    def scalar(self, event: Any) -> None:
        value = event.value
        if len(value) > self.limits.max_string:
            raise _too_long_string(self.name, self.limits, len(value), event.start_mark)
        tag = event.tag
        if tag and tag != "!":
            value = self.tagged(tag, value, event)
        elif event.implicit[0] and not event.style:
            value = _plain(value, self.name, event)
        self.record(event, event.style or "")
        self.add(value, 1, 0, event)

    def tagged(self, tag: str, value: str, event: Any) -> Any:
        kind = tag[len(_CORE) :] if tag.startswith(_CORE) else tag
        if kind == "str":
            return value
        if kind in ("int", "float", "bool", "null"):
            resolved = _plain_scalar(value)
            wanted = _TAG_TYPES[kind]
            if isinstance(resolved, wanted) and not (kind == "int" and isinstance(resolved, bool)):
                return float(resolved) if kind == "float" else resolved  # type: ignore[arg-type]
        raise LoadError.make(
            "yaml-syntax",
            f"unsupported tag {_short(tag)} on {value!r}",
            _span_at(self.name, event.start_mark),
            "plans are plain JSON-like data: drop the tag, or use !!str / !!int / !!float / !!bool / !!null",
        )

    def alias(self, event: Any) -> None:
        if event.anchor not in self.anchors:
            raise LoadError.make("yaml-syntax", f"unknown alias *{event.anchor}", _span_at(self.name, event.start_mark))
        value, size, height = self.anchors[event.anchor]
        if len(self.stack) + height > self.limits.max_depth:
            raise _too_deep(self.name, self.limits, event.start_mark)
        self.record(event, "")
        self.add(value, size, height, event)

    def start(self, event: Any) -> None:
        if event.tag:
            _collection_tag(self.name, event)
        if len(self.stack) >= self.limits.max_depth:
            raise _too_deep(self.name, self.limits, event.start_mark)
        self.record(event, "")
        container: Any = {} if type(event).__name__ == "MappingStartEvent" else []
        self.stack.append(_Frame(container, event.anchor, self.child_key(), self.nodes))

    def end(self, event: Any) -> None:
        frame = self.stack.pop()
        size = self.nodes - frame.first_node + 1  # its items were counted as they came, aliases by their size
        self.add(frame.container, size, frame.height, event, frame.anchor, collection=True)

    def add(
        self, value: Any, size: int, height: int, event: Any, anchor: str | None = None, collection: bool = False
    ) -> None:
        self.nodes += 1 if collection else size  # a collection's items were counted as they came
        if self.nodes > self.limits.max_nodes:
            raise _too_many(self.name, self.limits, event.start_mark)
        anchor = (
            anchor if collection else getattr(event, "anchor", None) if type(event).__name__ == "ScalarEvent" else None
        )
        if anchor:
            self.anchors[anchor] = (value, size, height)
        if not self.stack:
            self.root = value
            return
        parent = self.stack[-1]
        parent.height = max(parent.height, height + 1)
        if not parent.is_map:
            parent.container.append(value)
        elif parent.key is _NO_KEY:
            parent.key = self.key_of(value, event)
            parent.key_mark = event.start_mark
        else:
            parent.container[parent.key] = value
            parent.key = _NO_KEY

    def key_of(self, value: Any, event: Any) -> str:
        if isinstance(value, (dict, list)):
            raise LoadError.make(
                "yaml-syntax",
                "a mapping key must be a scalar",
                _span_at(self.name, event.start_mark),
                "keys are names; write a string",
            )
        key = value if isinstance(value, str) else json.dumps(value)
        if key in self.stack[-1].container:
            raise LoadError.make(
                "duplicate-key",
                f"duplicate key {key!r}: the mapping already has it",
                _span_at(self.name, event.start_mark),
                "each key appears once in a mapping; merge the two or rename one",
            )
        return key

    # positions (only when building the index)

    def child_key(self) -> Any:
        if not self.stack:
            return _NO_KEY
        parent = self.stack[-1]
        return parent.key if parent.is_map else len(parent.container)

    def current_path(self) -> DocPath:
        return tuple(f.path_key for f in self.stack[1:])

    def record(self, event: Any, style: str) -> None:
        if self.index is None:
            return
        if not self.stack:
            self.index.values[()] = (event.start_mark.index, style)
            return
        parent = self.stack[-1]
        if parent.is_map and parent.key is _NO_KEY:
            return  # a key: recorded with its value
        path = self.current_path()
        key = parent.key if parent.is_map else len(parent.container)
        if parent.is_map:
            self.index.keys[path + (key,)] = parent.key_mark.index
        self.index.values[path + (key,)] = (event.start_mark.index, style)


def _full_limits(data: Any, name: str, limits: Limits) -> LoadError | None:
    """Walk parsed JSON once, without recursion: depth, node count, string length."""
    stack: list[tuple[Any, int]] = [(data, 1)]
    nodes = 0
    while stack:
        value, depth = stack.pop()
        nodes += 1
        if isinstance(value, dict):
            children: Any = value.values()
        elif isinstance(value, list):
            children = value
        else:
            if isinstance(value, str) and len(value) > limits.max_string:
                return _too_long_string(name, limits, len(value), None)
            continue
        if depth > limits.max_depth:
            return _too_deep(name, limits, None)
        stack.extend((child, depth + 1) for child in children)
    if nodes > limits.max_nodes:
        return _too_many(name, limits, None)
    return None
