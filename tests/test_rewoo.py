"""ReWOO's plan text (``#E1 = Tool[arguments]``) as a dialect: read, bound to the catalog, checked like the others,
with every diagnostic at its line and column; through the API and the CLI as a user would."""

from __future__ import annotations

import importlib
import json

import pytest

from dagplan.dsl import check
from dagplan.dsl.errors import LoadError
from dagplan.dsl.ir import ToolSpec

load = importlib.import_module("dagplan.dsl.load")
fmt = importlib.import_module("dagplan.dsl.fmt")

PAPER = """Plan: Search for more information about Colorado orogeny.
#E1 = Wikipedia[Colorado orogeny]
Plan: Find out the elevation range of the eastern sector.
#E2 = LLM[What is the elevation range of the area that the eastern sector extends into? Given context: #E1]
"""


def _tool(name: str, required: list[str], **types: str) -> ToolSpec:
    properties = {arg: {"type": kind} for arg, kind in types.items()}
    return ToolSpec(name, parameters={"type": "object", "properties": properties, "required": required})


TOOLS = {
    "Wikipedia": _tool("Wikipedia", ["query"], query="string"),
    "search": _tool("search", ["query"], query="string", limit="integer"),
    "write": _tool("write", ["path", "text"], path="string", text="string"),
}


def test_the_papers_example_is_a_plan():
    doc = load.load_text(PAPER, "paper.txt")
    assert doc.dialect == "rewoo"
    first, second = doc.data["steps"]
    assert first == {"id": "E1", "description": "Search for more information about Colorado orogeny.",
                     "tool": "Wikipedia", "args": {"input": "Colorado orogeny"}, "output": "$state.E1"}  # fmt: skip
    assert second["llm"].endswith("Given context: #E1") and second["output"] == "$state.E2"
    assert doc.data["result"] == "$state.E2"
    result = check(text=PAPER, name="paper.txt", tools=TOOLS)
    assert result.ok, [d.format() for d in result.diagnostics]
    assert result.plan.steps[0].args["query"] is not None  # the one text went to the tool's one parameter
    assert [s.id for s in result.plan.steps] == ["E1", "E2"]
    assert ("E1", "E2") in {(a, b) for b, deps in result.analysis.deps.items() for a in deps}


def test_arguments_as_pairs_json_and_whole_references():
    text = ('Here is my plan.\n\n```\n#E1 = search[query="Rome, Italy", limit=3]\n'
            '#E2 = write[{"path": "notes/rome.md", "text": "#E1"}]\n'
            "#E3 = write[path=out.md, text=Summary: #E1.summary and #E2.head=20]\n```\nThat is all.")  # fmt: skip
    result = check(text=text, tools=TOOLS)
    assert result.ok, [d.format() for d in result.diagnostics]
    data = result.document.data["steps"]
    assert data[0]["args"] == {"query": "Rome, Italy", "limit": 3}  # JSON where it reads as JSON
    assert data[1]["args"] == {"path": "notes/rome.md", "text": "$state.E1"}  # a whole #E1: the value, typed
    assert data[2]["args"] == {"path": "out.md", "text": "Summary: #E1.summary and #E2.head=20"}


def test_only_en_refers_to_anything():
    text = "#E1 = search[query=#python costs $state of †input and $5]"
    data = load.load_text(text).data
    assert data["steps"][0]["args"]["query"] == "\\#python costs \\$state of \\†input and $5"
    result = check(text=text, tools=TOOLS)
    assert result.ok, [d.format() for d in result.diagnostics]


def test_diagnostics_point_into_the_text():
    text = "Plan: look it up\n#E1 = search[query=x]\nPlan: store it\n#E2 = write[path=a.md, txt=#E1]\n#E3 = nope[#E9]"
    result = check(text=text, name="plan.txt", tools=TOOLS)
    found = {d.code: d for d in result.diagnostics if d.severity == "error"}
    assert set(found) >= {"bad-argument", "unknown-tool"}, [d.format() for d in result.diagnostics]
    where = {(d.code, d.span.line, d.span.col) for d in result.diagnostics}
    assert ("unknown-tool", 5, 7) in where  # "nope", line 5 col 7
    assert any(code == "bad-argument" and line == 4 for code, line, _ in where)
    assert all(d.span.file == "plan.txt" and d.span.line > 0 for d in result.diagnostics)
    unknown = check(text="#E1 = search[query=x]\n#E2 = LLM[sum up #E7]", tools=TOOLS)
    step = next(d for d in unknown.diagnostics if d.code == "unknown-step")
    assert (step.span.line, step.span.col) == (2, 18)  # the #E7 inside the prompt


def test_one_text_for_a_tool_of_several_parameters_says_how_to_write_it():
    result = check(text="#E1 = write[hello]", name="p.txt", tools=TOOLS)
    error = next(d for d in result.diagnostics if d.code == "bad-argument")
    assert "path, text" in error.message and "write[name=value" in error.hint
    assert (error.span.line, error.span.col) == (1, 13)


