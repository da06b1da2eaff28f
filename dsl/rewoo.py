"""ReWOO's plan text, the fifth dialect: ``#E1 = Tool[arguments]`` lines (Xu et al. 2023, "ReWOO: Decoupling
Reasoning from Observations"; the placeholders of seed 003)::

    Plan: Search for more information about Colorado orogeny.
    #E1 = Wikipedia[Colorado orogeny]
    Plan: Find out the elevation range of its eastern sector.
    #E2 = LLM[What is the elevation range of the area in #E1?]

Each ``#En = Tool[...]`` line is a step with id ``En`` writing ``†state.En``; the ``Plan:`` line before it is its
description; the last step's output is the plan's result. ``LLM[...]`` is a model step prompted with the text
between the brackets. The arguments are a JSON object (``Tool[{"query": "x", "limit": 3}]``), ``name=value``
pairs (``Tool[query="x", limit=3]``; a value is JSON where it reads as JSON, else the text), or one text
(``Tool[Colorado orogeny]``), which goes to the tool's one parameter once the catalog is known (:func:`bind`;
without a catalog it is held under ``input``). In ReWOO text only ``#En`` refers to anything: an argument that
is exactly ``#En`` passes that step's output with its JSON type, ``#En`` (``.summary``, ``.head=N``) inside text
is the placeholder, and every other ``†``, ``$state``, ``#tag`` stays text.

The text is read line by line (prose around the lines, a code fence, list bullets are left aside), in time
linear in its length, and every value keeps its line and column (:class:`Written`): a diagnostic on
``steps[1].args.query`` points into the brackets of ``#E2``.
"""

from __future__ import annotations

import json
import re
from bisect import bisect_right
from typing import Any, Mapping

from .errors import DEFAULT_LIMITS, Diagnostic, DocPath, Limits, LoadError, Span, error
from .ir import _NEEDS_ESCAPE, escape_text
from .record import replace
from .yaml_reader import _full_limits

# "#E1 = Tool[", at a line's start (after a list bullet or bold markers a model may add)
_CALL = re.compile(r"^[ \t]*(?:[-*+][ \t]+|\d+[.)][ \t]+)?(?:\*\*)?#(E\d+)(?:\*\*)?[ \t]*=[ \t]*([A-Za-z_][\w.-]*)"
                   r"[ \t]*\[", re.M)  # fmt: skip
_PLAN = re.compile(
    r"^[ \t]*(?:[-*+][ \t]+|\d+[.)][ \t]+)?(?:\*\*)?Plan(?:[ \t]*\d+)?(?:\*\*)?[ \t]*:(?:\*\*)?[ \t]*"
    r"(.*)",
    re.M | re.I,
)  # fmt: skip  (greedy to the line end, blanks stripped after: linear)
_PAIR = re.compile(r"\s*([A-Za-z_][\w-]*)\s*=(?!=)\s*")
_WHOLE_REF = re.compile(r"#(E\d+)")
_OWN_PLACEHOLDER = re.compile(r"\\(#E\d+)")
_BARE_REF = re.compile(r"#E\d+(?![\w.])")  # an output written as a JSON value, unquoted: [#E1, #E2]
_OWN = re.compile(r"#E\d")
MODEL = "llm"  # LLM[...] (any case): a model step
POSITIONAL = "input"  # one text argument, until the catalog says which parameter it is


def holds(text: str) -> bool:
    """Whether the text holds a ReWOO plan line (``#E1 = Tool[``)."""
    return "#E" in text and _CALL.search(text) is not None  # the substring first: prose costs a scan, not a regex


class Written:
    """Where each value of a ReWOO text is: recorded while it is read (the :class:`.source.Positions` of a
    document in this dialect)."""

    syntax = "rewoo"

    def __init__(self, text: str, name: str, limits: Limits = DEFAULT_LIMITS):
        self.text, self.name, self.limits = text, name, limits
        self.values: dict[DocPath, tuple[int, str]] = {}  # path -> (offset in text, the value's text as written)
        self.keys: dict[DocPath, int] = {}
        self._starts = [0] + [m.end() for m in re.finditer("\n", text)]

    def at(self, path: DocPath, offset: int, written: str = "", key: int | None = None) -> None:
        self.values[path] = (offset, written)
        if key is not None:
            self.keys[path] = key

    def locate(self, span: Span) -> Span:
        path, offset = span.path, span.offset
        if span.key and path in self.keys:
            return self._at(span, self.keys[path])
        while path not in self.values and path:
            path, offset = path[:-1], 0  # a missing key: the step (or argument list) that lacks it
        start, written = self.values.get(path, (0, ""))
        return self._at(span, start + _unescaped(written, offset))

    def key_position(self, path: DocPath) -> tuple[int, int] | None:
        where = self.keys.get(path)
        return self._line_col(where) if where is not None else None

    def _at(self, span: Span, position: int) -> Span:
        line, col = self._line_col(position)
        return replace(span, file=span.file if span.file != "<string>" else self.name, line=line, col=col)

    def _line_col(self, position: int) -> tuple[int, int]:
        line = bisect_right(self._starts, position)
        return line, position - self._starts[line - 1] + 1


