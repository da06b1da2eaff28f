"""The reference grammar: unit tests, and a property test that the regex fast paths agree with lark."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dagplan.dsl import expr
from dagplan.dsl.errors import PlanInvalid, Span
from dagplan.dsl.ir import AllOf, AnyOf, Output, Placeholder, Ref, Template
from dagplan.dsl.expr import classify, parse_output

S = Ref("state", ("a",))


@pytest.mark.parametrize(
    "text, node",
    [
        ("plain text", "plain text"),
        ("†state.a", S),
        ("$state.a", S),
        ("  †state.a  ", S),
        ("†input.user.name", Ref("input", ("user", "name"))),
        ("†state.items[0].id", Ref("state", ("items", 0, "id"))),
        ('†state["key with space"]', Ref("state", ("key with space",))),
        ("†state.a || †state.b", AnyOf((S, Ref("state", ("b",))))),
        ("†state.a && †state.b", AllOf((S, Ref("state", ("b",))))),
        ("costs \\$5 and \\#1", "costs $5 and #1"),
        ("costs $5, issue #1", "costs $5, issue #1"),
        ("a \\† b", "a † b"),
        ("Hi †input.name!", Template(("Hi ", Ref("input", ("name",)), "!"))),
        ("see #E1.summary", Template(("see ", Placeholder("E1", "summary")))),
        ("#E1.head=200", Template((Placeholder("E1", "head", 200),))),
        ("tail #step-2.last=5.", Template(("tail ", Placeholder("step-2", "last", 5), "."))),
    ],
)
def test_classify(text, node):
    assert classify(text) == node


def test_output_alternatives_and_targets():
    out = parse_output("†state.a && †state.b || †state.err")
    assert out == Output(((S, Ref("state", ("b",))), (Ref("state", ("err",)),)))
    assert out.branching and len(out.targets) == 3
    assert parse_output("†state.a") == Output(((S,),))


@pytest.mark.parametrize(
    "text, offset",
    [("†state.", 6), ("†nope", 1), ("†state.a ||", 8), ("x †stat", 3), ('†state["open', 7)],
)
def test_syntax_errors_point_inside_the_string(text, offset):
    with pytest.raises(PlanInvalid) as info:
        classify(text, Span("f.yaml", ("steps", 0, "args", "x")))
    d = info.value.headline
    assert d.code == "syntax" and d.span.path == ("steps", 0, "args", "x")
    assert d.span.offset == offset


def test_mixed_operators_in_an_argument():
    with pytest.raises(PlanInvalid) as info:
        classify("†state.a && †state.b || †state.c")
    assert info.value.code == "mixed-operators"


def test_spans_carry_offsets_of_each_reference():
    t = classify("ab †state.x and #E1", Span("f", ("p",)))
    ref, ph = t.parts[1], t.parts[3]
    assert (ref.span.path, ref.span.offset) == (("p",), 3)
    assert ph.span.offset == 16


def test_str_round_trips():
    for text in ["†state.a || †state.b", "Hi †input.name \\#1 #E1.head=3", '†state["a b"].c[2]']:
        node = classify(text)
        assert classify(str(node)) == node


# --- property: fast paths == lark ------------------------------------------------------------

ALPHABET = st.sampled_from(
    list("abcxyz019 _-.[]\"'|&=\\#$†")
    + [
        "†state",
        "†input",
        "$state",
        "$input",
        "†item",
        "$item",
        "†index",
        "$index",
        ".summary",
        ".head=",
        "||",
        "&&",
        "#E1",
    ]
)
TEXTS = st.lists(ALPHABET, max_size=14).map("".join)


def _lark_template(text):
    return expr._lark_parse("template", text)


def _lark_expr(text):
    return expr._lark_parse("expr", text)


def _same(fast, slow_fn, text):
    if fast is None:
        return  # the fast path gave up: lark decides alone
    assert fast == slow_fn(text), text


@settings(max_examples=400, deadline=None)
@given(TEXTS)
def test_template_fast_path_agrees_with_lark(text):
    _same(expr._scan_template(text), _lark_template, text)


@settings(max_examples=400, deadline=None)
@given(TEXTS)
def test_expr_fast_path_agrees_with_lark(text):
    fast = expr._scan_expr(text)
    if fast is not None:
        alts, ops = _lark_expr(text)
        assert (list(fast[0]), fast[1]) == (list(alts), ops), text


@settings(max_examples=400, deadline=None)
@given(TEXTS)
def test_single_reference_fast_path_agrees_with_lark(text):
    single = expr._single_ref(text, Span())
    if single is not None:
        alts, _ = _lark_expr(text)
        assert alts == [(single,)] or [tuple(a) for a in alts] == [(single,)], text


@settings(max_examples=300, deadline=None)
@given(TEXTS)
def test_classify_only_raises_plan_invalid(text):
    try:
        classify(text)
    except PlanInvalid:
        pass
