"""One test per validation rule: code, line and column (and the message where it matters)."""

from __future__ import annotations

import textwrap

import pytest

from dagplan.dsl import check
from dagplan.dsl.ir import ToolSpec
from as_user import ROOT, run_dagplan, run_dagplan_s, with_example_tools
import json


def run(yaml: str, tools=None):
    return check(text=textwrap.dedent(yaml).lstrip("\n"), name="plan.yaml", tools=tools)


def only(result, code: str):
    found = [d for d in result.diagnostics if d.code == code]
    assert found, f"no {code} in {[d.format() for d in result.diagnostics]}"
    return found[0]


def where(d) -> tuple[int, int]:
    return d.span.line, d.span.col


def test_valid_plan_has_no_diagnostics():
    r = run(
        """
        inputs: {city: {type: string}}
        steps:
          - id: a
            tool: t
            args: {city: †input.city}
            output: †state.a
          - id: b
            tool: t
            args: {x: †state.a}
        """
    )
    assert r.ok and r.diagnostics == ()
    assert r.analysis.order == ("a", "b")


def test_duplicate_id():
    r = run(
        """
        steps:
          - id: a
            tool: t
          - id: a
            tool: u
        """
    )
    d = only(r, "duplicate-id")
    assert where(d) == (4, 9) and d.severity == "error"


@pytest.mark.parametrize("bad", ["../etc", "a/b", "a b", "x" * 65])
def test_unsafe_id(bad):
    r = run(
        f"""
        steps:
          - id: "{bad}"
            tool: t
        """
    )
    codes = {d.code for d in r.errors}
    # the schema may see a bad id first; either way the file is rejected at the id
    assert codes & {"unsafe-id", "schema"}
    d = [d for d in r.errors if d.code in ("unsafe-id", "schema")][0]
    assert d.span.line == 2


def test_unknown_step_in_deps_with_hint():
    r = run(
        """
        steps:
          - id: fetch
            tool: t
          - id: use
            tool: t
            deps: [fetcj]
        """
    )
    d = only(r, "unknown-step")
    assert where(d) == (6, 12)
    assert d.hint == "did you mean 'fetch'?"


def test_unknown_step_in_placeholder_points_inside_string():
    r = run(
        """
        steps:
          - id: E1
            tool: t
          - id: E2
            llm: "Use #E1 and #E3.head=10"
        """
    )
    d = only(r, "unknown-step")
    assert where(d) == (5, 23)


def test_unwritten_state():
    r = run(
        """
        steps:
          - id: a
            tool: t
            output: †state.result
          - id: b
            tool: t
            args: {x: †state.reslt}
        """
    )
    d = only(r, "unwritten-state")
    assert where(d) == (7, 15)
    assert "result" in d.hint


def test_initial_state_counts_as_written():
    r = run(
        """
        initial_state: {config: {depth: 2}}
        steps:
          - id: a
            tool: t
            args: {x: †state.config.depth}
        """
    )
    assert r.ok, r.diagnostics


def test_prefix_overlap_counts_as_written():
    r = run(
        """
        steps:
          - id: a
            tool: t
            output: †state.user
          - id: b
            tool: t
            args: {x: †state.user.name}
            output: †state.profile.name
          - id: c
            tool: t
            args: {x: †state.profile}
        """
    )
    assert r.ok, r.diagnostics
    assert r.analysis.deps["b"] == ("a",) and r.analysis.deps["c"] == ("b",)


def test_unknown_input():
    r = run(
        """
        inputs: {city: {type: string}}
        steps:
          - id: a
            tool: t
            args: {x: "in †input.cty"}
        """
    )
    d = only(r, "unknown-input")
    assert where(d) == (5, 19)
    assert d.hint == "did you mean 'city'?"


def test_bad_output_input_root_and_whole_state():
    r = run(
        """
        steps:
          - id: a
            tool: t
            output: †input.x
          - id: b
            tool: t
            output: †state
        """
    )
    bad = [d for d in r.diagnostics if d.code == "bad-output"]
    assert [where(d) for d in bad] == [(4, 13), (7, 13)]


def test_mixed_operators_in_args():
    r = run(
        """
        steps:
          - id: a
            tool: t
            args: {x: "†state.a && †state.b || †state.c"}
        """
    )
    d = only(r, "mixed-operators")
    assert where(d) == (4, 15)


