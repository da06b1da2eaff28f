"""schema_errors: readable messages at the right line/col; the fast check agrees with jsonschema."""

from __future__ import annotations

import copy
import importlib
import json

from hypothesis import given, settings
from hypothesis import strategies as st

from dagplan.dsl.errors import located

load = importlib.import_module("dagplan.dsl.load")
schema = importlib.import_module("dagplan.dsl.schema")

BAD = """\
summary: 1
mode: fast
stepz: 3
steps:
  - id: a
    tol: x
    args: {a: 1}
  - id: b/c
    tool: t
    llm: p
    timeout: [1]
  - id: c
    tool: t
    retry: {limit: -1}
    deps: [a, a]
"""


def diagnostics(text):
    doc = load.load_text(text, "f.yaml")
    return [
        (d.span.line, d.span.col, d.message, d.hint) for d in located(schema.schema_errors(doc), doc.source_map.locate)
    ]


def test_published_schema_is_valid_2020_12():
    from jsonschema import Draft202012Validator

    published = schema.plan_schema()
    Draft202012Validator.check_schema(published)
    assert published["$schema"].endswith("2020-12/schema")
    assert published["$id"]


def test_every_property_has_title_and_description():
    def walk(node):
        if isinstance(node, dict):
            for name, sub in node.get("properties", {}).items():
                assert sub.get("title") and sub.get("description"), name
            for value in node.values():
                walk(value)

    walk(schema.plan_schema())


def test_all_errors_collected_with_messages_and_positions():
    found = diagnostics(BAD)
    assert found == [
        (1, 10, "summary must be a string, not a number", None),
        (2, 7, "mode must be one of eager, lazy, not 'fast'", None),
        (3, 1, "unknown key 'stepz' in the plan", "did you mean 'steps'?"),
        (
            5,
            5,
            "step 'a' needs exactly one of tool, llm, plan, loop, gate",
            "a tool step has `tool: <name>` and `args`; an LLM step has `llm: <prompt>`",
        ),
        (6, 5, "unknown key 'tol' in step 'a'", "did you mean 'tool'?"),
        (8, 5, "step 'b/c' has both tool, llm; it needs exactly one", "split it into two steps"),
        (8, 9, "step id 'b/c' is not a safe name", found[6][3]),
        (
            11,
            14,
            "timeout in step 'b/c' must be a number of seconds or a duration like 500ms, 30s, 2m, 1h, 2d, not [1]",
            None,
        ),
        (14, 20, "retry.limit in step 'c' must be at least 0, not -1", None),
        (15, 11, "deps in step 'c' lists an item twice", None),
    ]


def test_missing_steps_and_empty_steps():
    assert diagnostics("summary: x\n")[0][2] == "the plan is missing 'steps'"
    assert diagnostics("steps: []\n")[0][2] == "steps must not be empty"


def test_dialect_errors_point_at_the_original_key():
    doc = load.load_text('{"task_summary": "s", "steps": [{"id": "E1", "agentt": "search", "task": "x"}]}', "s.json")
    found = located(schema.schema_errors(doc), doc.source_map.locate)
    assert [(d.span.line, d.span.col, d.message) for d in found] == [
        (1, 33, "step 'E1' needs exactly one of tool, llm, plan, loop, gate"),
        (1, 46, "unknown key 'agentt' in step 'E1'"),
    ]


def test_valid_plan_has_no_errors():
    text = "dagplan: 1\nsteps:\n  - id: a\n    tool: t\n    timeout: 30s\n    retry: {limit: 2, backoff: 500ms}\n    x-note: hi\nx-meta: 1\n"
    assert diagnostics(text) == []


STEP = {"id": "a", "tool": "t", "args": {"x": 1}, "output": "†state.a", "timeout": "30s", "retry": {"limit": 1}}
KEYS = [
    "id",
    "tool",
    "llm",
    "args",
    "deps",
    "output",
    "timeout",
    "retry",
    "purity",
    "tools",
    "tol",
    "x-k",
    "max_iterations",
]
VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-2, 3),
    st.floats(allow_nan=False, allow_infinity=False),  # JSON has neither (a document holding one is json-syntax)
    st.text(max_size=5),
    st.sampled_from(["30s", "bad id", "a", "pure", "side_effect", "2m", ""]),
    st.lists(st.sampled_from(["a", "b", 1]), max_size=3),
    st.dictionaries(st.sampled_from(["limit", "backoff", "x"]), st.integers(-1, 2), max_size=2),
)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.sampled_from(KEYS), VALUES, max_size=4), st.sets(st.sampled_from(list(STEP)), max_size=3))
def test_fast_check_never_accepts_what_jsonschema_rejects(changes, removed):
    step = copy.deepcopy(STEP)
    for key in removed:
        step.pop(key)
    step.update(changes)
    document = {"steps": [step], "mode": "eager"}
    top, step_validator = schema._validators()
    full = schema.__dict__["_schema"]()
    from jsonschema import Draft202012Validator

    valid = not list(Draft202012Validator(full).iter_errors(document))
    assert schema._fast_checks()[0](document) == valid
    doc = load.load_text(json.dumps(document))
    assert bool(schema.schema_errors(doc)) == (not valid)
