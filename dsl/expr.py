"""Strings of a plan -> references, placeholders, templates and expressions (grammar: ``expr.lark``).

``classify(text)`` decides what a string in an argument is:

* no special character at all -> the string itself (the fast path: most strings);
* exactly an expression (``†a``, ``†a || †b``, ``†a && †b``) -> a :class:`Ref`,
  :class:`AnyOf` or :class:`AllOf` that takes the referenced value with its JSON type;
* otherwise -> a :class:`Template` (references and placeholders interpolated as text),
  or the plain string again when it only held escapes.

Parsing never judges meaning (unknown step ids, mixed operators): ``validate`` does.
Parsed strings are cached without positions; spans are attached per use.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any, cast, get_args


from .errors import PlanInvalid, Span, did_you_mean, error
from .record import record
from .ir import BAD_LITERAL, AllOf, AnyOf, Output, Placeholder, Ref, Root, Template, View, literal_value, view_length

SPECIAL = re.compile(r"[\u2020$#\\]")
# "The whole string is an expression": it starts with a sigil and either is one
# reference or uses an operator. The grammar has the last word.
_STARTS_WITH_REF = re.compile(r"\s*(?:\u2020|\$(?:input|state|item|index)\b)")
_ONE_TOKEN = re.compile(r"\s*\S+\s*")


class _Unparsable(Exception):
    """A syntax error found by the grammar; ``pos_in_stream`` is where, as lark gives it."""

    def __init__(self, pos_in_stream: int):
        super().__init__(pos_in_stream)
        self.pos_in_stream = pos_in_stream


def _lark_parse(start: str, text: str) -> Any:
    """The grammar's answer for ``text`` (lark is imported only when a string needs it)."""
    from .expr_grammar import UnexpectedInput, build

    try:
        return build(start, text)
    except UnexpectedInput as exc:
        raise _Unparsable(getattr(exc, "pos_in_stream", None) or 0) from None


def _syntax_error(text: str, exc: _Unparsable, span: Span, what: str) -> PlanInvalid:
    offset = exc.pos_in_stream
    got = text[offset : offset + 12] or "end of text"
    hint = _hint_for(text, offset)
    shown = text if len(text) <= 80 else text[:77] + "..."
    return PlanInvalid(error("syntax", f"invalid {what} at {got!r} in {shown!r}", _with_offset(span, offset), hint))


def _with_offset(span: Span, offset: int) -> Span:
    return Span(span.file, span.path, span.offset + offset)


_BAD_IN_STRING = re.compile(
    r"[\x00-\x1f\ud800-\udfff]|\\[^\"'\\/bfnrtu]|\\u(?![0-9a-fA-F]{4})|\\u[dD][89abAB][0-9a-fA-F]{2}(?!\\u[dD][c-fC-F])"
)


def string_hint(text: str, offset: int) -> str | None:
    """The hint for a quoted key or string literal that starts at ``offset`` and holds what JSON text may
    not (a raw control character, a lone surrogate, an unknown escape); None for any other error."""
    quote = text[offset : offset + 1]
    if quote not in ('"', "'"):
        return None
    end = re.compile(rf"(?:\\.|[^{quote}\\])*{quote}", re.S).match(text, offset + 1)
    body = text[offset + 1 : end.end() - 1] if end else text[offset + 1 :]
    bad = _BAD_IN_STRING.search(body)
    if bad is None:
        return None
    found = bad.group()
    shown = f"the raw character U+{ord(found):04X}" if len(found) == 1 else repr(found)[1:-1].replace("\\\\", "\\")
    return (
        f"a quoted key or string holds JSON escapes only, and {shown} is not one: write a tab as \\t, a newline as"
        " \\n, another control character as \\u00XX, and a character outside the BMP as its surrogate pair"
    )


ROOTS = get_args(Root)  # the roots a reference starts with