def test_cycle_prints_path():
    r = run(
        """
        steps:
          - id: a
            tool: t
            args: {x: †state.c}
            output: †state.a
          - id: b
            tool: t
            args: {x: †state.a}
            output: †state.b
          - id: c
            tool: t
            args: {x: †state.b}
            output: †state.c
        """
    )
    d = only(r, "cycle")
    assert d.message == "dependency cycle: a -> b -> c -> a"
    assert where(d) == (2, 9)


def test_self_dependency_is_a_cycle():
    r = run(
        """
        steps:
          - id: a
            tool: t
            deps: [a]
        """
    )
    d = only(r, "cycle")
    assert "depends on itself" in d.message and where(d) == (2, 9)


def test_conflicting_writers():
    r = run(
        """
        steps:
          - id: a
            tool: t
            output: †state.x
          - id: b
            tool: t
            output: †state.x.y
        """
    )
    d = only(r, "conflicting-writers")
    assert where(d) == (7, 13)
    assert "'a' and 'b'" in d.message


def test_seven_writers_of_one_path_are_one_error_naming_them_all():
    """An agent's plan with seven steps writing one path: one diagnostic, not 21 pairs."""
    steps = "".join(f"  - id: s{i}\n    tool: t\n    output: †state.out\n" for i in range(7))
    found = [d for d in check("steps:\n" + steps, name="plan.yaml").diagnostics if d.code == "conflicting-writers"]
    assert len(found) == 1, [d.message for d in found]
    assert "written by 7 steps that are not exclusive: 's0', 's1', 's2', 's3', 's4', 's5', 's6'" in found[0].message


def test_exclusive_writers_are_a_join():
    r = run(
        """
        steps:
          - id: weather
            tool: getWeather
            output: †state.sunny || †state.notSunny
          - id: park
            tool: findPark
            args: {w: †state.sunny}
            output: †state.suggestion
          - id: movie
            tool: findMovie
            args: {w: †state.notSunny}
            output: †state.suggestion
          - id: present
            tool: t
            args: {s: †state.suggestion}
        """
    )
    assert r.ok, [d.format() for d in r.diagnostics]
    assert r.analysis.groups == (("weather",), ("movie", "park"), ("present",))


def test_same_branch_writers_still_conflict():
    r = run(
        """
        steps:
          - id: weather
            tool: t
            output: †state.sunny || †state.notSunny
          - id: park
            tool: t
            args: {w: †state.sunny}
            output: †state.suggestion
          - id: beach
            tool: t
            args: {w: †state.sunny}
            output: †state.suggestion
        """
    )
    assert only(r, "conflicting-writers")


TOOLS = {
    "getWeather": ToolSpec(
        "getWeather",
        parameters={
            "type": "object",
            "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
            "required": ["city"],
        },
    ),
    "summarize": ToolSpec("summarize", parameters={"type": "object", "properties": {"text": {"type": "string"}}}),
}


def test_unknown_tool_with_hint():
    r = run(
        """
        steps:
          - id: a
            tool: getWether
            args: {city: Oslo}
        """,
        tools=TOOLS,
    )
    d = only(r, "unknown-tool")
    assert where(d) == (3, 11) and d.hint == "did you mean 'getWeather'?"


def test_unknown_tool_in_llm_tools_list():
    r = run(
        """
        steps:
          - id: a
            llm: Summarize
            tools: [summarize, sumarise]
        """,
        tools=TOOLS,
    )
    d = only(r, "unknown-tool")
    assert where(d) == (4, 24)


def test_missing_required_argument():
    r = run(
        """
        steps:
          - id: a
            tool: getWeather
            args: {days: 3}
        """,
        tools=TOOLS,
    )
    d = only(r, "bad-argument")
    assert "needs argument 'city'" in d.message and where(d) == (4, 11)


def test_unknown_argument():
    r = run(
        """
        steps:
          - id: a
            tool: getWeather
            args: {city: Oslo, cty: Rome}
        """,
        tools=TOOLS,
    )
    d = only(r, "bad-argument")
    assert "no argument 'cty'" in d.message and where(d) == (4, 29)


def test_literal_of_wrong_type():
    r = run(
        """
        steps:
          - id: a
            tool: getWeather
            args: {city: Oslo, days: three}
        """,
        tools=TOOLS,
    )
    d = only(r, "bad-argument")
    assert "must be integer, not string" in d.message and where(d) == (4, 30)


