"""Canonical data -> Plan IR."""

from __future__ import annotations

from types import MappingProxyType

import pytest

from dagplan.dsl.ir import NOT_GIVEN, AnyOf, Output, Placeholder, Ref, Template
from dagplan.dsl.parse import parse_document, parse_duration


def test_step_fields():
    plan, diags = parse_document(
        {
            "summary": "s",
            "mode": "lazy",
            "inputs": {"a": {"type": "string"}, "b": {"type": "number", "default": 1}},
            "steps": [
                {
                    "id": "x",
                    "tool": "t",
                    "args": {"a": "†input.a", "list": [1, "$state.q"], "f": "†state.p || †state.q", "lit": "plain"},
                    "output": "†state.ok || †state.err",
                    "retry": {"limit": 5, "backoff": "250ms"},
                    "timeout": "2m",
                    "purity": "idempotent",
                },
                {"id": "y", "llm": "Use #x.head=5", "system": "be brief", "tools": ["t"], "precomputed": {"k": [1]}},
            ],
            "initial_state": {"q": 1, "p": 2},
            "result": "†state.ok",
            "parallel_groups": [["x"], ["y"]],
        },
        "p.yaml",
    )
    assert diags == []
    x, y = plan.steps
    assert isinstance(x.args, MappingProxyType)
    assert x.args["a"] == Ref("input", ("a",))
    assert x.args["list"] == (1, Ref("state", ("q",)))
    assert x.args["f"] == AnyOf((Ref("state", ("p",)), Ref("state", ("q",))))
    assert x.args["lit"] == "plain"
    assert x.output == Output(((Ref("state", ("ok",)),), (Ref("state", ("err",)),)))
    assert x.retry.limit == 5 and x.retry.backoff == 0.25 and x.timeout == 120.0
    assert x.precomputed is NOT_GIVEN
    assert y.llm.prompt == Template(("Use ", Placeholder("x", "head", 5)))
    assert y.llm.tools == ("t",) and y.precomputed == {"k": (1,)}
    assert plan.mode == "lazy" and plan.required_inputs == ("a",)
    assert plan.result == Ref("state", ("ok",))
    assert plan.declared_groups == (("x",), ("y",))
    assert x.args["a"].span.path == ("steps", 0, "args", "a")


def test_collects_every_bad_string():
    plan, diags = parse_document(
        {"steps": [{"id": "a", "tool": "t", "args": {"x": "†state.", "y": "†nope"}, "output": "†state.a ||"}]}
    )
    assert plan is None
    assert sorted(d.span.path for d in diags) == [
        ("steps", 0, "args", "x"),
        ("steps", 0, "args", "y"),
        ("steps", 0, "output"),
    ]
    assert {d.code for d in diags} == {"syntax"}


@pytest.mark.parametrize("data", [None, [], "x", {"steps": "x"}, {"steps": [1]}, {"steps": [{"id": 3, "args": 4}]}])
def test_never_raises_on_wrong_shapes(data):
    plan, diags = parse_document(data)
    assert plan is None and diags and all(d.severity == "error" for d in diags)


@pytest.mark.parametrize(
    "raw, seconds", [(3, 3.0), (0.5, 0.5), ("500ms", 0.5), ("30s", 30.0), ("2m", 120.0), ("1h", 3600.0), ("7", 7.0)]
)
def test_durations(raw, seconds):
    assert parse_duration(raw) == seconds


@pytest.mark.parametrize("raw", ["soon", "3 days", -1, True, None])
def test_not_durations(raw):
    assert parse_duration(raw) is None


def test_bad_duration_is_a_diagnostic():
    plan, diags = parse_document({"steps": [{"id": "a", "tool": "t", "timeout": "forever"}]})
    assert plan is None and diags[0].code == "bad-duration" and diags[0].span.path == ("steps", 0, "timeout")


def test_repeated_retry_settings_are_shared_but_a_bad_one_is_still_reported():
    steps = [
        {"id": "a", "tool": "t", "retry": {"limit": 2, "backoff": 1}},
        {"id": "b", "tool": "t", "retry": {"limit": 2, "backoff": 1}},
        {"id": "c", "tool": "t", "retry": {"limit": 2, "backoff": True}},  # True == 1, but not a duration
    ]
    plan, diags = parse_document({"steps": steps[:2]})
    assert plan.steps[0].retry == plan.steps[1].retry and plan.steps[1].retry.backoff == 1.0
    plan, diags = parse_document({"steps": steps})
    assert [(d.code, d.span.path) for d in diags] == [("bad-duration", ("steps", 2, "retry", "backoff"))]


def test_values_inside_lists_and_mappings_are_classified_at_their_path():
    plan, diags = parse_document(
        {"steps": [{"id": "a", "tool": "t", "args": {"l": [1, {"k": "x †bad"}], "ok": [None, 2.5]}}]}
    )
    assert plan is None and diags[0].code == "syntax" and diags[0].span.path == ("steps", 0, "args", "l", 1, "k")
    plan, _ = parse_document(
        {"steps": [{"id": "a", "tool": "t", "args": {"l": [1, {"k": "$state.x"}], "ok": [None, 2.5]}}]}
    )
    assert plan.steps[0].args["l"][1]["k"] == Ref("state", ("x",)) and plan.steps[0].args["ok"] == (None, 2.5)