def _unescaped(written: str, offset: int) -> int:
    """An offset in a value as read (escapes added) -> the offset in the text as written."""
    if not offset or not written:
        return offset
    added = 0
    for match in _NEEDS_ESCAPE.finditer(written):
        if match.start() + added >= offset:
            break
        if not _OWN.match(written, match.start()):  # an own placeholder is not escaped (matched in place)
            added += 1
    return max(0, offset - added)


def load(text: str, name: str = "<string>", limits: Limits = DEFAULT_LIMITS) -> tuple[dict, Written]:
    """ReWOO text -> (canonical data, where its values are). Raises :class:`LoadError` (``rewoo-syntax``, with
    the line and column) for a call whose brackets do not close, arguments that are not what they look like
    (``Tool[{...`` that is no JSON object), or more calls than ``limits.max_nodes``."""
    where = Written(text, name, limits)
    calls = list(_CALL.finditer(text))
    if len(calls) > limits.max_nodes:
        raise LoadError(_syntax(where, calls[limits.max_nodes].start(1) - 1,
                                f"{len(calls):,} calls is over the limit of {limits.max_nodes:,}",
                                "split the plan into sub-plans"))  # fmt: skip
    plans = iter(_PLAN.finditer(text))
    plan = next(plans, None)
    steps: list[dict] = []
    ends = [c.start() for c in calls[1:]] + [len(text)]
    for index, (call, end) in enumerate(zip(calls, ends)):
        described = None  # the last Plan: line between the call before and this one
        while plan is not None and plan.start() < call.start():
            described, plan = plan, next(plans, None)
        steps.append(_step(call, end, index, described, where, text))
    data: dict[str, Any] = {"steps": steps}
    if steps:
        data["result"] = steps[-1]["output"]
        where.at(("result",), calls[-1].start(1) - 1)
    failure = _full_limits(data, name, limits)  # depth, values and string length, as for JSON and YAML
    if failure is not None:
        raise failure
    return data, where


def _step(call: re.Match, end: int, index: int, plan: re.Match | None, where: Written, text: str) -> dict:
    sid, tool, opened = call.group(1), call.group(2), call.end()
    base: DocPath = ("steps", index)
    where.at(base, call.start(1) - 1)
    where.at(base + ("id",), call.start(1) - 1, key=call.start(1) - 1)
    closed = _closing(text, opened, end)
    if closed is None:
        raise LoadError(_syntax(where, opened - 1, f"the arguments of #{sid} = {tool}[ are not closed",
                                "close them with ] before the next #E line"))  # fmt: skip
    body = text[opened:closed]
    step: dict[str, Any] = {"id": sid}
    described = plan.group(1).rstrip(" \t\r") if plan is not None else ""
    if plan is not None and described:
        step["description"] = described
        where.at(base + ("description",), plan.start(1))
    if tool.lower() == MODEL:
        prompt = body.strip()
        step["llm"] = _text(prompt)
        where.at(base + ("llm",), opened + (len(body) - len(body.lstrip())), prompt)
    else:
        step["tool"] = tool
        where.at(base + ("tool",), call.start(2), key=call.start(2))
        step["args"] = _arguments(body, opened, base + ("args",), where, sid)
    step["output"] = f"$state.{sid}"
    where.at(base + ("output",), call.start(1) - 1)
    return step


def _closing(text: str, opened: int, end: int) -> int | None:
    """The ``]`` that closes the bracket before ``opened`` (nested brackets and JSON strings counted), looked
    for before ``end`` (the next call); the last ``]`` there when the count never comes back to zero."""
    depth, quoted, escaped = 1, False, False
    for at in range(opened, end):
        char = text[at]
        if quoted:
            escaped, quoted = (False, True) if escaped else (char == "\\", char != '"')
            continue
        if char == '"':
            quoted = True
        elif char == "[":
            depth += 1
        elif char == "]":
            depth -= 1
            if depth == 0:
                return at
    last = text.rfind("]", opened, end)
    return last if last >= 0 else None