def test_input_reference_of_wrong_type():
    r = run(
        """
        inputs: {n: {type: boolean}}
        steps:
          - id: a
            tool: getWeather
            args: {city: Oslo, days: †input.n}
        """,
        tools=TOOLS,
    )
    d = only(r, "bad-argument")
    assert "not boolean" in d.message and where(d) == (5, 30)


def test_integer_literal_fits_number_parameter():
    tools = {"pay": ToolSpec("pay", parameters={"type": "object", "properties": {"amount": {"type": "number"}}})}
    r = run(
        """
        steps:
          - id: a
            tool: pay
            args: {amount: 5}
        """,
        tools=tools,
    )
    assert r.ok, r.diagnostics


def test_forward_dep_in_steps_dialect():
    r = check(
        text='{"task_summary": "x", "steps": [\n'
        '  {"id": "E1", "agent": "search", "task": "a", "deps": ["E2"]},\n'
        '  {"id": "E2", "agent": "coder", "task": "b"}\n]}\n',
        name="plan.json",
    )
    d = only(r, "forward-dep")
    assert d.span.line == 2


def test_parallel_groups_mismatch_is_a_warning_showing_both():
    r = check(
        text='{"task_summary": "x", "steps": [\n'
        '  {"id": "E1", "agent": "search", "task": "a"},\n'
        '  {"id": "E2", "agent": "coder", "task": "b #E1", "deps": ["E1"]}\n],\n'
        ' "parallel_groups": [["E1", "E2"]]}\n',
        name="plan.json",
    )
    d = only(r, "parallel-groups-mismatch")
    assert r.ok and d.severity == "warning" and d.span.line == 5
    assert "[[E1, E2]]" in d.message and "[[E1], [E2]]" in d.message


def test_unused_output_warning():
    r = run(
        """
        steps:
          - id: a
            tool: t
            output: †state.orphan
          - id: b
            tool: t
            output: †state.final
        result: †state.final
        """
    )
    d = only(r, "unused-output")
    assert r.ok and d.severity == "warning" and where(d) == (4, 13)


def test_placeholder_counts_as_reading_an_output():
    r = run(
        """
        steps:
          - id: a
            tool: t
            output: †state.raw
          - id: b
            llm: "Summarize #a.head=100"
        """
    )
    assert r.diagnostics == ()


def test_dead_step_warning():
    r = run(
        """
        steps:
          - id: a
            tool: t
            output: †state.x
          - id: noise
            tool: t
            args: {x: †state.x}
          - id: log
            tool: t
            purity: side_effect
          - id: b
            tool: t
            args: {x: †state.x}
            output: †state.final
        result: †state.final
        """
    )
    dead = [d for d in r.diagnostics if d.code == "dead-step"]
    assert r.ok and [where(d) for d in dead] == [(5, 9)]


def test_all_diagnostics_collected_and_sorted():
    r = run(
        """
        steps:
          - id: a
            tool: t
            args: {x: †state.nope}
            deps: [zz]
          - id: a
            tool: t
        """
    )
    codes = [d.code for d in r.diagnostics]
    assert codes == ["unwritten-state", "unknown-step", "duplicate-id"]
    assert [where(d)[0] for d in r.diagnostics] == [4, 5, 6]


def test_a_trigger_that_would_run_an_acting_step_after_a_failure_or_a_refusal_is_a_warning():
    from dagplan.dsl.ir import ToolSpec

    tools = {"read": ToolSpec("read", purity="pure"), "write": ToolSpec("write", purity="side_effect")}
    text = ("steps:\n  - {id: ok, gate: {question: go?}, output: $state.ok}\n"
            "  - {id: r, tool: read, output: $state.notes}\n"
            "  - {id: w, tool: write, args: {x: $state.notes}, deps: [ok], trigger: all_done, output: $state.w}\n"
            "  - {id: fine, tool: write, args: {x: $state.notes}, output: $state.f}\n")  # fmt: skip
    found = [d for d in check(text=text, name="p.yaml", tools=tools).diagnostics if d.code == "acts-on-failure"]
    assert len(found) == 1 and found[0].severity == "warning" and "step 'w' acts on the world" in found[0].message
    assert "the gate 'ok' was refused" in found[0].message and found[0].span.line == 4
    assert not [
        d
        for d in check(text=text.replace("write", "read"), name="p.yaml", tools=tools).diagnostics
        if d.code == "acts-on-failure"
    ]  # a step that reads may run after a failure


