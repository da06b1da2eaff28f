"""Any dialect -> canonical YAML text (``dagplan fmt``).

* Canonical YAML input goes through ruamel's round-trip loader, so comments and the
  flow/block style of each collection stay; other inputs (JSON, the dialects) are
  written from the canonical data.
* Keys come in a fixed order (:data:`TOP_ORDER`, :data:`STEP_ORDER`; others after, in
  their order); ``dagplan: 1`` leads.
* References are written with the dagger: ``$state.x`` -> ``†state.x``, in the places
  that hold expressions (step ``args`` values, ``output``, ``llm``, ``system``, and
  ``result``), using the grammar (``classify``) so escapes and text are kept exactly.
  A string with a syntax error is left as it is (``check`` reports it).

``format_document(load_text(format_document(doc)))`` is ``format_document(doc)``.
"""

from __future__ import annotations

import io
import json
import re
from typing import Any

from .errors import DagplanError
from .expr import SPECIAL, classify, parse_output

TOP_ORDER = (
    "dagplan",
    "summary",
    "mode",
    "inputs",
    "state",
    "initial_state",
    "on_failure",
    "timeout",
    "max_cost",
    "max_tokens",
    "steps",
    "result",
)
STEP_ORDER = (
    "id",
    "description",
    "when",
    "for_each",
    "as",
    "max_items",
    "max_concurrency",
    "tool",
    "llm",
    "plan",
    "loop",
    "gate",
    "args",
    "deps",
    "output",
    "retry",
    "catch",
)
_TEMPLATE_KEYS = ("llm", "system")


def format_document(doc: Any, refs: bool = False, tools: Any = None, *, bound: bool = False) -> str:
    """Canonical YAML text of a loaded :class:`~.load.Document`, checked before it is returned: the
    text loads back to the same values, and formatting it again changes nothing. What YAML cannot
    carry faithfully is a ``cannot-format`` error, never a silent change.

    References keep the author's spelling (``$state`` stays ``$state``) unless ``refs`` asks for
    ``†``; a document of another dialect always gets ``†``: the conversion made its references.
    ``tools`` (their specs): a ReWOO text's ``Tool[text]`` gives its text to the parameter they name, as
    ``check`` and ``run`` read it; without them such a text is refused (it would be written to a parameter
    the tool may not have); ``bound``: they were given already (the document of a check's result)."""
    refs = refs or doc.dialect != "canonical"
    from . import bind_document
    from .load import load_text

    if doc.dialect == "rewoo" and not bound:
        doc, unsaid = bind_document(doc, tools)
        if unsaid:
            raise _cannot(doc.name, unsaid[0].message)
        if not tools and _unbound(doc.data):
            raise _cannot(doc.name, f"{_unbound(doc.data)}[text] gives its text to a parameter only its tool says "
                          "(give --tools, or name the tools in dagplan.toml)")  # fmt: skip

    text = _format(doc, refs)
    expected = _canonical(json.loads(json.dumps(doc.data)), refs)  # fmt's own rewrites, on plain data
    try:
        again = load_text(text, doc.name)
    except DagplanError as exc:
        raise _cannot(doc.name, f"its output would not load ({exc.headline.message})") from None
    where = _first_difference(expected, again.data)
    if where is not None:
        raise _cannot(doc.name, f"the value at {where} would change")
    if _format(again, refs) != text:
        raise _cannot(doc.name, "formatting its output again would change it")
    return text


def _format(doc: Any, refs: bool) -> str:
    source = doc.source_map
    if doc.dialect == "canonical" and source.syntax == "yaml":
        data = _round_trip(source.parse_text)
    else:
        data = _plain_to_commented(doc.data)
    return _dump(_quoted(_canonical(data, refs)))


def _unbound(data: Any) -> str | None:
    """The tool of the first ReWOO step whose one text argument is not yet given to a parameter."""
    from .rewoo import POSITIONAL

    for step in data.get("steps") or () if isinstance(data, dict) else ():
        if isinstance(step, dict) and isinstance(step.get("args"), dict) and POSITIONAL in step["args"]:
            return str(step.get("tool"))
    return None


def _cannot(name: str, why: str) -> DagplanError:
    from .errors import LoadError, Span

    return LoadError.make(
        "cannot-format",
        f"fmt leaves {name} as it is: {why}",
        Span(name),
        "the file is valid as written; fmt refuses rather than change a value",
    )


def _first_difference(a: Any, b: Any, path: str = "") -> str | None:
    """Where two JSON values differ (types included: 1 is not 1.0 is not true), or None."""
    if isinstance(a, dict) and isinstance(b, dict):
        for key in a.keys() | b.keys():
            if key not in a or key not in b:
                return f"{path}.{key}" if path else str(key)
            found = _first_difference(a[key], b[key], f"{path}.{key}" if path else str(key))
            if found is not None:
                return found
        return None
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return path or "the top"
        for i, (x, y) in enumerate(zip(a, b)):
            found = _first_difference(x, y, f"{path}[{i}]")
            if found is not None:
                return found
        return None
    return None if type(a) is type(b) and a == b else (path or "the top")


# characters YAML would fold, drop or refuse outside a double-quoted scalar (it escapes them there)
_NEEDS_QUOTES = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\ufeff\ud800-\udfff]|^[ \t]|\r")


