"""Hostile input, kept by the suite: mutated plans never raise out of `check`, and `fmt` never changes a value.

Bounded so CI stays fast (about 200 examples each); for a longer run:

    DAGPLAN_FUZZ_EXAMPLES=20000 python -m pytest tests/test_fuzz.py
"""

from __future__ import annotations

import json
import os

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dagplan
from dagplan.dsl import check
from dagplan.dsl.errors import DagplanError
from dagplan.dsl.load import load_text

EXAMPLES = int(os.environ.get("DAGPLAN_FUZZ_EXAMPLES", "200"))
FUZZ = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])

ODD_TEXT = st.sampled_from(
    [
        "\u2028", "\u2029", "\x85", "\r", "\x1f", "\ufeff", "\udc80", "\t", " ", "#", "$", "\u2020", "\\", ":", "- ",
        "{", "}", "[", "]", '"', "'", "!!int ", "!!python/object/apply:os.system ", "&a ", "*a", "<<: ",
        "9" * 5000, "[" * 200, "```json\n", "```", "\n", "\u2020state[\"\\u\"]", "#E1.head=" + "9" * 40,
        "\u2020state.y[" + "9" * 30 + "]", '{"a": 1, "a": 2}', "when: ", "catch: ",
    ]
)  # fmt: skip

NAMES = st.sampled_from(["a", "b", "fetch", "E1", "x-y", "sum"])
REFS = st.sampled_from(["\u2020state.a", "\u2020input.city", "$state.b.c[0]", "#a", "#b.head=20", "plain"])
SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-10, 10), REFS, st.text(max_size=8))


@st.composite
def plans(draw) -> dict:
    """Documents near the language: steps with tools or prompts, references, outputs, conditions."""
    steps = []
    for i in range(draw(st.integers(1, 4))):
        step = {"id": draw(NAMES) + str(i), draw(st.sampled_from(["tool", "llm"])): draw(NAMES)}
        if draw(st.booleans()):
            step["args"] = draw(st.dictionaries(NAMES, SCALARS, max_size=3))
        if draw(st.booleans()):
            step["output"] = draw(st.sampled_from(["\u2020state.a", "\u2020state.b || \u2020state.err", "$state.c"]))
        if draw(st.booleans()):
            step["when"] = draw(
                st.sampled_from(['\u2020state.a == "x"', "not \u2020state.b", "len(\u2020state.a) > 1"])
            )
        steps.append(step)
    doc: dict = {"steps": steps}
    if draw(st.booleans()):
        doc["inputs"] = {"city": {"type": draw(st.sampled_from(["string", "number", "banana"]))}}
    return doc


def as_text(doc: dict, yaml: bool) -> str:
    if not yaml:
        return json.dumps(doc, ensure_ascii=False)
    from io import StringIO

    from ruamel.yaml import YAML

    out = StringIO()
    YAML().dump(doc, out)
    return out.getvalue()


@st.composite
def mutated(draw) -> str:
    text = as_text(draw(plans()), draw(st.booleans()))
    for _ in range(draw(st.integers(0, 4))):
        where = draw(st.integers(0, len(text)))
        action = draw(st.sampled_from(["insert", "delete", "flip", "splice"]))
        if action == "insert":
            text = text[:where] + draw(ODD_TEXT) + text[where:]
        elif action == "delete":
            text = text[:where] + text[where + draw(st.integers(1, 20)) :]
        elif action == "flip" and text:
            i = min(where, len(text) - 1)
            text = text[:i] + chr((ord(text[i]) ^ (1 << draw(st.integers(0, 6)))) or 32) + text[i + 1 :]
        else:
            text = text[:where] + text[draw(st.integers(0, len(text))) :]
    if draw(st.booleans()):  # a model's answer: prose around a fence
        text = f"Here is the plan:\n```{draw(st.sampled_from(['json', 'yaml', '']))}\n{text}\n```\nHope it helps {{x}}"
    return text


@FUZZ
@given(mutated())
def test_check_never_raises(text):
    result = check(text=text, name="fuzz.yaml")  # any exception here is the failure
    for diag in result.diagnostics:
        assert diag.code and diag.message
        diag.format()


@FUZZ
@given(mutated())
def test_check_of_bytes_never_raises(text):
    check(text=text.encode("utf-8", "surrogatepass"), name="fuzz.json")


@FUZZ
@given(plans(), st.booleans(), st.lists(ODD_TEXT, max_size=2))
def test_fmt_preserves_every_value_and_is_idempotent(doc, yaml, odd):
    if odd:  # odd characters inside string values: the hardest part for YAML
        doc["steps"][0]["description"] = "".join(odd) + "\nsecond line" + "".join(odd)
    try:
        loaded = load_text(as_text(doc, yaml), "p.yaml")
    except DagplanError:
        return  # not loadable to begin with: nothing to format
    try:
        text = dagplan.format_document(loaded)
    except DagplanError as exc:
        assert exc.code == "cannot-format"  # refused, never a changed value
        return
    again = load_text(text, "p.yaml")
    assert again.data["steps"] == json.loads(json.dumps(loaded.data["steps"])) or _only_rewritten(loaded, again)
    assert dagplan.format_document(again) == text
    before, after = check(text=as_text(doc, yaml), name="p.yaml"), check(text=text, name="p.yaml")
    if before.analysis is not None:
        assert after.analysis is not None
        assert (before.analysis.order, before.analysis.groups) == (after.analysis.order, after.analysis.groups)


def _only_rewritten(before, after) -> bool:
    """fmt's one intended change: references spelled canonically ($state -> †state); the IR is the same."""
    a, b = check(text=json.dumps(before.data), name="p"), check(text=json.dumps(after.data), name="p")
    return a.plan is not None and b.plan is not None and a.plan.steps == b.plan.steps