def _hint_for(text: str, offset: int) -> str:
    found = string_hint(text, offset)
    if found:
        return found
    before = text[:offset]
    if before.endswith(("\u2020", "$")) or re.search(r"[\u2020]$", before):
        return (
            "a reference starts with \u2020input or \u2020state (ASCII: $input, $state);"
            " write \\\u2020 for a literal \u2020"
        )
    if "||" in text and "&&" in text:
        return "write `||` and `&&` between references only, e.g. \u2020state.a || \u2020state.b"
    if re.search(r"\|\|\s*$", before):
        return 'after `||` comes a reference, or last a literal default: \u2020state.review || "none"'  # noqa: E501
    root = re.search(r"[\u2020$]([A-Za-z_]+)", text)
    if root and root.group(1) not in ROOTS:
        close = did_you_mean(root.group(1), ROOTS)
        if close:
            roots = ", ".join(f"\u2020{r}" for r in ROOTS)
            return f"did you mean \u2020{close.split(chr(39))[1]}? a reference starts with one of {roots}"
    return "references look like \u2020state.a.b[0].c; escape a literal \u2020, $ or # with a backslash"


@lru_cache(maxsize=65536)
def _template(text: str) -> Template:
    template = _scan_template(text) or _lark_parse("template", text)
    return _with_alternatives(template) if "||" in text else template


_DQ = r'"(?:[^"\\\x00-\x1f]|\\.)*"'
_SQ = r"'(?:[^'\\\x00-\x1f]|\\.)*'"
_TEXT_OR = re.compile(r"[ \t]*\|\|[ \t]*")
_TEXT_DEFAULT = re.compile(
    r"[ \t]*\|\|[ \t]*("
    + _DQ
    + "|"
    + _SQ
    + r"|-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?\b|true\b|false\b|null\b)"
)  # noqa: E501


def _with_alternatives(template: Template) -> Template:
    """``Review: †state.review || "none".`` in text: the references joined by ``||`` read as one
    :class:`AnyOf` (the first written), with the literal after the last ``||`` as its default; ``#E1 ||
    "none"``: the step's text, or the literal when it was skipped."""
    parts: list[Any] = list(template.parts)
    out: list = []
    i = 0
    while i < len(parts):
        part = parts[i]
        if type(part) is not Ref and type(part) is not Placeholder:
            out.append(part)
            i += 1
            continue
        options: list[Any] = [part]
        while (
            type(part) is Ref
            and i + 2 < len(parts)
            and type(parts[i + 2]) is Ref
            and _TEXT_OR.fullmatch(str(parts[i + 1]))
        ):
            options.append(parts[i + 2])
            i += 2
        found = _default_after(parts, i)
        if found is not None:
            value, rest = found
            if type(part) is Placeholder:
                out.append(Placeholder(part.step, part.view, part.n, part.span, value, True))
            else:
                out.append(AnyOf(tuple(options), part.span, value, True))
            out += [rest] if rest else []
            i += 2
        else:
            out.append(AnyOf(tuple(options), part.span) if len(options) > 1 else part)
            i += 1
    return Template(tuple(out), template.span)


def _default_after(parts: list[Any], i: int) -> tuple[Any, str] | None:
    """The literal default written right after ``parts[i]`` (``|| "none"``) and the text after it."""
    rest = parts[i + 1] if i + 1 < len(parts) and type(parts[i + 1]) is str else ""
    fallback = _TEXT_DEFAULT.match(rest) if rest else None
    value = literal_value(fallback.group(1)) if fallback else BAD_LITERAL
    return None if fallback is None or value is BAD_LITERAL else (value, rest[fallback.end() :])


@lru_cache(maxsize=65536)
def _expr(text: str) -> tuple[list[tuple[Ref, ...]], set[str]]:
    return _scan_expr(text) or _lark_parse("expr", text)


# --- fast paths -------------------------------------------------------------------------
# A lark parse costs 30-60 us per string; plans have many. These regular expressions
# mirror the grammar's terminals for the common forms and give up (return None) on
# anything else -- quoted keys, errors -- which then goes through lark. A property test
# checks that both paths agree.

_REF = (
    r"(?:\u2020|\$(?=(?:input|state|item|index)\b))(input|state|item|index)"
    r"((?:\.[A-Za-z_][A-Za-z0-9_]*|\[\d{1,9}\])*)"  # at most 9 digits, as the grammar's INT
)
_REF_RE = re.compile(_REF)
_SELECTOR_RE = re.compile(r"\.([A-Za-z_][A-Za-z0-9_]*)|\[(\d{1,9})\]")
_TOKEN_RE = re.compile(
    rf"(?P<ref>{_REF})"
    r"|(?P<ph>#[A-Za-z_][A-Za-z0-9_]*(?:-[A-Za-z0-9_]+)*)(?P<view>\.summary\b|\.(?:head|last)=\d+)?"
    r"|\\(?P<esc>[\u2020$#\\])"
    r"|(?P<text>[^\u2020$#\\]+|\$|#|\\)"
)
_OPERATOR_RE = re.compile(r"[ \t]*(\|\||&&)[ \t]*")