OPTIONAL = """inputs:
  city: {type: string}
steps:
  - {id: w, tool: getWeather, args: {city: †input.city}, output: †state.sunny || †state.rainy}
  - {id: park, tool: findPark, args: {weather: †state.sunny}, output: †state.park}
  - id: a
    tool: presentSuggestion
    args: {suggestion: '†state.park || "no park today"'}
    output: †state.a
  - {id: b, tool: presentSuggestion, args: {suggestion: "Park: †state.park"}, output: †state.b, trigger: all_done}
  - {id: c, tool: presentSuggestion, args: {suggestion: "Park: †state.park"}, output: †state.c}
result: "†state.a || †state.b"
"""


def test_an_unread_output_of_a_side_effect_is_not_a_warning(tmp_path):
    root = with_example_tools(tmp_path)
    (root / "p.yaml").write_text("steps:\n  - {id: pay, tool: processPayment, args: {amount: 5}, output: †state.paid}\n"
                                 "  - {id: w, tool: presentSuggestion, args: {suggestion: Rome}, output: †state.w}\n"
                                 "result: †state.w\n")  # fmt: skip
    done = run_dagplan(root, "check", "p.yaml", "--tools", "tools.py", "--strict")
    assert done.returncode == 0 and "unused-output" not in done.stdout, done.stdout


def test_a_misspelt_reference_root_gets_a_did_you_mean(tmp_path):
    root = with_example_tools(tmp_path)
    (root / "p.yaml").write_text("inputs:\n  city: {type: string}\nsteps:\n"
                                 "  - {id: w, tool: getWeather, args: {city: †inputs.city}, output: †state.w}\n")  # fmt: skip
    done = run_dagplan(root, "check", "p.yaml", "--tools", "tools.py")
    assert done.returncode == 1 and "did you mean †input?" in done.stdout, done.stdout


def test_str_of_plan_invalid_shows_every_problem_in_file_order():
    import dagplan

    try:
        dagplan.load(text="steps: [{id: a, tool: t, args: {x: †state.nope}}, {id: a, tool: t}]")
    except dagplan.PlanInvalid as exc:
        text = str(exc)
    lines = text.splitlines()
    assert lines[0] == "2 errors:"
    assert "unwritten-state" in lines[1] and "duplicate-id" in text.split("unwritten-state")[1], text
    assert "CheckResult" in dagplan.__all__ and dagplan.CheckResult.__name__ == "CheckResult"


def test_optional_reads_a_default_a_trigger_rule_and_a_warning_for_neither(tmp_path):
    root = with_example_tools(tmp_path)
    (root / "p.yaml").write_text(OPTIONAL, encoding="utf-8")
    checked = run_dagplan(root, "check", "p.yaml", "--tools", "tools.py")
    assert checked.returncode == 0, checked.stdout
    warnings = [line for line in checked.stdout.splitlines() if "maybe-unset" in line]
    assert len(warnings) == 1 and warnings[0].startswith(
        "p.yaml:11:64: warning maybe-unset: step 'c' reads †state.park"
    )
    assert "'w' writes †state.sunny" in warnings[0] and 'default (`†state.park || "none"`)' in checked.stdout
    ran = run_dagplan(root, "run", "p.yaml", "--tools", "tools.py", "-i", "city=Paris", "--format", "json")
    steps = json.loads(ran.stdout)["steps"]
    assert steps["a"]["output"] == "Today I suggest no park today."
    assert (steps["b"]["status"], steps["b"]["output"]) == ("completed", "Today I suggest Park: null.")
    assert steps["c"]["status"] == "skipped"
    sunny = json.loads(
        run_dagplan(root, "run", "p.yaml", "--tools", "tools.py", "-i", "city=Rome", "--format", "json").stdout
    )
    assert all(sunny["steps"][s]["status"] == "completed" for s in ("park", "a", "b", "c"))
    assert "no park" not in sunny["steps"]["a"]["output"]