@pytest.mark.parametrize(
    "text, where",
    [
        ("#E1 = search[query=x\n", (1, 13)),  # never closed
        ('Plan: a\n#E1 = search[{"query": }]', (2, 24)),  # braces that are no JSON object
    ],
)
def test_broken_lines_are_a_located_error(text, where):
    with pytest.raises(LoadError) as caught:
        load.load_text(text, "p.txt")
    head = caught.value.headline
    assert head.code == "rewoo-syntax" and (head.span.line, head.span.col) == where and head.hint


def test_a_yaml_plan_with_such_a_comment_stays_yaml():
    text = "steps:\n  - id: a\n    tool: search\n    args: {query: x}\n#E1 = search[query=y]\n"
    assert load.load_text(text).dialect == "canonical"


def test_prose_without_lines_is_still_no_plan():
    with pytest.raises(LoadError) as caught:
        load.load_text("I could not make a plan, sorry.")
    assert caught.value.headline.code == "unknown-dialect"
    assert "#E1 = Tool[arguments]" in caught.value.headline.hint


def test_many_lines_read_in_linear_time_and_within_the_limits():
    from dagplan.dsl.errors import Limits

    many = "".join(f"#E{i} = search[query=q{i}]\n" for i in range(1, 3001))
    assert len(load.load_text(many).data["steps"]) == 3000
    with pytest.raises(LoadError) as caught:
        load.load_text(many, limits=Limits(max_nodes=100))
    assert caught.value.headline.code == "rewoo-syntax" and caught.value.headline.span.line == 101
    for deep in ('{"a": ' + "[" * 100 + "]" * 100 + "}", '{"a": ' + "[" * 5000 + "]" * 5000 + "}"):
        with pytest.raises(LoadError) as caught:  # past the depth limit, or past Python's recursion: said, at the text
            load.load_text(f"Plan: x\n#E1 = search[{deep}]")
        assert caught.value.headline.span.line == 2 and caught.value.headline.code in ("too-deep", "rewoo-syntax")
    unclosed = "#E1 = search[" + "[" * 50_000  # brackets that never close: an error, not a hang
    with pytest.raises(LoadError):
        load.load_text(unclosed)


def test_fmt_writes_it_as_a_canonical_plan():
    out = fmt.format_document(load.load_text(PAPER), tools=TOOLS)
    again = load.load_text(out)
    assert again.dialect == "canonical" and [s["id"] for s in again.data["steps"]] == ["E1", "E2"]
    assert again.data["steps"][0]["args"] == {"query": "Colorado orogeny"}  # as check and run read it
    assert fmt.format_document(again) == out
    with pytest.raises(LoadError, match="Wikipedia.text. gives its text to a parameter only its tool says"):
        fmt.format_document(load.load_text(PAPER))  # without the catalog: refused, never another meaning


def test_the_cli_checks_and_runs_a_rewoo_file(tmp_path):
    from as_user import run_dagplan

    (tmp_path / "tools.py").write_text(
        "from dagplan import tool\n\n"
        "@tool\ndef lookup(query: str) -> str:\n    'Look a word up.'\n    return f'{query} is a range of mountains'\n\n"
        "@tool\ndef shout(text: str) -> str:\n    'Say it louder.'\n    return text.upper()\n"
    )
    (tmp_path / "plan.txt").write_text("Plan: look it up\n#E1 = lookup[Colorado]\nPlan: say it\n#E2 = shout[#E1]\n")
    checked = run_dagplan(tmp_path, "check", "plan.txt", "--tools", "tools.py", "--format", "json")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert json.loads(checked.stdout)["files"][0]["valid"] is True
    ran = run_dagplan(tmp_path, "run", "plan.txt", "--tools", "tools.py", state="s")
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "COLORADO IS A RANGE OF MOUNTAINS" in ran.stdout
    broken = tmp_path / "broken.txt"
    broken.write_text("#E1 = lookup[Colorado]\n#E2 = shout[text=#E1, loud=yes]\n")
    refused = run_dagplan(tmp_path, "check", "broken.txt", "--tools", "tools.py")
    assert refused.returncode == 1 and "broken.txt:2:" in refused.stdout + refused.stderr


def test_earlier_outputs_written_unquoted_in_json_or_a_list_pass_those_outputs():
    """Issue 63: `[#E2]` inside JSON arguments was refused, so a list of earlier outputs could not be passed."""
    text = (PAPER + '#E3 = search[{"query": [#E1, #E2], "limit": 3}]\n#E4 = search[query=[#E1, "#E2"], limit=2]\n'
            + '#E5 = search[{"query": "keep #E1 as text"}]\n')  # fmt: skip
    document = load.load_text(text)
    steps = {s["id"]: s for s in document.data["steps"]}
    assert steps["E3"]["args"] == {"query": ["$state.E1", "$state.E2"], "limit": 3}
    assert steps["E4"]["args"] == {"query": ["$state.E1", "$state.E2"], "limit": 2}
    assert steps["E5"]["args"]["query"] == "keep #E1 as text"  # inside a string: a placeholder, as before
    bad = PAPER + '#E3 = search[{"query": [#E1, #E2], "limit": 3x}]\n'
    with pytest.raises(LoadError) as caught:
        load.load_text(bad)
    headline = caught.value.headline
    assert headline.code == "rewoo-syntax" and headline.span.line == 5
    assert bad.splitlines()[4][headline.span.col - 1] == "x"  # at the author's column, quotes added or not