def _scan_template(text: str) -> Template | None:
    """A template's parts in one pass, linear in the text: literal pieces gathered in a list and joined once
    (appending to a string would copy the text so far at every ``$``, ``#`` or escape)."""
    parts: list = []
    pending: list[str] = []  # literal pieces since the last reference or placeholder
    pos, end = 0, len(text)
    while pos < end:
        m = _TOKEN_RE.match(text, pos)
        if m is None:
            return None
        kind = m.lastgroup if m.lastgroup != "view" else "ph"
        if kind == "ref":
            if text.startswith("[", m.end()):
                return None
            ref_end = m.end()
            if pending:
                parts.append("".join(pending))
                pending.clear()
            parts.append(_ref_from(text, pos, ref_end))
        elif kind == "ph":
            if pending:
                parts.append("".join(pending))
                pending.clear()
            parts.append(_placeholder_from(m.group("ph"), m.group("view"), pos))
        else:
            chunk = m.group("esc") or m.group("text")
            if chunk == "\u2020":
                return None
            pending.append(chunk)
        pos = m.end()
    if pending:
        parts.append("".join(pending))
    return Template(tuple(parts))


def _ref_from(text: str, start: int, end: int) -> Ref:
    sigil_len = 1
    size = 4 if text.startswith("item", start + sigil_len) else 5  # item; input, state, index
    root = text[start + sigil_len : start + sigil_len + size]
    selectors = text[start + sigil_len + size : end]
    path = tuple(k if k else int(i) for k, i in _SELECTOR_RE.findall(selectors))
    return Ref(cast(Root, root), path, Span(offset=start))


def _placeholder_from(step: str, view: str | None, start: int) -> Placeholder:
    if not view:
        return Placeholder(step[1:], "full", None, Span(offset=start))
    name, _, count = view[1:].partition("=")
    return Placeholder(step[1:], cast(View, name), view_length(count), Span(offset=start))


def _scan_expr(text: str) -> tuple[list[tuple[Ref, ...]], set[str]] | None:
    alts: list[list[Ref]] = [[]]
    ops: set[str] = set()
    pos = 0
    while True:
        m = _REF_RE.match(text, pos)
        if m is None:
            return None
        alts[-1].append(_ref_from(text, pos, m.end()))
        pos = m.end()
        if pos == len(text):
            return [tuple(a) for a in alts], ops
        op = _OPERATOR_RE.match(text, pos)
        if op is None:
            return None
        ops.add(op.group(1))
        if op.group(1) == "||":
            alts.append([])
        pos = op.end()


def parse_template(text: str, span: Span = Span()) -> Template:
    """Parse text with interpolations. Raises :class:`PlanInvalid` on a syntax error."""
    try:
        return _rebase(_template(text), span)
    except _Unparsable as exc:
        raise _syntax_error(text, exc, span, "reference") from None


def parse_expr(text: str, span: Span = Span()) -> tuple[tuple[tuple[Ref, ...], ...], set[str]]:
    """Parse ``†a && †b || †c``; returns the alternatives and the set of operators used."""
    stripped = text.lstrip()
    lead = len(text) - len(stripped)
    try:
        alts, ops = _expr(stripped.rstrip())
    except _Unparsable as exc:
        exc.pos_in_stream += lead
        raise _syntax_error(text, exc, span, "expression") from None
    span = _with_offset(span, lead) if lead else span
    return tuple(tuple(_rebase(r, span) for r in alt) for alt in alts), ops


def parse_output(text: str, span: Span = Span()) -> Output:
    single = _single_ref(text, span)
    if single is not None:
        return Output(((single,),), span)
    alts, _ = parse_expr(text, span)
    return Output(alts, span)


_SINGLE_REF_RE = re.compile(_REF + r"\Z")


def _single_ref(text: str, span: Span) -> Ref | None:
    """The commonest string of all, exactly one plain reference, without the general machinery."""
    parts = _single_ref_parts(text)
    return None if parts is None else Ref(cast(Root, parts[0]), parts[1], span)


@lru_cache(maxsize=65536)
def _single_ref_parts(text: str) -> tuple[str, tuple] | None:
    m = _SINGLE_REF_RE.match(text)
    if m is None:
        return None
    return m.group(1), tuple(k if k else int(i) for k, i in _SELECTOR_RE.findall(m.group(2)))


