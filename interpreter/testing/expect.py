"""Matching an expected value against an actual one: what plan tests assert and mocks match on.

An expected value is compared for equality (JSON semantics: ``1 == 1.0``, ``true != 1``),
except where it is a *matcher*, a mapping with one key starting with ``$``:

=====================  ============================================================
``{$subset: V}``       a mapping with at least V's keys (recursively); a list holding
                       V's items, in that order, among its own
``{$regex: "re"}``     a string the expression is found in (Python's syntax, matched by RE2 in
                       linear time: no backreferences or lookarounds)
``{$type: name}``      ``string``, ``number``, ``integer``, ``boolean``, ``null``,
                       ``object``, ``array``
``{$contains: V}``     a string holding V, a list holding an item matching V
``{$len: N}``          a string, list or mapping of length N (a whole number)
``{$any: true}``       anything (the key must be there)
``{$not: V}``          anything V does not match
=====================  ============================================================

Matchers nest: ``{$subset: {items: [{$regex: "^a"}]}}``. :func:`mismatches` returns
every difference with its path (``result.items[2].name``), empty when it matches.
:func:`argument_problem` says what is wrong with a matcher's argument (``check`` reports it at its line).
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any, Callable

from ...dsl.errors import did_you_mean

_TYPES: dict[str, Callable[[Any], bool]] = {
    "string": lambda v: isinstance(v, str),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
}
MATCHERS = ("$subset", "$regex", "$type", "$contains", "$len", "$any", "$not")


def argument_problem(name: str, arg: Any) -> tuple[str, str | None] | None:
    """What is wrong with the argument of matcher ``name`` (message, hint), or None."""
    if name == "$regex":
        if not isinstance(arg, str):
            return f"$regex takes a string, not {_show(arg)}", None
        try:
            re.compile(arg)
        except (re.error, OverflowError, RecursionError) as exc:
            return f"invalid regular expression {_show(arg)}: {exc}", None
        try:
            _linear(arg)
        except Exception as exc:  # re2.error: backreferences, lookarounds, huge repetitions
            reason = exc.args[0].decode() if exc.args and isinstance(exc.args[0], bytes) else str(exc)
            hint = "write it without backreferences and lookarounds (RE2 syntax), or match with $contains"
            return f"$regex {_show(arg)} cannot be matched in linear time: {reason}", hint
    elif name == "$type" and arg not in _TYPES:
        return f"unknown $type {_show(arg)}", did_you_mean(str(arg), _TYPES, f"types: {', '.join(_TYPES)}")
    elif name == "$len" and (not isinstance(arg, int) or isinstance(arg, bool) or arg < 0):
        return f"$len takes a whole number, not {_show(arg)}", "e.g. {$len: 3}"
    elif name == "$any" and arg is not True:
        return f"$any takes true, not {_show(arg)}", "{$any: true} matches any value (the key must be there)"
    return None


@lru_cache(maxsize=256)
def _linear(pattern: str) -> Any:
    """``pattern`` compiled by RE2 (linear-time matching: no catastrophic backtracking)."""
    import re2

    options = re2.Options()
    options.log_errors = False
    return re2.compile(pattern, options=options)


def is_matcher(value: Any) -> bool:
    return isinstance(value, dict) and len(value) == 1 and next(iter(value)) in MATCHERS


def matches(expected: Any, actual: Any, *, subset: bool = False) -> bool:
    return not mismatches(expected, actual, subset=subset)


def mismatches(expected: Any, actual: Any, where: str = "", *, subset: bool = False) -> list[str]:
    """Every way ``actual`` differs from ``expected`` (``subset``: mappings compare as ``$subset``)."""
    out: list[str] = []
    _compare(expected, actual, where or "value", subset, out)
    return out


def _compare(expected: Any, actual: Any, where: str, subset: bool, out: list[str]) -> None:
    if is_matcher(expected):
        ((name, arg),) = expected.items()
        _MATCH[name](arg, actual, where, subset, out)
    elif isinstance(expected, dict):
        if not isinstance(actual, dict):
            out.append(f"{where}: expected an object, got {_show(actual)}")
            return
        for key, value in expected.items():
            if key not in actual:
                out.append(f"{where}.{key}: missing (expected {_show(value)})")
            else:
                _compare(value, actual[key], f"{where}.{key}", subset, out)
        if not subset:
            extra = [k for k in actual if k not in expected]
            if extra:
                out.append(f"{where}: unexpected key{'s' if len(extra) > 1 else ''} {', '.join(map(str, extra))}")
    elif isinstance(expected, list):
        if not isinstance(actual, list):
            out.append(f"{where}: expected a list, got {_show(actual)}")
            return
        if len(actual) != len(expected):
            out.append(f"{where}: expected {len(expected)} items, got {len(actual)}")
            return
        for i, (e, a) in enumerate(zip(expected, actual)):
            _compare(e, a, f"{where}[{i}]", subset, out)
    elif not _equal(expected, actual):
        out.append(f"{where}: expected {_show(expected)}, got {_show(actual)}")


def _equal(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    return bool(a == b)


def _subset(arg: Any, actual: Any, where: str, subset: bool, out: list[str]) -> None:
    if isinstance(arg, list):
        if not isinstance(actual, list):
            out.append(f"{where}: expected a list, got {_show(actual)}")
            return
        rest = iter(actual)  # each expected item, in order, among the actual ones
        for i, e in enumerate(arg):
            if not any(matches(e, a, subset=True) for a in rest):
                out.append(f"{where}: no item matching {_show(e)} (expected item {i}, in order)")
                return
        return
    _compare(arg, actual, where, True, out)


def _regex(arg: Any, actual: Any, where: str, subset: bool, out: list[str]) -> None:
    problem = argument_problem("$regex", arg)
    if problem is not None:
        out.append(f"{where}: {problem[0]}")
    elif not isinstance(actual, str):
        out.append(f"{where}: expected a string matching /{arg}/, got {_show(actual)}")
    elif _linear(arg).search(actual) is None:
        out.append(f"{where}: {_show(actual)} does not match /{arg}/")


def _type(arg: Any, actual: Any, where: str, subset: bool, out: list[str]) -> None:
    check = _TYPES.get(arg) if isinstance(arg, str) else None
    if check is None:
        out.append(f"{where}: unknown $type {arg!r} (known: {', '.join(_TYPES)})")
    elif not check(actual):
        out.append(f"{where}: expected a value of type {arg}, got {_show(actual)}")


def _contains(arg: Any, actual: Any, where: str, subset: bool, out: list[str]) -> None:
    if isinstance(actual, str) and isinstance(arg, str):
        if arg not in actual:
            out.append(f"{where}: {_show(actual)} does not contain {_show(arg)}")
    elif isinstance(actual, list):
        if not any(matches(arg, item, subset=subset) for item in actual):
            out.append(f"{where}: no item matches {_show(arg)}")
    else:
        out.append(f"{where}: expected a list or a string containing {_show(arg)}, got {_show(actual)}")


def _len(arg: Any, actual: Any, where: str, subset: bool, out: list[str]) -> None:
    problem = argument_problem("$len", arg)
    if problem is not None:
        out.append(f"{where}: {problem[0]}")
    elif not isinstance(actual, (str, list, dict)):
        out.append(f"{where}: expected a value of length {arg}, got {_show(actual)}")
    elif len(actual) != arg:
        out.append(f"{where}: expected length {arg}, got {len(actual)}")


def _any(arg: Any, actual: Any, where: str, subset: bool, out: list[str]) -> None:
    if arg is not True:
        out.append(f"{where}: $any takes true, not {_show(arg)}")


def _not(arg: Any, actual: Any, where: str, subset: bool, out: list[str]) -> None:
    if matches(arg, actual, subset=subset):
        out.append(f"{where}: expected anything but {_show(arg)}, got {_show(actual)}")


_MATCH = {
    "$subset": _subset,
    "$regex": _regex,
    "$type": _type,
    "$contains": _contains,
    "$len": _len,
    "$any": _any,
    "$not": _not,
}


def _show(value: Any, limit: int = 120) -> str:
    import json

    try:
        text = json.dumps(value, ensure_ascii=False, default=str)
    except ValueError:
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def show(value: Any, limit: int = 120) -> str:
    """A value as JSON, cut to ``limit`` characters (how failures show values)."""
    return _show(value, limit)