def _quoted(node: Any) -> Any:
    """Strings that only a double-quoted scalar carries faithfully become double-quoted."""
    from ruamel.yaml.scalarstring import DoubleQuotedScalarString

    def fix(value: Any) -> Any:
        if isinstance(value, str) and _NEEDS_QUOTES.search(value):
            return DoubleQuotedScalarString(str(value))
        return _quoted(value) if isinstance(value, (dict, list)) else value

    if isinstance(node, dict):  # keys stay as they are: one YAML cannot carry is caught by the check
        for key in list(node):
            node[key] = fix(node[key])
    elif isinstance(node, list):
        for i, value in enumerate(node):
            node[i] = fix(value)
    return node


def _yaml() -> Any:
    from ruamel.yaml import YAML

    yaml = YAML(typ="rt")
    yaml.indent(mapping=2, sequence=4, offset=2)
    yaml.width = 4096  # never fold a long string: its text and its columns stay as written
    yaml.allow_unicode = True
    yaml.preserve_quotes = True
    return yaml


def _round_trip(text: str) -> Any:
    return _yaml().load(text)


def _dump(data: Any) -> str:
    out = io.StringIO()
    _yaml().dump(data, out)
    return out.getvalue()


def _plain_to_commented(value: Any) -> Any:
    from ruamel.yaml.comments import CommentedMap, CommentedSeq
    from ruamel.yaml.scalarstring import LiteralScalarString

    if isinstance(value, dict):
        return CommentedMap((k, _plain_to_commented(v)) for k, v in value.items())
    if isinstance(value, list):
        if all(_is_leaf(v) or (isinstance(v, list) and all(map(_is_leaf, v))) for v in value):
            seq = CommentedSeq(_flow_safe(v) for v in value)
            seq.fa.set_flow_style()  # deps: [a, b], parallel_groups: [[a], [b, c]]
            return seq
        return CommentedSeq(_plain_to_commented(v) for v in value)
    if isinstance(value, str) and "\n" in value.rstrip("\n") and not value.startswith(" "):
        return LiteralScalarString(value)  # prompts read better as | blocks
    return value


# Plain scalars that ruamel (YAML 1.2) writes in flow style but libyaml, our fast reader,
# refuses (`[:.]`): such strings are double-quoted inside flow sequences.
_FLOW_RISKY = re.compile(r"^[-?:,\[\]{}#&*!|>'\"%@`]|[:,\[\]{}#]|\s$")


def _flow_safe(value: Any) -> Any:
    from ruamel.yaml.comments import CommentedSeq
    from ruamel.yaml.scalarstring import DoubleQuotedScalarString

    if isinstance(value, list):
        seq = CommentedSeq(_flow_safe(v) for v in value)
        seq.fa.set_flow_style()
        return seq
    if isinstance(value, str) and _FLOW_RISKY.search(value):
        return DoubleQuotedScalarString(value)
    return value


def _is_leaf(value: Any) -> bool:
    return not isinstance(value, (dict, list)) and not (isinstance(value, str) and "\n" in value)


def _canonical(data: Any, refs: bool = False) -> Any:
    """Key order, the version key; with ``refs``, references spelled with † (else as the author wrote them)."""
    if not isinstance(data, dict):
        return data
    if "dagplan" not in data:
        data.insert(0, "dagplan", 1) if hasattr(data, "insert") else data.update(dagplan=1)
    data = _reordered(data, TOP_ORDER)
    steps = data.get("steps")
    if isinstance(steps, list):
        for i, step in enumerate(steps):
            if isinstance(step, dict):
                steps[i] = _reordered(step, STEP_ORDER)
                if refs:
                    steps[i] = _canonical_step(steps[i])
    if refs and isinstance(data.get("result"), str):
        data["result"] = _rewrite(data["result"], template=True)
    return data


def _canonical_step(step: Any) -> Any:
    if isinstance(step.get("args"), dict):
        _rewrite_tree(step["args"])
    for key in _TEMPLATE_KEYS:
        if isinstance(step.get(key), str):
            step[key] = _rewrite(step[key], template=True)
    if isinstance(step.get("output"), str):
        step["output"] = _rewrite(step["output"], template=False)
    return step


def _reordered(mapping: Any, order: tuple[str, ...]) -> Any:
    """The same mapping with ``order``'s keys first; comments go along with their keys."""
    from ruamel.yaml.comments import CommentedMap

    keys = [k for k in order if k in mapping] + [k for k in mapping if k not in order]
    if list(mapping) == keys:
        return mapping
    out = CommentedMap((k, mapping[k]) for k in keys)
    if isinstance(mapping, CommentedMap):
        out.ca.comment = mapping.ca.comment
        out.ca.items.update(mapping.ca.items)
        out.fa.set_flow_style() if mapping.fa.flow_style() else None
    return out


def _rewrite_tree(node: Any) -> None:
    """Rewrite every string value (not key) inside an args tree, in place."""
    stack = [node]
    while stack:
        current = stack.pop()
        items = current.items() if isinstance(current, dict) else enumerate(current)
        for key, value in list(items):
            if isinstance(value, str):
                current[key] = _rewrite(value, template=True)
            elif isinstance(value, (dict, list)):
                stack.append(value)


def _rewrite(text: str, template: bool) -> str:
    """The canonical spelling of a string that holds references, keeping its YAML style."""
    if "$" not in text or not SPECIAL.search(text):
        return text
    try:
        node = classify(text) if template else parse_output(text)
    except DagplanError:
        return text
    new = str(node)
    if new == text or isinstance(node, str):
        return text
    return type(text)(new) if type(text) is not str else new
