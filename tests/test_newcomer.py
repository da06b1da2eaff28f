"""What a newcomer tripped on (issue 26), each through the CLI as they met it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def cli(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    return subprocess.run([sys.executable, "-m", "dagplan", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=120)  # fmt: skip


def _project(tmp_path: Path) -> Path:
    shutil.copy(ROOT / "examples" / "tools.py", tmp_path / "tools.py")
    return tmp_path


def test_strict_counts_a_file_with_warnings_as_invalid(tmp_path):
    root = _project(tmp_path)
    (root / "p.yaml").write_text("steps:\n  - {id: w, tool: presentSuggestion, args: {suggestion: Rome}, output: †state.w}\n"
                                 "  - {id: x, tool: presentSuggestion, args: {suggestion: Oslo}, output: †state.x}\n"
                                 "result: †state.w\n")  # fmt: skip
    loose = cli(root, "check", "p.yaml", "--tools", "tools.py")
    assert loose.returncode == 0 and "1 valid, 0 invalid (0 errors, 1 warning)" in loose.stderr
    strict = cli(root, "check", "p.yaml", "--tools", "tools.py", "--strict")
    assert strict.returncode == 1 and "0 valid, 1 invalid (0 errors, 1 warning)" in strict.stderr


def test_an_unread_output_of_a_side_effect_is_not_a_warning(tmp_path):
    root = _project(tmp_path)
    (root / "p.yaml").write_text("steps:\n  - {id: pay, tool: processPayment, args: {amount: 5}, output: †state.paid}\n"
                                 "  - {id: w, tool: presentSuggestion, args: {suggestion: Rome}, output: †state.w}\n"
                                 "result: †state.w\n")  # fmt: skip
    done = cli(root, "check", "p.yaml", "--tools", "tools.py", "--strict")
    assert done.returncode == 0 and "unused-output" not in done.stdout, done.stdout


def test_a_misspelt_reference_root_gets_a_did_you_mean(tmp_path):
    root = _project(tmp_path)
    (root / "p.yaml").write_text("inputs:\n  city: {type: string}\nsteps:\n"
                                 "  - {id: w, tool: getWeather, args: {city: †inputs.city}, output: †state.w}\n")  # fmt: skip
    done = cli(root, "check", "p.yaml", "--tools", "tools.py")
    assert done.returncode == 1 and "did you mean †input?" in done.stdout, done.stdout


def test_runs_by_status(tmp_path):
    root = _project(tmp_path)
    assert (
        cli(root, "run", str(ROOT / "examples" / "weather.yaml"), "--tools", "tools.py", "-i", "city=Rome").returncode
        == 0
    )
    assert cli(root, "run", str(ROOT / "examples" / "approve_refund.yaml"), "--tools", "tools.py", "-i", "customerId=c",
               "-i", "amount=5", "--no-input").returncode == 3  # fmt: skip
    waiting = json.loads(cli(root, "runs", "--status", "waiting", "--format", "json").stdout)
    assert [r["status"] for r in waiting] == ["waiting"]
    both = json.loads(cli(root, "runs", "--status", "waiting", "--status", "completed", "--format", "json").stdout)
    assert sorted(r["status"] for r in both) == ["completed", "waiting"]
    wrong = cli(root, "runs", "--status", "complete")
    assert wrong.returncode == 2 and "did you mean 'completed'?" in wrong.stderr


def test_fmt_w_keeps_a_json_file_json(tmp_path):
    shutil.copy(ROOT / "examples" / "oauth.json", tmp_path / "o.json")
    assert cli(tmp_path, "fmt", "-w", "o.json").returncode == 0
    written = json.loads((tmp_path / "o.json").read_text())  # JSON still, the canonical keys
    assert written["dagplan"] == 1 and written["steps"][0]["id"] == "E1"
    assert cli(tmp_path, "fmt", "--check", "o.json").returncode == 0  # and now canonical


def test_a_dagplan_key_written_after_the_llm_table_is_caught_at_its_line(tmp_path):
    _project(tmp_path)
    (tmp_path / "dagplan.toml").write_text('model = "x"\n[llm]\napi_base = "http://h"\nstate = "/tmp/s"\n')
    (tmp_path / "p.yaml").write_text("steps:\n  - {id: w, tool: getWeather, args: {city: Rome}}\n")
    done = cli(tmp_path, "check", "p.yaml")
    assert done.returncode == 2
    assert (
        "dagplan.toml:4:1: error config: 'state' is a dagplan setting, but it is inside the [llm] table" in done.stderr
    )


def test_dagplan_plan_without_a_provider_key_says_so_before_any_call(tmp_path):
    root = _project(tmp_path)
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    done = subprocess.run([sys.executable, "-m", "dagplan", "plan", "refund order 42", "--model", "openai/gpt-4o-mini",
                           "--tools", "tools.py"], cwd=root, env={**env, "LITELLM_LOCAL_MODEL_COST_MAP": "True"},
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert "error no-credentials: model 'openai/gpt-4o-mini' (the planner) needs OPENAI_API_KEY" in done.stderr


TWO_GATES = """steps:
  - id: first
    gate: {question: "Go?", choices: [yes, no]}
  - id: second
    gate: {question: "Really?", choices: [yes, no]}
    deps: [first]