def test_a_default_inside_text_reads_like_one_in_an_argument(tmp_path):
    root = with_example_tools(tmp_path)
    plan = (
        OPTIONAL.split("  - id: a")[0]
        + """  - id: t
    tool: presentSuggestion
    args: {suggestion: 'Park: †state.park || †state.sunny || "none" (checked), then †state.park || not'}
    output: †state.t
    trigger: all_done
  - {id: u, tool: presentSuggestion, args: {suggestion: 'Park: †state.park || "none".'}, output: †state.u}
  - {id: v, tool: presentSuggestion, args: {suggestion: 'Park: #park || "none" (#park.head=3 || "-")'}, output: †state.v}
"""
    )
    (root / "p.yaml").write_text(plan, encoding="utf-8")
    checked = run_dagplan(root, "check", "p.yaml", "--tools", "tools.py")
    assert checked.returncode == 0 and "maybe-unset" not in checked.stdout, checked.stdout
    steps = json.loads(
        run_dagplan(root, "run", "p.yaml", "--tools", "tools.py", "-i", "city=Paris", "--format", "json").stdout
    )
    assert steps["steps"]["u"]["output"] == "Today I suggest Park: none.."
    assert steps["steps"]["v"]["output"] == "Today I suggest Park: none (-)."  # a skipped step's #ID, defaulted
    # `|| not` is no literal: it stays text, and under `trigger: all_done` the unwritten read is null
    assert steps["steps"]["t"]["output"] == "Today I suggest Park: none (checked), then null || not."
    sunny = json.loads(
        run_dagplan(root, "run", "p.yaml", "--tools", "tools.py", "-i", "city=Rome", "--format", "json").stdout
    )
    assert "none" not in sunny["steps"]["u"]["output"] and sunny["steps"]["u"]["status"] == "completed"
    assert sunny["steps"]["v"]["output"] == "Today I suggest Park: a walk in the biggest park of Rome (a w…)."


def test_a_default_is_a_literal_written_last(tmp_path):
    root = with_example_tools(tmp_path)
    plan = "inputs: {c: {type: string}}\nsteps:\n  - {id: a, tool: presentSuggestion, args: {suggestion: '%s'}, output: †state.w}\n"
    (root / "p.yaml").write_text(plan % '†input.c || "Rome\\q"', encoding="utf-8")
    bad = run_dagplan(root, "check", "p.yaml", "--tools", "tools.py")
    assert bad.returncode == 1 and "is not a valid literal" in bad.stdout, bad.stdout
    (root / "p.yaml").write_text(plan % '†input.c || "Rome"', encoding="utf-8")
    assert run_dagplan(root, "check", "p.yaml", "--tools", "tools.py").returncode == 0
    import dagplan
    from dagplan.dsl.expr import classify

    for text, default in [("†state.a || 'it\\'s'", "it's"), ("†state.a || †state.b || 3", 3), ("†state.a || null", None),
                          ('†state.a || {"x": 1}', "x")]:  # fmt: skip
        if default == "x":  # a mapping is no literal default: the text is an error, not a silent string
            with pytest.raises(dagplan.PlanInvalid):
                classify(text)
            continue
        node = classify(text)
        assert node.has_default and node.default == default, (text, node)


def test_diagnostics_a_newcomer_needs_causes_first_templates_and_lengths(tmp_path):
    (tmp_path / "p.yaml").write_text(
        """inputs:
  tags: {type: array, items: {type: string}}
steps:
  - {id: summarize, llm: "Summarize †input.tags", model: openai/gpt-4o-mini, output: †state.summary}
  - id: each
    for_each: †input.tags
    max_items: 5
    tool: t
    args: {text: "{{item.body}}", n: †state.summary.length}
    output: †state.r
  - {id: tell, tool: t, args: {text: "#summarise"}, output: †state.told}
result: "†state.r †state.told"
""",
        encoding="utf-8",
    )
    out = run_dagplan(tmp_path, "check", "p.yaml")
    lines = [line for line in out.stdout.splitlines() if line.startswith("p.yaml:")]
    assert "error unknown-step" in lines[0] and "'summarise'" in lines[0], out.stdout  # the cause, first
    assert any("warning foreign-template: step 'each': '{{item.body}}'" in line for line in lines)
    assert "write †item.body" in out.stdout
    length = next(line for line in lines if "length-key" in line)
    assert "†state.summary.length reads a key 'length' of †state.summary, which is text" in length
    assert "len(†state.summary)" in out.stdout


