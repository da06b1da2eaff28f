"""Dialects: detection, normalization into canonical data, and positions at the original place."""

from __future__ import annotations

import importlib
import json

import pytest

from dagplan.dsl.errors import LoadError, Span

load = importlib.import_module("dagplan.dsl.load")
dialects = importlib.import_module("dagplan.dsl.dialects")

CALLS = """[
  {"_tool": "fetchUserProfile", "userName": "Alice", "_outputPath": "†state.userProfileData"},
  {"_tool": "summarizeProfile", "profile": "†state.userProfileData", "_outputPath": "†state.profileSummary",
   "_output": {"summary": "ok"}}
]"""

CALLS_OBJECT = """{
  "calls": [
    {"_tool": "issueRefund", "customerId": "†input.customerId", "amount": "†input.amount"}
  ],
  "output": {"confirmationId": "refund_xyz789"},
  "mode": "lazy"
}"""

STEPS = """{
  "task_summary": "Add OAuth login with Google",
  "steps": [
    {"id": "E1", "agent": "search", "task": "Find existing auth code in cli/auth"},
    {"id": "E2", "agent": "planner", "task": "Design integration plan based on #E1", "deps": ["E1"]}
  ],
  "parallel_groups": [["E1"], ["E2"]]
}"""

PLAN_TOOL = """{
  "goal": "Explain the retry logic",
  "steps": [
    {"id": "s1", "description": "Find the retry code", "tools": ["grep"], "depends_on": []},
    {"id": "s2", "description": "Explain #s1", "tools": [], "depends_on": ["s1"]}
  ]
}"""


def find(text: str, needle: str, nth: int = 0, plus: int = 0) -> tuple[int, int]:
    """(line, col) of the nth occurrence of needle, plus some characters."""
    index = -1
    for _ in range(nth + 1):
        index = text.index(needle, index + 1)
    index += plus
    return text.count("\n", 0, index) + 1, index - (text.rfind("\n", 0, index) + 1) + 1


def where(doc, *path, offset=0):
    span = doc.source_map.locate(Span(path=tuple(path), offset=offset))
    return span.line, span.col


def test_calls_list():
    doc = load.load_text(CALLS)
    assert doc.dialect == "calls"
    assert doc.data["steps"] == [
        {"id": "E1", "tool": "fetchUserProfile", "output": "†state.userProfileData", "args": {"userName": "Alice"}},
        {
            "id": "E2",
            "tool": "summarizeProfile",
            "output": "†state.profileSummary",
            "precomputed": {"summary": "ok"},
            "args": {"profile": "†state.userProfileData"},
        },
    ]
    assert where(doc, "steps", 1, "args", "profile") == find(CALLS, '"†state.userProfileData"', 1)
    assert where(doc, "steps", 0, "tool") == find(CALLS, '"fetchUserProfile"')
    assert where(doc, "steps", 1, "precomputed") == find(CALLS, '{"summary"')
    assert where(doc, "steps", 1, "id") == find(CALLS, '{"_tool": "summarize')  # no _id: the call itself


def test_calls_object():
    doc = load.load_text(CALLS_OBJECT)
    assert doc.dialect == "calls"
    assert doc.data["mode"] == "lazy"
    assert doc.data["x-output"] == {"confirmationId": "refund_xyz789"}
    assert doc.data["steps"][0]["args"] == {"customerId": "†input.customerId", "amount": "†input.amount"}
    assert where(doc, "steps", 0, "args", "amount") == find(CALLS_OBJECT, '"†input.amount"')
    assert where(doc, "x-output") == find(CALLS_OBJECT, '{"confirmationId"')


def test_calls_object_null_output_is_dropped():
    doc = load.load_text('{"calls": [{"_tool": "a"}], "output": null}')
    assert "x-output" not in doc.data


def test_steps_dialect():
    doc = load.load_text(STEPS)
    assert doc.dialect == "steps"
    assert doc.data["summary"] == "Add OAuth login with Google"
    assert doc.data["steps"][1] == {
        "id": "E2",
        "tool": "planner",
        "args": {"task": "Design integration plan based on #E1"},
        "deps": ["E1"],
    }
    assert doc.data["parallel_groups"] == [["E1"], ["E2"]]
    assert where(doc, "steps", 1, "args", "task", offset=33) == find(STEPS, "#E1", 0)
    assert where(doc, "steps", 1, "tool") == find(STEPS, '"planner"')
    assert where(doc, "summary") == find(STEPS, '"Add OAuth')


def test_plan_tool_dialect():
    doc = load.load_text(PLAN_TOOL)
    assert doc.dialect == "plan-tool"
    assert doc.data["summary"] == "Explain the retry logic"
    assert doc.data["steps"][1] == {
        "id": "s2",
        "description": "Explain #s1",
        "llm": "Explain #s1",
        "tools": [],
        "deps": ["s1"],
    }
    assert where(doc, "steps", 1, "deps") == find(PLAN_TOOL, '["s1"]')
    assert where(doc, "steps", 0, "llm") == find(PLAN_TOOL, '"Find the retry')


@pytest.mark.parametrize(
    "data, dialect",
    [
        ({"steps": []}, "canonical"),
        ({"dagplan": 1}, "canonical"),
        ([{"_tool": "a"}], "calls"),
        ({"calls": []}, "calls"),
        ({"task_summary": "x", "steps": []}, "steps"),
        ({"goal": "x", "steps": []}, "plan-tool"),
        ({"steps": [{"id": "a", "agent": "x", "task": "t"}]}, "steps"),
        ({"steps": [{"id": "a", "description": "x", "depends_on": []}]}, "plan-tool"),
        ({"a": 1}, None),
        ([1, 2], None),
        ([], None),
        ("text", None),
    ],
)
def test_detect(data, dialect):
    assert dialects.detect(data) == dialect


def test_unknown_dialect_lists_accepted_forms():
    with pytest.raises(LoadError) as info:
        load.load_text(json.dumps({"tasks": []}))
    assert info.value.code == "unknown-dialect"
    assert "_tool" in info.value.hint and "task_summary" in info.value.hint
