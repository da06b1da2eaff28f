"""fmt: canonical YAML from every dialect, comments kept, † spelling, key order, idempotent."""

from __future__ import annotations

import importlib
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from as_user import ROOT, run_dagplan
import shutil

load = importlib.import_module("dagplan.dsl.load")
fmt = importlib.import_module("dagplan.dsl.fmt")

CANONICAL = """\
# my plan
steps:   # the steps
  - tool: t   # call t
    id: a
    args: {x: "$state.q", y: 'it''s $state.z and $5', n: [1, 2]}
    output: $state.b || $state.err
  - id: b
    llm: |
      hello $input.who
      world #a
summary: x  # trailing
result: $state.b
"""

EXPECTED = """\
# my plan
dagplan: 1
summary: x  # trailing
steps:   # the steps
  - id: a
    tool: t   # call t
    args: {x: "†state.q", y: 'it''s †state.z and $5', n: [1, 2]}
    output: †state.b || †state.err
  - id: b
    llm: |
      hello †input.who
      world #a
result: †state.b
"""

DIALECTS = {
    "calls": '[{"_tool": "a", "x": "$input.q", "_outputPath": "$state.a"}, {"_tool": "b", "y": "†state.a", "_output": {"k": [1]}}]',
    "steps": '{"task_summary": "OAuth", "steps": [{"id": "E1", "agent": "search", "task": "Find"}, '
    '{"id": "E2", "agent": "coder", "task": "Do #E1", "deps": ["E1"]}], "parallel_groups": [["E1"], ["E2"]]}',
    "plan-tool": '{"goal": "g", "steps": [{"id": "s1", "description": "look\\nup", "tools": ["a"], "depends_on": []}]}',
    "json": '{"result": "$state.a", "steps": [{"output": "$state.a", "tool": "t", "id": "a", "args": {"k": {"deep": ["$input.x"]}}}]}',
}


def formatted(text: str, refs: bool = False) -> str:
    return fmt.format_document(load.load_text(text), refs=refs)


def test_canonical_keeps_comments_orders_keys_and_writes_daggers():
    assert formatted(CANONICAL, refs=True) == EXPECTED


def test_the_authors_spelling_of_references_is_kept_unless_asked():
    out = formatted(CANONICAL)
    assert "$state.q" in out and formatted(out) == out


def test_escapes_and_non_references_are_left_alone():
    text = 'steps:\n  - id: a\n    tool: t\n    description: costs $state of the art\n    args: {p: "\\\\$state.x", q: "$5 #1"}\n'
    out = formatted(text)
    assert "costs $state of the art" in out  # descriptions are not templates
    assert "\\\\$state.x" in out and "$5 #1" in out


def test_syntax_errors_are_left_for_check():
    assert "$state.a ||" in formatted("steps:\n  - id: a\n    tool: t\n    args: {x: $state.a ||}\n")


@pytest.mark.parametrize("name", sorted(DIALECTS))
def test_dialects_become_canonical_and_fmt_is_idempotent(name):
    out = formatted(DIALECTS[name])
    doc = load.load_text(out)
    assert doc.dialect == "canonical"
    assert out.startswith("dagplan: 1\n")
    if doc.dialect == "canonical" and load.load_text(DIALECTS[name]).dialect == "canonical":
        assert formatted(DIALECTS[name], refs=True).count("$state") == 0  # the author's spelling, unless asked
    else:
        assert "$state" not in out and "$input" not in out  # references the conversion made
    assert formatted(out) == out
    original = load.load_text(DIALECTS[name]).data
    again = {k: v for k, v in doc.data.items() if k != "dagplan"}
    assert json.loads(json.dumps(again, ensure_ascii=False).replace("†", "$")) == json.loads(
        json.dumps(original, ensure_ascii=False).replace("†", "$")
    )


def test_step_key_order():
    out = formatted(
        '{"steps": [{"output": "†state.a", "deps": [], "args": {}, "tool": "t", "description": "d", "id": "a", "timeout": 3}]}'
    )
    keys = [line.strip().split(":")[0].lstrip("- ") for line in out.splitlines()[2:]]
    assert keys == ["id", "description", "tool", "args", "deps", "output", "timeout"]


def test_canonical_fmt_is_idempotent():
    assert formatted(EXPECTED) == EXPECTED


SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-5, 5),
    st.text(alphabet="ab $#†\\.:-{}[]'\"\n", max_size=8),
    st.sampled_from(["$state.a", "†input.b", "x $state.c y", "#a.head=3", "yes", "no", "1.5", "~", "- x"]),
)
ARGS = st.recursive(
    SCALARS,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text("abc", min_size=1, max_size=3), inner, max_size=3)
    ),
    max_leaves=8,
)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["tool", "llm"]), ARGS), min_size=1, max_size=3), st.booleans())
def test_random_documents_round_trip(steps, as_yaml):
    document = {"steps": [{"id": f"s{i}", kind: "x", "args": {"a": args}} for i, (kind, args) in enumerate(steps)]}
    text = json.dumps(document, ensure_ascii=False)
    if as_yaml:
        text = formatted(text)
    once = formatted(text)
    assert formatted(once) == once


def test_fmt_w_keeps_a_json_file_json(tmp_path):
    shutil.copy(ROOT / "examples" / "oauth.json", tmp_path / "o.json")
    assert run_dagplan(tmp_path, "fmt", "-w", "o.json").returncode == 0
    written = json.loads((tmp_path / "o.json").read_text())  # JSON still, the canonical keys
    assert written["dagplan"] == 1 and written["steps"][0]["id"] == "E1"
    assert run_dagplan(tmp_path, "fmt", "--check", "o.json").returncode == 0  # and now canonical


def test_fmt_keeps_a_valid_rewoo_plan_valid_with_the_projects_tools(tmp_path):
    """Issue 62: `fmt -w` gave a ReWOO `Tool[text]`'s text to `input:`, where check, preview and run give it to
    the parameter the configured tools name; fmt now reads it with the project's tools, and without tools it
    refuses rather than write a plan that means something else."""
    (tmp_path / "tools.py").write_text(
        'import dagplan\n\n@dagplan.tool(purity="pure")\ndef search(query: str) -> str:\n'
        '    """Search."""\n    return "found " + query\n'
    )
    text = "Plan: find it\n#E1 = search[cats and dogs]\n"
    (tmp_path / "plan.txt").write_text(text)
    refused = run_dagplan(tmp_path, "fmt", "-w", "plan.txt")
    assert refused.returncode == 1 and "cannot-format" in refused.stderr and "--tools" in refused.stderr
    assert (tmp_path / "plan.txt").read_text() == text  # left as it is
    (tmp_path / "dagplan.toml").write_text('tools = ["tools.py"]\n')
    assert run_dagplan(tmp_path, "check", "plan.txt").returncode == 0
    written = run_dagplan(tmp_path, "fmt", "-w", "plan.txt")
    assert written.returncode == 0, written.stderr
    assert "query: cats and dogs" in (tmp_path / "plan.txt").read_text()
    again = run_dagplan(tmp_path, "check", "plan.txt")
    assert again.returncode == 0, again.stdout + again.stderr
    (tmp_path / "dagplan.toml").unlink()
    (tmp_path / "other.txt").write_text(text)
    given = run_dagplan(tmp_path, "fmt", "other.txt", "--tools", "tools.py")
    assert given.returncode == 0 and "query: cats and dogs" in given.stdout, given.stderr
