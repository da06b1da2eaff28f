"""One test per validation rule: code, line and column (and the message where it matters)."""

from __future__ import annotations

import textwrap

import pytest

from dagplan.dsl import check
from dagplan.dsl.ir import ToolSpec


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