"""


def test_run_answer_answers_a_gate_ahead_and_leaves_the_others_waiting(tmp_path):
    root = _project(tmp_path)
    both = cli(root, "run", str(ROOT / "examples" / "approve_refund.yaml"), "--tools", "tools.py", "-i",
               "customerId=c", "-i", "amount=5", "--answer", "approve=approve", "--format", "json")  # fmt: skip
    assert both.returncode == 0, both.stderr
    assert json.loads(both.stdout)["steps"]["refund"]["status"] == "completed"
    (root / "two.yaml").write_text(TWO_GATES)
    half = cli(root, "run", "two.yaml", "--answer", "first=yes", "--no-input", "--format", "json")
    assert half.returncode == 3
    steps = json.loads(half.stdout)["steps"]
    assert steps["first"]["status"] == "completed" and steps["second"]["status"] == "waiting"
    wrong = cli(root, "run", "two.yaml", "--answer", "frist=yes")
    assert wrong.returncode == 2 and "did you mean 'first'?" in wrong.stderr


def test_for_each_over_a_literal_list_with_a_reference_in_it(tmp_path):
    root = _project(tmp_path)
    (root / "fe.yaml").write_text("inputs:\n  city: {type: string}\nsteps:\n  - id: w\n"
                                  "    for_each: [Rome, †input.city]\n    tool: getWeather\n    args: {city: †item}\n"
                                  "    catch: [{errors: ['*'], output: †state.odd}]\n    output: †state.ws\n")  # fmt: skip
    checked = cli(root, "check", "fe.yaml", "--tools", "tools.py", "--strict")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    done = cli(root, "run", "fe.yaml", "--tools", "tools.py", "-i", "city=Lima", "--format", "json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["steps"]["w"]["output"][0] == {"city": "Rome", "sky": "sunny"}
    shown = cli(root, "preview", "fe.yaml", "--tools", "tools.py")
    assert "(at most 2)" in shown.stdout


def test_at_last_and_dash_name_the_newest_run(tmp_path):
    root = _project(tmp_path)
    assert cli(root, "runs", "show", "@last").returncode == 2  # no runs yet: said, exit 2
    first = cli(root, "run", str(ROOT / "examples" / "weather.yaml"), "--tools", "tools.py", "-i", "city=Rome")
    waiting = cli(root, "run", str(ROOT / "examples" / "approve_refund.yaml"), "--tools", "tools.py",
                  "-i", "customerId=c", "-i", "amount=5")  # fmt: skip
    assert (first.returncode, waiting.returncode) == (0, 3)
    newest = json.loads(cli(root, "runs", "--format", "json").stdout)[0]["id"]
    shown = cli(root, "runs", "show", "@last")
    assert f"Run {newest}: waiting" in shown.stdout, shown.stdout + shown.stderr
    assert "plan_started" in cli(root, "events", "-").stdout
    step = json.loads(cli(root, "runs", "--format", "json").stdout)[0]["waiting"][0]["step"]
    assert cli(root, "answer", "@last", step, "approve").returncode == 0
    assert cli(root, "resume", "@last", "--tools", "tools.py").returncode == 0


def test_runs_prune_removes_old_finished_runs_and_never_a_waiting_one(tmp_path):
    root = _project(tmp_path)
    cli(root, "run", str(ROOT / "examples" / "weather.yaml"), "--tools", "tools.py", "-i", "city=Rome")
    cli(root, "run", str(ROOT / "examples" / "approve_refund.yaml"), "--tools", "tools.py", "-i", "customerId=c",
        "-i", "amount=5")  # fmt: skip
    assert "0 runs pruned" in cli(root, "runs", "prune", "--older-than", "30d").stderr  # none that old
    listed = cli(root, "runs", "prune", "--older-than", "0s", "--dry-run")
    assert listed.returncode == 0 and "1 run would be pruned" in listed.stderr and "completed" in listed.stdout
    assert len(json.loads(cli(root, "runs", "--format", "json").stdout)) == 2  # a dry run removes nothing
    assert "1 run pruned" in cli(root, "runs", "prune", "--older-than", "0s").stderr
    left = json.loads(cli(root, "runs", "--format", "json").stdout)
    assert [r["status"] for r in left] == ["waiting"]
    asked = cli(root, "runs", "prune", "--older-than", "0s", "--status", "waiting")
    assert "1 run pruned" in asked.stderr and json.loads(cli(root, "runs", "--format", "json").stdout) == []


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


def test_the_configuration_reference_names_every_key_with_what_it_is_for():
    """The reference page's table is generated (docs/hooks.py) from KEYS and KEY_MEANINGS: every key has both."""
    from dagplan.interpreter.core.config import KEY_MEANINGS, KEYS, key_table

    assert set(KEY_MEANINGS) == set(KEYS) and all(KEY_MEANINGS.values())
    assert all(f"| `{k}` | {KEY_MEANINGS[k]} |" in key_table() for k in KEYS)
    assert "<!-- generated: configuration-keys" in (ROOT / "docs" / "reference" / "configuration.md").read_text()