def test_a_type_error_shows_the_shape_it_wants(tmp_path):
    root = with_example_tools(tmp_path)
    (root / "p.yaml").write_text(
        "inputs:\n  amount: {type: number}\n"
        "  trip: {type: object, properties: {city: {type: string}, days: {type: integer}}, required: [city]}\n"
        "steps:\n  - {id: p, tool: processPayment, args: {amount: \u2020input.trip}, output: \u2020state.p}\n"
        "  - {id: q, tool: findPark, args: {}, output: \u2020state.q}\nresult: \u2020state.p \u2020state.q\n",
        encoding="utf-8",
    )
    checked = run_dagplan(root, "check", "p.yaml", "--tools", "tools.py")
    assert checked.returncode == 1
    assert "hint: e.g. amount: 12.5; did you mean \u2020input.trip.days?" in checked.stdout, checked.stdout
    assert "hint: add it: args: {weather: {key: value}}" in checked.stdout  # any keys: one written out
    (root / "p.yaml").write_text(
        "inputs:\n  amount: {type: number}\n  tier: {enum: [gold, silver]}\n"
        "  trip: {type: object, properties: {city: {type: string}, days: {type: integer}}, required: [city]}\n"
        "steps:\n  - {id: p, tool: processPayment, args: {amount: \u2020input.amount}, output: \u2020state.p}\n",
        encoding="utf-8",
    )
    ran = run_dagplan(
        root, "run", "p.yaml", "--tools", "tools.py", "-i", "amount=x", "-i", "trip=[1]", "-i", "tier=bronze"
    )
    assert ran.returncode == 2 and "is not of type" not in ran.stderr, ran.stderr
    assert (
        "error bad-input: input amount must be a number, not a string\n    hint: e.g. --input amount='12.5'"
        in ran.stderr
    )
    assert (
        'input trip must be a mapping, not a list\n    hint: e.g. --input trip=\'{"city": "text", "days": 3}\''
        in ran.stderr
    )
    assert "input tier must be one of gold, silver, not 'bronze'\n    hint: e.g. --input tier=gold" in ran.stderr
    (root / "bad.yaml").write_text("steps:\n  - {id: a, tool: getWeather, args: {city: x}, retry: [3]}\n"
                                   "  - {id: b, tool: getWeather, args: {city: x}, retry: fast}\n")  # fmt: skip
    schema = run_dagplan(root, "check", "bad.yaml", "--tools", "tools.py")
    assert "retry[0] in step 'a' must be a mapping, not a number\n" in schema.stdout
    assert "retry in step 'b' must be a mapping or a list, not a string ('fast')" in schema.stdout, schema.stdout
    assert schema.stdout.count("hint: e.g. ") == 2 and "is not valid under" not in schema.stdout


def test_a_tool_that_branches_says_so_and_check_holds_its_callers_to_it(tmp_path):
    root = with_example_tools(tmp_path)
    (root / "p.yaml").write_text("steps:\n  - {id: w, tool: getWeather, args: {city: Oslo}, output: \u2020state.w}\n")
    checked = run_dagplan(root, "check", "p.yaml", "--tools", "tools.py")
    assert checked.returncode == 1, checked.stdout
    assert ("p.yaml:2:59: error bad-output: tool 'getWeather' answers one of 2 outcomes, but the output of step 'w'"
            " names 1") in checked.stdout  # fmt: skip
    assert "hint: one path per outcome, in order: output: \u2020state.a || \u2020state.b" in checked.stdout
    listed = json.loads(run_dagplan(root, "tools", "list", "--tools", "tools.py", "--format", "json").stdout)
    assert next(t for t in listed if t["name"] == "getWeather")["alternatives"] == 2
    recorded = run_dagplan(root, "run", str(ROOT / "examples" / "weather.yaml"), "--tools", "tools.py", "-i", "city=Oslo",
                   "--record", "c.json")  # fmt: skip
    assert recorded.returncode == 0
    (root / "tools.py").unlink()  # a replay checks against the recorded catalog: the rule holds there too
    replayed = run_dagplan(root, "run", "p.yaml", "--replay", "c.json")
    assert replayed.returncode == 1 and "answers one of 2 outcomes" in replayed.stderr, replayed.stderr