def _arguments(body: str, start: int, path: DocPath, where: Written, sid: str) -> dict:
    lead = len(body) - len(body.lstrip())
    stripped = body.strip()
    where.at(path, start + lead)
    if not stripped:
        return {}
    if stripped.startswith("{"):
        quoted, added = _refs_quoted(body)
        if added:  # `#En` written as a value ([#E1, #E2]): read as the string "#En", then as that output
            body, stripped = quoted, quoted.strip()
        try:
            found = json.loads(stripped)
        except RecursionError:
            raise LoadError(_syntax(where, start + lead, f"the arguments of #{sid} are nested too deep",
                                    "a plan's values are shallow"))  # fmt: skip
        except ValueError as exc:
            column = _original(getattr(exc, "pos", 0) + lead, added) - lead
            raise LoadError(_syntax(where, start + lead + column, f"the arguments of #{sid} are not a JSON object "
                                    f"({getattr(exc, 'msg', exc)})", 'write {"name": value, ...}, or name=value, '
                                    "..."))  # fmt: skip
        if isinstance(found, dict):
            failure = _full_limits(found, where.name, where.limits)  # before it is walked again: no recursion
            if failure is not None:  # past the depth limit
                line, col = where._line_col(start + lead)
                raise failure.relocated(Span(where.name, line=line, col=col))
            out = {}
            keys = _key_offsets(body, lead)
            for key, value in found.items():
                at = _original(keys[key], added) if key in keys else -1
                out[str(key)] = _value(value)
                where.at(path + (str(key),), start + (at if at >= 0 else lead), key=start + at if at >= 0 else None)
            return out
    pairs = list(_pairs(body)) if _PAIR.match(body) else []
    if pairs:
        out = {}
        for key, named, at, written in pairs:
            literal = _literal(written)
            failure = _full_limits(literal, where.name, where.limits)  # depth first: _value walks it
            if failure is not None:
                line, col = where._line_col(start + at)
                raise failure.relocated(Span(where.name, line=line, col=col))
            out[key] = _value(literal)
            where.at(path + (key,), start + at, written, key=start + named)
        return out
    value = _value(_unquoted(stripped))
    where.at(path + (POSITIONAL,), start + lead, stripped)
    return {POSITIONAL: value}


def _pairs(body: str):
    """``name=value, name=value`` -> (name, its offset, the value's offset, the value's text), the commas inside quotes,
    brackets and braces kept; a piece with no ``name=`` belongs to the value before it (``city=Rome, Italy``)."""
    pieces, depth, quote, begin = [], 0, "", 0
    for at, char in enumerate(body):
        if quote:
            quote = "" if char == quote and body[at - 1] != "\\" else quote
        elif char in "\"'" and (at == 0 or not body[at - 1].isalnum()):
            quote = char
        elif char in "[{(":
            depth += 1
        elif char in "]})":
            depth = max(0, depth - 1)
        elif char == "," and depth == 0:
            pieces.append((begin, at))
            begin = at + 1
    pieces.append((begin, len(body)))
    found: list[list] = []
    for first, last in pieces:
        named = _PAIR.match(body, first, last)
        if named is not None:
            found.append([named.group(1), named.start(1), named.end(), body[named.end() : last]])
        elif found:
            found[-1][3] = body[found[-1][2] : last]
    for key, named, at, written in found:
        yield key, named, at, written.strip()


def _key_offsets(body: str, lead: int) -> dict[str, int]:
    """Where each key of the JSON object at ``body[lead]`` is written (the last of a repeated key, as JSON
    keeps its value), in one pass: each key read where it stands, each value skipped by the decoder (a key
    written with escapes is found too)."""
    decoder, found = json.JSONDecoder(), {}
    at = _blank(body, lead + 1)
    while at < len(body) and body[at] == '"':
        key, after = json.decoder.scanstring(body, at + 1)  # type: ignore[attr-defined]
        found[key] = at
        at = _blank(body, after)
        if at >= len(body) or body[at] != ":":
            break
        _, at = decoder.raw_decode(body, _blank(body, at + 1))
        at = _blank(body, at)
        if at >= len(body) or body[at] != ",":
            break
        at = _blank(body, at + 1)
    return found


def _blank(text: str, at: int) -> int:
    while at < len(text) and text[at] in " \t\r\n":
        at += 1
    return at