def test_a_lazy_plan_not_approved_says_how_to_run_it_with_the_flags_given(tmp_path):
    root = _project(tmp_path)
    shown = cli(root, "run", str(ROOT / "examples" / "payment_lazy.yaml"), "--tools", "tools.py", "-i", "amount=50")
    assert shown.returncode == 1 and "nothing ran" in shown.stderr
    line = next(x for x in shown.stderr.splitlines() if x.startswith("To run it: "))
    assert line.endswith("--tools tools.py -i amount=50 --yes"), line
    approved = cli(root, *line.removeprefix("To run it: dagplan ").split())
    assert approved.returncode == 0, approved.stderr


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


def test_optional_reads_a_default_a_trigger_rule_and_a_warning_for_neither(tmp_path):
    root = _project(tmp_path)
    (root / "p.yaml").write_text(OPTIONAL, encoding="utf-8")
    checked = cli(root, "check", "p.yaml", "--tools", "tools.py")
    assert checked.returncode == 0, checked.stdout
    warnings = [line for line in checked.stdout.splitlines() if "maybe-unset" in line]
    assert len(warnings) == 1 and warnings[0].startswith(
        "p.yaml:11:64: warning maybe-unset: step 'c' reads †state.park"
    )
    assert "'w' writes †state.sunny" in warnings[0] and 'default (`†state.park || "none"`)' in checked.stdout
    ran = cli(root, "run", "p.yaml", "--tools", "tools.py", "-i", "city=Paris", "--format", "json")
    steps = json.loads(ran.stdout)["steps"]
    assert steps["a"]["output"] == "Today I suggest no park today."
    assert (steps["b"]["status"], steps["b"]["output"]) == ("completed", "Today I suggest Park: null.")
    assert steps["c"]["status"] == "skipped"
    sunny = json.loads(cli(root, "run", "p.yaml", "--tools", "tools.py", "-i", "city=Rome", "--format", "json").stdout)
    assert all(sunny["steps"][s]["status"] == "completed" for s in ("park", "a", "b", "c"))
    assert "no park" not in sunny["steps"]["a"]["output"]


def test_a_default_inside_text_reads_like_one_in_an_argument(tmp_path):
    root = _project(tmp_path)
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
    checked = cli(root, "check", "p.yaml", "--tools", "tools.py")
    assert checked.returncode == 0 and "maybe-unset" not in checked.stdout, checked.stdout
    steps = json.loads(cli(root, "run", "p.yaml", "--tools", "tools.py", "-i", "city=Paris", "--format", "json").stdout)
    assert steps["steps"]["u"]["output"] == "Today I suggest Park: none.."
    assert steps["steps"]["v"]["output"] == "Today I suggest Park: none (-)."  # a skipped step's #ID, defaulted
    # `|| not` is no literal: it stays text, and under `trigger: all_done` the unwritten read is null
    assert steps["steps"]["t"]["output"] == "Today I suggest Park: none (checked), then null || not."
    sunny = json.loads(cli(root, "run", "p.yaml", "--tools", "tools.py", "-i", "city=Rome", "--format", "json").stdout)
    assert "none" not in sunny["steps"]["u"]["output"] and sunny["steps"]["u"]["status"] == "completed"
    assert sunny["steps"]["v"]["output"] == "Today I suggest Park: a walk in the biggest park of Rome (a w…)."