def test_a_misspelt_reference_root_is_said_not_kept_as_text_silently(tmp_path):
    (tmp_path / "p.yaml").write_text(
        "steps:\n  - id: get\n    tool: fetchIssue\n    args: {n: 1}\n    output: $state.issue\n"
        "  - id: label\n    tool: labelIssue\n"
        '    args: {issue: $state.issue, label: $stat.kind, price: "$5.00 or $USD.rate", note: "ask $imput.who"}\n'
        "    output: $state.labelled\nresult: $state.labelled\n"
    )
    done = run_dagplan(tmp_path, "check", "p.yaml")
    assert done.returncode == 0  # a warning: a literal dollar is text a plan may mean
    assert "p.yaml:8:40: warning misspelt-reference: step 'label': '$stat.kind' is text" in done.stdout, done.stdout
    # quoted as the author spells references ($), not with the dagger the author never typed
    assert "did you mean $state.kind?" in done.stdout and "did you mean $input.who?" in done.stdout
    assert done.stdout.count("misspelt-reference") == 2  # not `$USD.rate`: no root is close to USD


def test_a_misspelt_state_path_gets_the_did_you_mean_every_other_name_gets(tmp_path):
    """`unwritten-state` for †state.isue.title: the path a step writes, put in place of the misspelt part."""
    (tmp_path / "p.yaml").write_text(
        "steps:\n  - id: fetch\n    tool: getIssue\n    args: {n: 1}\n    output: $state.issue\n"
        "  - id: label\n    tool: setLabel\n    args: {title: $state.isue.title, whole: $state.isue}\n"
        "    output: $state.done\nresult: $state.done\n"
    )
    done = run_dagplan(tmp_path, "check", "p.yaml")
    assert done.returncode == 1
    assert "hint: did you mean '$state.issue.title'?" in done.stdout, done.stdout  # as the author spells it
    assert "hint: did you mean '$state.issue'?" in done.stdout
    (tmp_path / "q.yaml").write_text("steps:\n  - {id: a, tool: t, args: {x: $state.zzz}, output: $state.issue}\n")
    far = run_dagplan(tmp_path, "check", "q.yaml")
    assert "did you mean" not in far.stdout and "give it a value in `initial_state`" in far.stdout


@pytest.mark.parametrize("word", ["pure", "idempotent"])
def test_a_step_cannot_declare_a_side_effect_tool_pure(tools_project, word):
    (tools_project / "p.yaml").write_text(
        f"steps:\n  - id: refund\n    tool: issueRefund\n    args: {{customerId: c, amount: 1}}\n    purity: {word}\n"
    )
    proc = run_dagplan_s(tools_project, "check", "p.yaml", "--tools", "tools.py")
    assert proc.returncode == 1 and "p.yaml:5:13: error laxer-purity" in proc.stdout, proc.stdout
    stricter = (tools_project / "p.yaml").read_text().replace("issueRefund", "checkBillingHistory").replace(
        "args: {customerId: c, amount: 1}", "args: {customerId: c}").replace(word, "side_effect")  # fmt: skip
    (tools_project / "q.yaml").write_text(stricter)
    assert run_dagplan_s(tools_project, "check", "q.yaml", "--tools", "tools.py").returncode == 0


@pytest.mark.parametrize("timeout", [".inf", "-.inf", ".nan", "99999999d", "367d", "1e400", '"9999999999h"'])
def test_a_duration_past_the_bound_is_a_check_error(tools_project, timeout):
    (tools_project / "g.yaml").write_text(f"steps:\n  - id: approve\n    gate: {{question: ok?, timeout: {timeout}}}\n")
    (tools_project / "t.yaml").write_text(
        f"steps:\n  - id: a\n    tool: checkBillingHistory\n    args: {{customerId: c}}\n    timeout: {timeout}\n"
    )
    for name in ("g.yaml", "t.yaml"):
        proc = run_dagplan_s(tools_project, "check", name, "--tools", "tools.py")
        assert proc.returncode == 1 and "duration" in proc.stdout, (timeout, proc.stdout)
    (tools_project / "ok.yaml").write_text("steps:\n  - id: approve\n    gate: {question: ok?, timeout: 366d}\n")
    assert run_dagplan_s(tools_project, "check", "ok.yaml").returncode == 0