def _refs_quoted(text: str) -> tuple[str, list[int]]:
    """``text`` with each ``#En`` written outside a JSON string quoted (``[#E1, #E2]`` -> ``["#E1", "#E2"]``), and
    where each quote pair was added (its original offset: :func:`_original` maps positions back). One pass."""
    out, added, quote, at = [], [], False, 0
    while at < len(text):
        char = text[at]
        if quote:
            if char == "\\":
                out.append(text[at : at + 2])
                at += 2
                continue
            quote = char != '"'
        elif char == '"':
            quote = True
        elif char == "#":
            found = _BARE_REF.match(text, at)
            if found is not None:
                out.append(f'"{found.group(0)}"')
                added.append(at)
                at = found.end()
                continue
        out.append(char)
        at += 1
    return ("".join(out), added) if added else (text, [])


def _original(position: int, added: list[int]) -> int:
    """A position in the quoted text as the author wrote it (two characters were added at each of ``added``)."""
    for count, at in enumerate(added):
        if position < at + 2 * count + 1:
            return position - 2 * count
    return position - 2 * len(added)


def _literal(written: str) -> Any:
    """A pair's value: JSON where it reads as JSON (numbers, true, a quoted string, a list, one holding ``#En``
    unquoted), else its text."""
    quoted, added = _refs_quoted(written) if written[:1] in "[{" else (written, [])
    if added:
        try:
            return json.loads(quoted)
        except (ValueError, RecursionError):
            pass
    try:
        return json.loads(written)
    except RecursionError:
        return _unquoted(written)  # nested past what JSON reads: taken as text (the depth limit is for values)
    except ValueError:
        return _unquoted(written)


def _unquoted(text: str) -> str:
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'":
        return text[1:-1]
    return text


def _value(value: Any) -> Any:
    """A value as a dagplan template holds it: ``#En`` alone is the step's output (its JSON type kept); in
    text, ``#En`` is a placeholder and everything else is literal."""
    if isinstance(value, str):
        whole = _WHOLE_REF.fullmatch(value.strip())
        return f"$state.{whole.group(1)}" if whole else _text(value)
    if isinstance(value, list):
        return [_value(v) for v in value]
    if isinstance(value, dict):
        return {k: _value(v) for k, v in value.items()}
    return value


def _text(text: str) -> str:
    return _OWN_PLACEHOLDER.sub(r"\1", escape_text(text))  # the one escape rule, then #En given back


def _syntax(where: Written, at: int, message: str, hint: str) -> Diagnostic:
    line, col = where._line_col(at)
    return error("rewoo-syntax", message, Span(where.name, line=line, col=col), hint)


def bind(data: Mapping[str, Any], where: Any, tools: Mapping[str, Any]) -> tuple[Any, list[Diagnostic]]:
    """The one text argument of each ``Tool[text]`` given to the parameter it is for, now that the catalog is
    known: the tool's only parameter, or its only required one. A tool that takes several (or none) says so,
    at the text, with the ``name=value`` form to write. ``where``: the document's :class:`Written`."""
    if not isinstance(where, Written):
        return data, []
    steps = data.get("steps") if isinstance(data, Mapping) else None
    if not isinstance(steps, list) or not tools:
        return data, []
    problems: list[Diagnostic] = []
    out = []
    for index, step in enumerate(steps):
        args = step.get("args") if isinstance(step, dict) else None
        spec = tools.get(step.get("tool")) if isinstance(args, dict) and POSITIONAL in args else None
        if spec is None or not isinstance(args, dict):
            out.append(step)
            continue
        parameters = dict((spec.parameters or {}).get("properties") or {})
        if POSITIONAL in parameters:
            out.append(step)
            continue
        required = [p for p in (spec.parameters or {}).get("required") or () if p in parameters]
        target = next(iter(parameters)) if len(parameters) == 1 else required[0] if len(required) == 1 else None
        path: DocPath = ("steps", index, "args", POSITIONAL)
        if target is None:
            names = ", ".join(parameters) or "no arguments"
            problems.append(error("bad-argument", f"{step['tool']} takes {names}: one text does not say which",
                                  where.locate(Span(where.name, path)),
                                  f"write {step['tool']}[name=value, ...]" if parameters else
                                  f"write {step['tool']}[]"))  # fmt: skip
            out.append(step)
            continue
        where.values[("steps", index, "args", target)] = where.values.get(path, (0, ""))
        out.append({**step, "args": {target if k == POSITIONAL else k: v for k, v in args.items()}})
    return {**data, "steps": out}, problems