def test_trigger_rules_decide_by_what_the_dependencies_did():
    import dagplan

    def ok() -> str:
        return "fine"

    def boom() -> str:
        raise ValueError("broken")

    @dagplan.tool(purity="pure")  # a step that reads may run on a failure's text; one that acts never does
    def join(x: object = None, y: object = None) -> str:
        return f"{x}|{y}"

    @dagplan.tool(purity="side_effect")
    def write(x: object = None) -> str:
        return f"wrote {x}"

    text = """steps:
  - {id: good, tool: ok, output: †state.good}
  - {id: bad, tool: boom, output: †state.bad}
  - {id: all_done, tool: join, args: {x: †state.good, y: †state.bad}, output: †state.r1, trigger: all_done}
  - {id: none_failed, tool: join, args: {x: †state.good, y: †state.bad}, output: †state.r2, trigger: none_failed}
  - {id: one_ok, tool: join, args: {x: †state.bad}, deps: [good, bad], output: †state.r3, trigger: one_succeeded}
  - {id: none_ok, tool: join, args: {x: †state.bad}, deps: [bad], output: †state.r4, trigger: one_succeeded}
  - {id: acts, tool: write, args: {x: †state.bad}, output: †state.r5, trigger: all_done}
"""
    tools = {"ok": ok, "boom": boom, "join": join, "write": write}
    result = dagplan.run(dagplan.load(text=text, tools=tools), tools=tools, on_limit_exceeded=lambda *a: False)
    status = {sid: (s.status, s.output) for sid, s in result.steps.items()}
    assert status["all_done"][0] == "completed" and status["all_done"][1].startswith("fine|(FAILED")
    assert status["none_failed"][0] == "skipped"
    assert status["one_ok"][0] == "completed"
    assert status["none_ok"][0] == "skipped"
    assert "one_succeeded" in result.steps["none_ok"].reason
    assert status["acts"][0] == "skipped" and "would act on the failure of bad" in result.steps["acts"].reason


def test_a_default_is_a_literal_written_last(tmp_path):
    root = _project(tmp_path)
    plan = "inputs: {c: {type: string}}\nsteps:\n  - {id: a, tool: presentSuggestion, args: {suggestion: '%s'}, output: †state.w}\n"
    (root / "p.yaml").write_text(plan % '†input.c || "Rome\\q"', encoding="utf-8")
    bad = cli(root, "check", "p.yaml", "--tools", "tools.py")
    assert bad.returncode == 1 and "is not a valid literal" in bad.stdout, bad.stdout
    (root / "p.yaml").write_text(plan % '†input.c || "Rome"', encoding="utf-8")
    assert cli(root, "check", "p.yaml", "--tools", "tools.py").returncode == 0
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


def test_a_fan_out_over_an_input_is_bounded_by_the_input_s_schema(tmp_path):
    plan = """inputs:
  parts:
    type: array
    maxItems: 10
    items: {type: object, additionalProperties: false, properties: {body: {type: string, maxLength: 200}}}
steps:
  - {id: each, for_each: †input.parts, max_items: 50, llm: "Summarize: †item.body", model: openai/gpt-4o-mini,
     output: †state.sums}
result: †state.sums
"""
    (tmp_path / "p.yaml").write_text(plan, encoding="utf-8")
    bounded = cli(tmp_path, "check", "p.yaml")
    assert "p.yaml: worst case 10 steps, 10 LLM steps, 10 model calls, <= 1.5k input tokens" in bounded.stderr
    assert "unbounded" not in bounded.stderr
    (tmp_path / "p.yaml").write_text(plan.replace(", maxLength: 200", ""), encoding="utf-8")
    unbounded = cli(tmp_path, "check", "p.yaml")
    assert "input tokens unbounded (†item.body)" in unbounded.stderr, unbounded.stderr