def state_path(path: str) -> tuple | None:
    """``receipt.items[0].id`` -> ``("receipt", "items", 0, "id")`` (a path under †state), None if malformed."""
    parts = _single_ref_parts("\u2020state." + path.strip().removeprefix("\u2020state.").removeprefix("$state."))
    return None if parts is None else parts[1]


def classify(text: str, span: Span = Span()) -> Any:
    """An argument string -> str | Ref | AnyOf | AllOf | Template (see module doc)."""
    if not SPECIAL.search(text):
        return text
    single = _single_ref(text, span)
    if single is not None:
        return single
    if _STARTS_WITH_REF.match(text) and ("||" in text or "&&" in text or _ONE_TOKEN.fullmatch(text)):
        fallback = _default_of(text) if "||" in text else None
        if fallback is not None:
            return _with_default(text, fallback, span)
        alts, ops = parse_expr(text, span)
        if ops == {"&&"}:
            return AllOf(alts[0], span)
        if len(alts) == 1:
            return alts[0][0]
        if all(len(a) == 1 for a in alts):
            return AnyOf(tuple(a[0] for a in alts), span)
        raise PlanInvalid(
            error(
                "mixed-operators",
                f"an argument may use `||` or `&&`, not both: {text!r}",
                span,
                "`&&` inside `||` alternatives is only meaningful in an output path",
            )
        )
    template = parse_template(text, span)
    if all(isinstance(p, str) for p in template.parts):
        return "".join(cast(tuple[str, ...], template.parts))  # only escapes
    if len(template.parts) == 1 and isinstance(template.parts[0], Ref):
        return template.parts[0]  # e.g. †state["a b"], which the pre-test does not see
    return template


# the last alternative, a literal: matched at the last `||` only (a search from every blank was quadratic in a
# run of blanks before a `||`: issue 61)
_DEFAULT = re.compile(r"\|\|\s*(" + _DQ + "|" + _SQ +
                      r"|-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?|true|false|null)\s*\Z")  # fmt: skip


@record(frozen=True)
class _Default:
    at: int  # where the blanks before its `||` start
    literal: str  # as written


def _default_of(text: str) -> _Default | None:
    """The literal after the last ``||`` of ``text`` when that is the whole rest of it (``... || "none"``)."""
    last = text.rfind("||")
    found = _DEFAULT.match(text, last) if last >= 0 else None
    return _Default(len(text[:last].rstrip()), found.group(1)) if found else None


def _with_default(text: str, fallback: _Default, span: Span) -> AnyOf:
    """``†a || †b || "none"``: the references, then a literal for when none of them was written."""
    head = text[: fallback.at]
    found = classify(head, span) if head.strip() else None
    if isinstance(found, Ref):
        options: tuple[Ref, ...] = (found,)
    elif isinstance(found, AnyOf) and not found.has_default:
        options = found.options
    else:
        raise PlanInvalid(error("syntax", f"a default (`|| {fallback.literal}`) follows references only: {text!r}",
                                _with_offset(span, fallback.at),
                                'write it last, after one or more references: †state.review || "none"'))  # fmt: skip
    return AnyOf(options, span, _literal_value(fallback.literal, text, span), True)


def _literal_value(token: str, text: str, span: Span) -> Any:
    value = literal_value(token)
    if value is BAD_LITERAL:
        raise PlanInvalid(error("syntax", f"the default {token} is not a valid literal in {text!r}", span,
                                "a default is a string in quotes, a number, true, false or null"))  # fmt: skip
    return value


def _rebase(node: Any, span: Span) -> Any:
    """Give a cached, position-free node the span of this use (offset inside the string)."""
    if isinstance(node, Template):
        parts = tuple(p if isinstance(p, str) else _rebase(p, span) for p in node.parts)
        return Template(parts, span)
    if isinstance(node, Ref):
        return Ref(node.root, node.path, _with_offset(span, node.span.offset))
    if isinstance(node, Placeholder):
        return Placeholder(
            node.step, node.view, node.n, _with_offset(span, node.span.offset), node.default, node.has_default
        )
    if isinstance(node, AnyOf):
        options = tuple(_rebase(r, span) for r in node.options)
        return AnyOf(options, _with_offset(span, node.span.offset), node.default, node.has_default)
    return node