def test_a_test_file_s_own_mocks_are_every_case_s_defaults_and_its_typos_get_a_did_you_mean(tmp_path):
    root = _project(tmp_path)
    shutil.copy(ROOT / "examples" / "weather.yaml", root / "weather.yaml")
    tests = """plan: weather.yaml
tools: [tools.py]
mocks:
  tools:
    getWeather: {result: {city: Rome, sky: sunny}}
    findPark: {result: the park}
    presentSuggestion: {result: done}
cases:
  - name: sunny by default
    inputs: {city: Rome}
    expect: {steps: {park: {status: completed, output: the park}, movie: {status: skipped}}}
  - name: a case overrides a default by name
    inputs: {city: Oslo}
    mocks:
      tools:
        getWeather: {alternative: 1, result: {city: Oslo, sky: rainy}}
        findMovie: {result: a film}
    expect: {steps: {movie: {status: completed, output: a film}, park: {status: skipped}}}
"""
    (root / "weather.test.yaml").write_text(tests, encoding="utf-8")
    ran = cli(root, "test", "weather.test.yaml")
    assert ran.returncode == 0, ran.stdout + ran.stderr
    typos = tests.replace("inputs: {city: Oslo}", "inputs: {citty: Oslo}\n    real: [getWeathr]")
    (root / "weather.test.yaml").write_text(typos, encoding="utf-8")
    checked = cli(root, "check", "weather.test.yaml")
    assert checked.returncode == 1
    assert "weather.test.yaml:13:14: error test-file: input 'citty' is not one of the plan's inputs" in checked.stdout
    assert "did you mean 'city'?" in checked.stdout and "did you mean 'getWeather'?" in checked.stdout
    (root / "weather.test.yaml").write_text(tests.replace("    findPark: {result", "    findPak: {result"))
    assert "'findPak' is not one of the plan's tools" in cli(root, "check", "weather.test.yaml").stdout


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
    out = cli(tmp_path, "check", "p.yaml")
    lines = [line for line in out.stdout.splitlines() if line.startswith("p.yaml:")]
    assert "error unknown-step" in lines[0] and "'summarise'" in lines[0], out.stdout  # the cause, first
    assert any("warning foreign-template: step 'each': '{{item.body}}'" in line for line in lines)
    assert "write †item.body" in out.stdout
    length = next(line for line in lines if "length-key" in line)
    assert "†state.summary.length reads a key 'length' of †state.summary, which is text" in length
    assert "len(†state.summary)" in out.stdout


def test_counts_are_written_in_the_singular_when_there_is_one():
    out = cli(ROOT, "check", "examples/refund.yaml")
    assert "worst case 3 steps, 1 LLM step, 1 model call, <= " in out.stderr, out.stderr


# --- cassettes ---------------------------------------------------------------------------------


def test_a_replay_needs_no_tools_and_a_miss_fails_its_step_once(tmp_path):
    root = _project(tmp_path)
    weather = str(ROOT / "examples" / "weather.yaml")
    recorded = cli(root, "run", weather, "--tools", "tools.py", "-i", "city=Rome", "--record", "c.json")
    assert recorded.returncode == 0 and "calls recorded in c.json" in recorded.stderr
    elsewhere = tmp_path / "ci"
    elsewhere.mkdir()
    shutil.move(root / "c.json", elsewhere / "c.json")
    (root / "tools.py").unlink()  # the replay has only the cassette: the catalog it recorded, no code
    again = cli(elsewhere, "run", weather, "--replay", "c.json", "-i", "city=Rome", "--format", "json")
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["result"] == "Today I suggest a walk in the biggest park of Rome."
    miss = cli(elsewhere, "run", weather, "--replay", "c.json", "-i", "city=Paris")
    assert miss.returncode == 1
    said = miss.stdout + miss.stderr
    assert said.count("--- recorded") == 1, said  # the difference, told once
    rows = {
        line.split()[0]: line.split()[2] for line in miss.stdout.splitlines() if line.startswith(("weather", "park"))
    }
    assert rows == {"weather": "failed", "park": "skipped"}, miss.stdout  # a miss is no handled failure
    assert "[3/4] Find a park: skipped (the run stopped at step weather (CassetteMiss))" in miss.stderr
    again = cli(elsewhere, "resume", "@last")  # a run that stopped itself is no discarded one
    assert "was aborted (cassette c.json has no recording of tool getWeather" in again.stderr, again.stderr
    assert "discarded" not in again.stderr


def test_a_recording_goes_through_a_gate_and_a_resume(tmp_path):
    root = _project(tmp_path)
    plan = str(ROOT / "examples" / "approve_refund.yaml")
    args = ("-i", "customerId=c", "-i", "amount=5")
    waiting = cli(root, "run", plan, "--tools", "tools.py", *args, "--record", "g.json")
    hint = next(line for line in waiting.stderr.splitlines() if line.startswith("waiting for an answer"))
    assert hint.endswith("--record g.json"), hint
    assert cli(root, "answer", "@last", "approve", "approve").returncode == 0
    resumed = cli(root, *hint.split("then: dagplan ")[1].split())
    assert resumed.returncode == 0 and "3 calls recorded in g.json" in resumed.stderr, resumed.stderr
    calls = json.loads((root / "g.json").read_text(encoding="utf-8"))["calls"]
    assert [(c["kind"], c["step"]) for c in calls] == [("tool", "history"), ("gate", "approve"), ("tool", "refund")]
    replayed = cli(root, "run", plan, *args, "--replay", "g.json", "--format", "json")
    assert replayed.returncode == 0 and json.loads(replayed.stdout)["status"] == "completed", replayed.stderr


def test_a_cassette_s_catalog_of_the_wrong_shape_is_a_clear_error(tmp_path):
    root = _project(tmp_path)
    (root / "c.json").write_text('{"dagplan_cassette": 1, "calls": [],\n "tools": [{"name": "x", "parameters": 3}]}')
    done = cli(root, "run", str(ROOT / "examples" / "weather.yaml"), "--replay", "c.json", "-i", "city=Rome")
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert "c.json:2:" in done.stderr and "tools[0].parameters must be a JSON Schema object" in done.stderr


# --- progress -----------------------------------------------------------------------------------


def test_progress_counts_each_step_once_when_steps_start_together(tmp_path):
    root = _project(tmp_path)
    (root / "p.yaml").write_text("steps:\n" + "".join(
        f"  - {{id: s{i}, tool: presentSuggestion, args: {{suggestion: C{i}}}, output: †state.s{i}}}\n" for i in range(4)
    ) + "result: †state.s0 †state.s1 †state.s2 †state.s3\n")  # fmt: skip
    done = cli(root, "run", "p.yaml", "--tools", "tools.py")
    assert done.returncode == 0, done.stderr
    counters = [line.split("]")[0] + "]" for line in done.stderr.splitlines() if line.startswith("[")]
    assert counters and len(counters) == len(set(counters)), done.stderr
    started = [line for line in done.stderr.splitlines() if line.endswith(" ...")]
    assert started and not any(line.lstrip().startswith("[") for line in started)


WARM = """
import sys, dagplan
seen = {}
def watch(event):
    if event.type.value == "plan_started":
        seen["litellm"] = "litellm" in sys.modules
plan = dagplan.load(text="steps: [{id: a, llm: 'Say hi', model: openai/gpt-4o-mini, output: †state.a}]")
dagplan.run(plan, subscribers=[watch], completion_kwargs={"api_base": "http://127.0.0.1:9", "api_key": "x"},
            on_limit_exceeded=lambda *a: False)
print(seen)
"""


def test_a_library_a_step_needs_is_loaded_before_the_run_s_clock_starts(tmp_path):
    """A step's duration is its own work: litellm (about 3 s to import) is loaded before the run starts."""
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    done = subprocess.run([sys.executable, "-c", WARM], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=120)  # fmt: skip
    assert done.stdout.strip() == "{'litellm': True}", done.stdout + done.stderr


def test_a_failing_case_shows_what_each_step_did_and_who_answered(tmp_path):
    root = _project(tmp_path)
    shutil.copy(ROOT / "examples" / "weather.yaml", root / "weather.yaml")
    text = (ROOT / "examples" / "weather.test.yaml").read_text(encoding="utf-8")
    (root / "weather.test.yaml").write_text(text.replace('result: "Today: Villa Borghese"\n', 'result: "Today"\n', 1))
    done = cli(root, "test", "weather.test.yaml")
    assert done.returncode == 1
    lines = done.stdout.splitlines()
    head = lines.index(next(line for line in lines if line.split() == ["step", "call", "by", "status", "output"]))
    rows = [line.split(None, 4) for line in lines[head + 1 : head + 5]]
    assert [r[:4] for r in rows] == [["weather", "getWeather", "mock", "completed"],
                                     ["movie", "findMovie", "-", "skipped"], ["park", "findPark", "mock", "completed"],
                                     ["present", "presentSuggestion", "mock", "completed"]], done.stdout  # fmt: skip
    assert rows[1][4].startswith("†state.notSunny was never written") and rows[3][4] == "Today: Villa Borghese"
    assert "step" not in done.stdout.split("1 failed")[1]  # the passing case shows none
    as_json = json.loads(cli(root, "test", "weather.test.yaml", "--format", "json").stdout)
    case = next(c for c in as_json["cases"] if c["case"] == "a rainy day goes to the movies")
    assert {s["step"]: s["by"] for s in case["steps"]}["present"] == "real"


def test_a_test_file_s_problems_come_all_at_once_in_check_s_words(tmp_path):
    root = _project(tmp_path)
    shutil.copy(ROOT / "examples" / "weather.yaml", root / "weather.yaml")
    (root / "bad.test.yaml").write_text(
        "plan: weather.yaml\ntools: [tools.py]\ncases:\n  - name: one\n    inputs: {city: Rome}\n"
        "    expectt: {result: x}\n  - name: 5\n    inputs: [1]\n    expect: {status: 3}\n", encoding="utf-8"
    )  # fmt: skip
    for command in ("test", "check"):
        done = cli(root, command, "bad.test.yaml")
        assert done.returncode == 1, (command, done.stdout, done.stderr)
        said = done.stdout + done.stderr
        assert "bad.test.yaml:6:5: error test-file: unknown key 'expectt' in cases[0]" in said, said
        assert "did you mean 'expect'?" in said
        assert "bad.test.yaml:7:11: error test-file: cases[1].name must be a string, not a number" in said
        assert "cases[1].inputs must be a mapping, not a list" in said
        assert "cases[1].expect.status must be one of completed, failed" in said
        assert "Additional properties" not in said and "is not of type" not in said


# --- coverage and paths ---------------------------------------------------------------------------

REACH = """inputs:
  tier: {type: string}
  attempt: {type: integer}
steps:
  - {id: gold, when: '†input.tier == "gold" and †input.attempt < 3', tool: presentSuggestion,
     args: {suggestion: gold}, output: †state.gold}
  - {id: also_gold, when: '†input.tier == "gold" and †input.attempt < 3', tool: presentSuggestion,
     args: {suggestion: "†state.gold again"}, output: †state.again}
  - {id: other, when: '†input.tier != "gold"', tool: presentSuggestion, args: {suggestion: other},
     output: †state.other}
  - {id: each, for_each: [a, b], tool: presentSuggestion, args: {suggestion: †item}, output: †state.each}
result: †state.each
"""


def test_paths_propose_only_what_some_input_reaches_with_those_inputs(tmp_path):
    root = _project(tmp_path)
    (root / "p.yaml").write_text(REACH, encoding="utf-8")
    (root / "p.test.yaml").write_text("plan: p.yaml\ntools: [tools.py]\ncases:\n  - name: silver\n"
                                      "    inputs: {tier: silver, attempt: 1}\n    real: [presentSuggestion]\n"
                                      "    expect: {result: {$any: true}}\n", encoding="utf-8")  # fmt: skip
    done = cli(root, "test", "p.test.yaml", "--paths", "p.yaml", "--format", "json")
    found = json.loads(done.stdout)
    # 2 x 2 x 2 `when:` outcomes x 2 fan-out outcomes = 16 combinations; 3 can happen: other / gold (then
    # also_gold, which reads gold's output) / gold's condition false on a gold tier (attempt >= 3)
    assert found["combinations"] == 3, found
    drafted = {tuple(u["path"]): u["case"] for u in found["untested"]}
    assert len(drafted) == 2 and all("over zero items" not in " ".join(p) for p in drafted), drafted
    both = next(case for path, case in drafted.items() if any("also_gold" in p for p in path))
    assert both["inputs"] == {"tier": "gold", "attempt": 2}  # values that take this way, not TODOs
    assert done.returncode == 0
    covered = cli(root, "test", "p.test.yaml", "--coverage", "--format", "json")
    plan = json.loads(covered.stdout)["coverage"][0]
    missed = {m["key"] for m in plan["missed"]}
    assert "fanout:each:zero" not in missed and "step:also_gold" in missed, missed  # no gap that cannot happen


def test_a_type_error_shows_the_shape_it_wants(tmp_path):
    root = _project(tmp_path)
    (root / "p.yaml").write_text(
        "inputs:\n  amount: {type: number}\n"
        "  trip: {type: object, properties: {city: {type: string}, days: {type: integer}}, required: [city]}\n"
        "steps:\n  - {id: p, tool: processPayment, args: {amount: \u2020input.trip}, output: \u2020state.p}\n"
        "  - {id: q, tool: findPark, args: {}, output: \u2020state.q}\nresult: \u2020state.p \u2020state.q\n",
        encoding="utf-8",
    )
    checked = cli(root, "check", "p.yaml", "--tools", "tools.py")
    assert checked.returncode == 1
    assert "hint: e.g. amount: 12.5; did you mean \u2020input.trip.days?" in checked.stdout, checked.stdout
    assert "hint: add it: args: {weather: {}}" in checked.stdout
    (root / "p.yaml").write_text(
        "inputs:\n  amount: {type: number}\n  tier: {enum: [gold, silver]}\n"
        "  trip: {type: object, properties: {city: {type: string}, days: {type: integer}}, required: [city]}\n"
        "steps:\n  - {id: p, tool: processPayment, args: {amount: \u2020input.amount}, output: \u2020state.p}\n",
        encoding="utf-8",
    )
    ran = cli(root, "run", "p.yaml", "--tools", "tools.py", "-i", "amount=x", "-i", "trip=[1]", "-i", "tier=bronze")
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
    schema = cli(root, "check", "bad.yaml", "--tools", "tools.py")
    assert "retry[0] in step 'a' must be a mapping, not a number\n" in schema.stdout
    assert "retry in step 'b' must be a mapping or a list, not a string ('fast')" in schema.stdout, schema.stdout
    assert schema.stdout.count("hint: e.g. ") == 2 and "is not valid under" not in schema.stdout


def test_runs_say_when_a_completed_run_had_errors(tmp_path):
    root = _project(tmp_path)
    refused = cli(root, "run", str(ROOT / "examples" / "approve_refund.yaml"), "--tools", "tools.py",
                  "-i", "customerId=c", "-i", "amount=5", "--answer", "approve=reject")  # fmt: skip
    assert refused.returncode == 1
    listed = cli(root, "runs")
    assert "completed with errors" in listed.stdout, listed.stdout
    assert json.loads(cli(root, "runs", "--format", "json").stdout)[0]["had_errors"] is True


def test_a_tool_that_branches_says_so_and_check_holds_its_callers_to_it(tmp_path):
    root = _project(tmp_path)
    (root / "p.yaml").write_text("steps:\n  - {id: w, tool: getWeather, args: {city: Oslo}, output: \u2020state.w}\n")
    checked = cli(root, "check", "p.yaml", "--tools", "tools.py")
    assert checked.returncode == 1, checked.stdout
    assert ("p.yaml:2:59: error bad-output: tool 'getWeather' answers one of 2 outcomes, but the output of step 'w'"
            " names 1") in checked.stdout  # fmt: skip
    assert "hint: one path per outcome, in order: output: \u2020state.a || \u2020state.b" in checked.stdout
    listed = json.loads(cli(root, "tools", "list", "--tools", "tools.py", "--format", "json").stdout)
    assert next(t for t in listed if t["name"] == "getWeather")["alternatives"] == 2
    recorded = cli(root, "run", str(ROOT / "examples" / "weather.yaml"), "--tools", "tools.py", "-i", "city=Oslo",
                   "--record", "c.json")  # fmt: skip
    assert recorded.returncode == 0
    (root / "tools.py").unlink()  # a replay checks against the recorded catalog: the rule holds there too
    replayed = cli(root, "run", "p.yaml", "--replay", "c.json")
    assert replayed.returncode == 1 and "answers one of 2 outcomes" in replayed.stderr, replayed.stderr


def test_a_replay_miss_in_a_fan_out_item_is_never_caught():
    """A stopping failure (a replay's miss) of a fan-out item is not a failure a `catch:` takes: the run stops."""
    import dagplan

    text = """steps:
  - id: each
    for_each: [a, b]
    max_items: 2
    tool: shout
    args: {x: †item}
    catch:
      - {errors: ["*"], output: †state.broken}
    output: †state.each
"""

    def shout(x: str) -> str:
        return x.upper()

    plan = dagplan.load(text=text, tools={"shout": shout})
    result = dagplan.run(plan, tools={"shout": shout}, cassette={"dagplan_cassette": 1, "calls": []})
    assert result.status == "aborted" and "has no recording of tool shout" in result.message, result
    assert result.steps["each"].status != "completed" and "broken" not in result.state
