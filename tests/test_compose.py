"""Composition (issue 6): fan-out over lists, sub-plans, bounded loops, approval gates, static bounds."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

import dagplan
from dagplan.dsl import check
from dagplan.dsl.compose import Budget, worst_case
from dagplan.interpreter.stores.store import RunStore
from as_user import run_dagplan, with_example_tools

ROOT = Path(__file__).resolve().parents[1]


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def codes(result) -> list[str]:
    return [d.code for d in result.errors]


class Peak:
    """Counts concurrent calls; ``peak`` is the most seen at once."""

    def __init__(self):
        self.now = self.peak = 0
        self.lock = threading.Lock()

    async def call(self, x):
        with self.lock:
            self.now += 1
            self.peak = max(self.peak, self.now)
        await asyncio.sleep(0.002)
        with self.lock:
            self.now -= 1
        return x * 2


FAN_OUT = """\
inputs:
  items: {type: array}
steps:
  - id: double
    for_each: †input.items
    max_items: %(max_items)s
    max_concurrency: 3
    tool: double
    args: {x: †item, at: †index}
    output: †state.doubled
result: †state.doubled
"""


# --- fan-out ----------------------------------------------------------------------------------------


def test_fan_out_of_50_respects_its_concurrency_limit(tmp_path):
    peak = Peak()

    async def double(x: int, at: int) -> int:
        assert at == x  # †index is the item's position
        return await peak.call(x)

    plan = write(tmp_path, "p.yaml", FAN_OUT % {"max_items": 50})
    seen = []
    result = dagplan.run(
        str(plan), tools={"double": double}, inputs={"items": list(range(50))}, subscribers=[seen.append]
    )
    assert result.status == "completed"
    assert result.result == [2 * i for i in range(50)]  # item order, whatever the finishing order
    assert 1 < peak.peak <= 3
    progress = [e for e in seen if e.type == "plan_step_progress"]
    assert len(progress) == 50 and {e.data["total"] for e in progress} == {50}
    assert sorted(e.data["item"] for e in progress) == list(range(1, 51))


def test_more_items_than_max_items_fails_the_step_and_runs_nothing(tmp_path):
    calls = []

    def double(x: int, at: int) -> int:
        calls.append(x)
        return x

    plan = write(tmp_path, "p.yaml", FAN_OUT % {"max_items": 3})
    result = dagplan.run(str(plan), tools={"double": double}, inputs={"items": [1, 2, 3, 4]})
    report = result.steps["double"]
    assert report.status == "failed"
    assert "4 items, more than max_items (3)" in report.error["message"]
    assert calls == []


def test_one_item_failure_fills_its_slot_and_the_others_still_run(tmp_path):
    def double(x: int, at: int) -> int:
        if x == 2:
            raise ValueError("two is bad")
        return x * 2

    plan = write(tmp_path, "p.yaml", FAN_OUT % {"max_items": 10})
    result = dagplan.run(str(plan), tools={"double": double}, inputs={"items": [0, 1, 2, 3]})
    assert result.result[:2] == [0, 2] and result.result[3] == 6
    assert result.result[2] == "(FAILED: ValueError: two is bad)"
    assert result.had_errors and result.status == "completed"


def test_item_failure_under_abort_fails_the_step(tmp_path):
    def double(x: int, at: int) -> int:
        if x == 2:
            raise ValueError("two is bad")
        return x

    text = FAN_OUT % {"max_items": 10} + "on_failure: abort\n"
    result = dagplan.run(str(write(tmp_path, "p.yaml", text)), tools={"double": double}, inputs={"items": [1, 2, 3]})
    assert result.status == "aborted"
    assert "double[1] failed: ValueError: two is bad" in result.steps["double"].error["message"]


def test_for_each_needs_max_items_unless_a_default_cap_is_configured(tmp_path):
    plan = write(tmp_path, "p.yaml", (FAN_OUT % {"max_items": 1}).replace("    max_items: 1\n", ""))
    assert codes(check(plan)) == ["missing-max-items"]
    assert check(plan, budget=Budget(default_max_items=5)).ok


def test_item_reference_outside_for_each_is_an_error(tmp_path):
    plan = write(
        tmp_path,
        "p.yaml",
        """\
        steps:
          - id: a
            tool: t
            args: {x: †item.name}
          - id: b
            for_each: †state.x
            max_items: 2
            tool: t
            args: {}
        """,
    )
    assert "item-outside-for-each" in codes(check(plan))


def test_item_references_parse_in_templates_and_ascii():
    from dagplan.dsl.expr import classify
    from dagplan.dsl.ir import Ref, Template

    assert classify("$item.name") == Ref("item", ("name",))
    assert classify("#†index: †item[0]") == Template(("#", Ref("index", ()), ": ", Ref("item", (0,))))
    assert classify("$items") == "$items"


# --- sub-plans --------------------------------------------------------------------------------------

CHILD = """\
inputs:
  n: {type: integer}
steps:
  - id: inc
    tool: add
    args: {a: †input.n, b: 1}
    output: †state.out
result: †state.out
"""


def add(a: int, b: int) -> int:
    return a + b


def test_sub_plan_from_a_file_gets_args_as_input_and_returns_its_result(tmp_path):
    write(tmp_path, "child.yaml", CHILD)
    parent = write(
        tmp_path,
        "parent.yaml",
        """\
        steps:
          - id: sub
            plan: child.yaml
            args: {n: 41}
            output: †state.answer
        result: †state.answer
        """,
    )
    result = dagplan.run(str(parent), tools={"add": add}, durable=True, state_dir=tmp_path / "state")
    assert result.status == "completed" and result.result == 42
    run = RunStore(tmp_path / "state").open(result.run_id)
    steps = run.progress().steps
    assert steps["sub.inc"].output == 42 and steps["sub"].output == 42  # the child's step id is derived
    assert run.plan_doc["steps"][0]["plan"]["steps"][0]["id"] == "inc"  # the artifact is self-contained
    assert run.progress().status == "completed"


def test_inline_sub_plan_and_fan_out_over_a_sub_plan(tmp_path):
    parent = write(
        tmp_path,
        "parent.yaml",
        """\
        initial_state: {ns: [1, 2, 3]}
        steps:
          - id: each
            for_each: †state.ns
            max_items: 5
            plan:
              inputs: {n: {type: integer}}
              steps:
                - {id: inc, tool: add, args: {a: †input.n, b: 10}, output: †state.out}
              result: †state.out
            args: {n: †item}
            output: †state.all
        result: †state.all
        """,
    )
    result = dagplan.run(str(parent), tools={"add": add}, durable=True, state_dir=tmp_path / "state")
    assert result.result == [11, 12, 13]
    steps = RunStore(tmp_path / "state").open(result.run_id).progress().steps
    assert steps["each[2].inc"].output == 13


def test_sub_plan_arguments_are_checked_against_the_child_inputs(tmp_path):
    write(tmp_path, "child.yaml", CHILD)
    parent = write(
        tmp_path,
        "parent.yaml",
        """\
        steps:
          - id: sub
            plan: child.yaml
            args: {m: 1}
        """,
    )
    messages = [d.message for d in check(parent).errors]
    assert any("needs input 'n'" in m for m in messages) and any("has no input 'm'" in m for m in messages)


def test_errors_inside_a_child_carry_the_child_file_and_line(tmp_path):
    write(tmp_path, "child.yaml", "steps:\n  - id: a\n    tool: t\n    args: {x: †state.never}\n")
    parent = write(tmp_path, "parent.yaml", "steps:\n  - id: sub\n    plan: child.yaml\n")
    (diag,) = check(parent).errors
    assert diag.code == "unwritten-state"
    assert diag.span.file.endswith("child.yaml") and diag.span.line == 4


def test_errors_inside_an_inline_child_point_into_the_parent_file(tmp_path):
    parent = write(
        tmp_path,
        "parent.yaml",
        """\
        steps:
          - id: sub
            plan:
              steps:
                - id: a
                  tool: t
                  args: {x: †state.never}
        """,
    )
    (diag,) = check(parent).errors
    assert diag.code == "unwritten-state" and diag.span.file.endswith("parent.yaml") and diag.span.line == 7


def test_include_cycles_are_rejected_with_the_chain(tmp_path):
    write(tmp_path, "a.yaml", "steps:\n  - id: x\n    plan: b.yaml\n")
    write(tmp_path, "b.yaml", "steps:\n  - id: y\n    plan: a.yaml\n")
    found = check(tmp_path / "a.yaml").errors
    assert [d.code for d in found] == ["include-cycle"]
    assert "a.yaml -> b.yaml -> a.yaml" in found[0].message
    assert found[0].span.file.endswith("b.yaml") and found[0].span.line == 3


def test_a_plan_including_itself_is_a_cycle(tmp_path):
    write(tmp_path, "a.yaml", "steps:\n  - id: x\n    plan: ./a.yaml\n")
    assert codes(check(tmp_path / "a.yaml")) == ["include-cycle"]


# --- loops ----------------------------------------------------------------------------------------

COUNTER = """\
inputs:
  n: {type: integer}
steps:
  - id: step
    tool: count
    args: {n: †input.n}
    output: †state.out
result: †state.out
"""


def count(n: int) -> dict:
    return {"n": n + 1, "done": n + 1 >= 3}


def loop_plan(tmp_path, bound: int) -> Path:
    write(tmp_path, "counter.yaml", COUNTER)
    return write(
        tmp_path,
        "loop.yaml",
        f"""\
        steps:
          - id: again
            loop: {{plan: counter.yaml, max_iterations: {bound}, until: †result.done}}
            args: {{n: 0}}
            output: †state.final
        result: †state.final
        """,
    )


def test_a_loop_repeats_until_its_condition_holds(tmp_path):
    seen = []
    result = dagplan.run(
        str(loop_plan(tmp_path, 10)),
        tools={"count": count},
        subscribers=[seen.append],
        durable=True,
        state_dir=tmp_path / "state",
    )
    assert result.result == {"n": 3, "done": True}
    iterations = [(e.data["iteration"], e.data["total"]) for e in seen if e.type == "plan_step_progress"]
    assert iterations == [(1, 10), (2, 10), (3, 10)]
    steps = RunStore(tmp_path / "state").open(result.run_id).progress().steps
    assert steps["again[2].step"].output == {"n": 3, "done": True}


def test_a_loop_that_reaches_its_bound_fails_saying_so(tmp_path):
    result = dagplan.run(str(loop_plan(tmp_path, 2)), tools={"count": count})
    report = result.steps["again"]
    assert report.status == "failed"
    assert "max_iterations (2)" in report.error["message"] and "†result.done" in report.error["message"]


def test_a_loop_needs_max_iterations(tmp_path):
    write(tmp_path, "counter.yaml", COUNTER)
    plan = write(tmp_path, "p.yaml", "steps:\n  - id: l\n    loop: {plan: counter.yaml, until: †result.done}\n")
    assert codes(check(plan)) == ["schema"]  # the JSON Schema requires it; the parser would say unbounded-loop


# --- durability ------------------------------------------------------------------------------------

KILL_TOOLS = """
import os, signal
import dagplan

LOG = os.environ["FANOUT_LOG"]

@dagplan.tool(purity=os.environ.get("PURITY") or None)
def work(x: int) -> int:
    with open(LOG, "a") as f:
        f.write(f"{x}\\n")
    if x == 10 and not os.path.exists(LOG + ".killed"):
        open(LOG + ".killed", "w").close()
        os.kill(os.getpid(), signal.SIGKILL)  # kill -9 in the middle of the fan-out
    return x * x
"""

KILL_PLAN = """\
initial_state: {xs: [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19]}
steps:
  - id: square
    for_each: †state.xs
    max_items: 20
    max_concurrency: 1
    tool: work
    args: {x: †item}
    output: †state.squares
result: †state.squares
"""


def kill_then_resume(tmp_path: Path, purity: str, *resume_args: str) -> tuple[dict, list[int]]:
    """Run the fan-out, which kill -9s itself at item 10; resume; (resume report, tool calls in order)."""
    write(tmp_path, "tools.py", KILL_TOOLS)
    plan = write(tmp_path, "plan.yaml", KILL_PLAN)
    log = tmp_path / "calls.log"
    env = {
        **os.environ,
        "DAGPLAN_STATE_DIR": str(tmp_path / "state"),
        "FANOUT_LOG": str(log),
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "PURITY": purity,
    }
    first = subprocess.run(
        [sys.executable, "-m", "dagplan", "run", str(plan), "--tools", str(tmp_path / "tools.py")],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert first.returncode == -9, first.stderr
    (info,) = RunStore(tmp_path / "state").list()
    assert info.status == "interrupted"
    second = subprocess.run(
        [
            sys.executable,
            "-m",
            "dagplan",
            "resume",
            info.id,
            "--tools",
            str(tmp_path / "tools.py"),
            "--format",
            "json",
            *resume_args,
        ],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert second.returncode in (0, 1, 3), second.stderr
    calls = [int(line) for line in log.read_text().split()]
    if second.returncode == 3:  # stopped for a decision: no report, the error on stderr
        return {"needs_decision": second.stderr, "run_id": info.id}, calls
    return json.loads(second.stdout), calls


def test_kill_9_in_the_middle_of_a_fan_out_resumes_only_the_unfinished_items(tmp_path):
    report, calls = kill_then_resume(tmp_path, "idempotent")  # declared safe to repeat (undeclared acts: it asks)
    assert report["result"] == [x * x for x in range(20)]
    assert calls == list(range(11)) + list(range(10, 20))  # 0-9 once, 10 again (it was cut), 11-19 once


def test_an_interrupted_side_effecting_item_is_not_repeated_without_a_decision(tmp_path):
    """With nobody to ask, the run stops in needs_decision before anything runs: item 10 is not run again,
    and no later item acts as if it had failed; the message names the item and the exact commands."""
    report, calls = kill_then_resume(tmp_path, "side_effect")
    assert calls == list(range(11))  # nothing at all ran on resume
    message, run_id = report["needs_decision"], report["run_id"]
    assert "error needs-decision" in message and "square[10] (side_effect)" in message
    assert f"dagplan resume {run_id} --on-interrupted retry" in message and "RUN" not in message
    (info,) = RunStore(tmp_path / "state").list()
    assert info.status == "needs_decision"


def test_an_interrupted_side_effecting_item_runs_again_with_yes(tmp_path):
    report, calls = kill_then_resume(tmp_path, "side_effect", "--yes")
    assert calls == list(range(11)) + list(range(10, 20))
    assert report["result"] == [x * x for x in range(20)]


def test_kill_9_inside_a_sub_plan_resumes_at_the_unfinished_child_step(tmp_path):
    write(tmp_path, "tools.py", KILL_TOOLS)
    write(
        tmp_path,
        "child.yaml",
        """\
        steps:
          - {id: one, tool: work, args: {x: 1}, output: †state.one}
          - {id: ten, tool: work, args: {x: 10}, deps: [one], output: †state.ten}
          - {id: two, tool: work, args: {x: 2}, deps: [ten], output: †state.two}
        result: †state.two
        """,
    )
    plan = write(tmp_path, "plan.yaml", "steps:\n  - id: sub\n    plan: child.yaml\n")
    log = tmp_path / "calls.log"
    env = {
        **os.environ,
        "DAGPLAN_STATE_DIR": str(tmp_path / "state"),
        "FANOUT_LOG": str(log),
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "PURITY": "idempotent",  # declared safe to repeat: the cut step runs again (undeclared, it would ask)
    }
    run = [sys.executable, "-m", "dagplan"]
    first = subprocess.run(
        [*run, "run", str(plan), "--tools", "tools.py"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert first.returncode == -9, first.stderr
    (info,) = RunStore(tmp_path / "state").list()
    second = subprocess.run(
        [*run, "resume", info.id, "--tools", "tools.py", "--format", "json"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert second.returncode == 0, second.stderr
    assert json.loads(second.stdout)["result"] == 4
    assert [int(x) for x in log.read_text().split()] == [1, 10, 10, 2]  # `one` replayed, `ten` again (cut)


# --- static bounds ---------------------------------------------------------------------------------

NESTED = """\
initial_state: {xs: []}
steps:
  - id: first
    llm: "Say hi"
  - id: each
    for_each: †state.xs
    max_items: 4
    plan:
      steps:
        - {id: a, tool: t}
        - {id: b, llm: "summarise #a"}
  - id: again
    loop:
      max_iterations: 3
      plan:
        steps:
          - {id: c, llm: "again"}
"""


def test_worst_case_counts_items_iterations_and_children(tmp_path):
    plan = check(write(tmp_path, "p.yaml", NESTED)).plan
    bounds = worst_case(plan)
    # first: 1; each: 4 x (sub-plan step + a + b) = 12; again: 1 + 3 x c = 4
    assert (bounds.steps, bounds.llm_steps) == (17, 1 + 4 + 3)


def test_check_fails_plans_over_the_max_steps_budget(tmp_path):
    path = write(tmp_path, "p.yaml", NESTED)
    assert check(path, budget=Budget(max_steps=17)).ok
    over = check(path, budget=Budget(max_steps=16))
    assert codes(over) == ["too-many-steps"] and "17 steps" in over.errors[0].message


def test_check_cli_reads_max_steps_from_the_config_and_shows_the_worst_case(tmp_path):
    write(tmp_path, "p.yaml", NESTED)
    (tmp_path / "dagplan.toml").write_text("max_steps = 10\n")
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    proc = subprocess.run(
        [sys.executable, "-m", "dagplan", "check", "p.yaml"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 1 and "too-many-steps" in proc.stdout
    (tmp_path / "dagplan.toml").write_text("max_steps = 100\n")
    proc = subprocess.run(
        [sys.executable, "-m", "dagplan", "check", "p.yaml"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "worst case 17 steps, 8 LLM steps" in proc.stderr


def test_preview_nests_children_under_their_parent_with_worst_case_counts(tmp_path):
    from dagplan.views import preview_text

    preview = dagplan.preview(str(write(tmp_path, "p.yaml", NESTED)))
    data = preview.to_json()
    assert data["worst_case"] == {"steps": 17, "llm_steps": 8}
    steps = {s["id"]: s for s in data["steps"]}
    each = steps["each"]
    assert each["kind"] == "plan" and each["repeat"] == "for each of †state.xs (at most 4)"
    assert [c["id"] for c in each["children"]] == ["a", "b"]
    assert steps["again"]["repeat"] == "at most 3 iterations"
    text = preview_text(preview)
    assert ".1. [a] tool=t" in text and ".1. [c] llm" in text and "Worst case: 17 steps, 8 LLM steps" in text


# --- approval gates --------------------------------------------------------------------------------

GATE_TOOLS = """
import os
import dagplan

LOG = os.environ["GATE_LOG"]

@dagplan.tool
def work(x: str) -> str:
    with open(LOG, "a") as f:
        f.write(x + "\\n")
    return x.upper()
"""

GATE_PLAN = """\
on_failure: skip_dependents
steps:
  - id: draft
    tool: work
    args: {x: refund}
    output: †state.draft
  - id: ok
    gate: {question: "Send the refund †state.draft?"}
    output: †state.ok
  - id: send
    tool: work
    args: {x: "sent †state.draft"}
    deps: [ok]
    output: †state.sent
result: †state.sent
"""


def gate_env(tmp_path: Path) -> dict:
    write(tmp_path, "tools.py", GATE_TOOLS)
    write(tmp_path, "plan.yaml", GATE_PLAN)
    return {
        **os.environ,
        "DAGPLAN_STATE_DIR": str(tmp_path / "state"),
        "GATE_LOG": str(tmp_path / "calls.log"),
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "TERM": "dumb",
    }


def cli(tmp_path: Path, env: dict, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "dagplan", *args],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        input=stdin,
    )


def test_a_gate_answered_later_from_another_process_after_the_first_exited(tmp_path):
    env = gate_env(tmp_path)
    first = cli(tmp_path, env, "run", "plan.yaml", "--tools", "tools.py")
    assert first.returncode == 3, first.stderr  # waiting
    (info,) = RunStore(tmp_path / "state").list()
    assert info.status == "waiting"
    assert "answer with: dagplan answer" in first.stderr
    listed = cli(tmp_path, env, "runs")
    assert f"{info.id} waits at ok: Send the refund REFUND? [approve/reject]" in listed.stderr
    bad = cli(tmp_path, env, "answer", info.id, "ok", "maybe")
    assert bad.returncode == 2 and "not one of approve, reject" in bad.stderr  # the caller's to fix: usage
    assert cli(tmp_path, env, "answer", info.id, "ok", "approve").returncode == 0
    done = cli(tmp_path, env, "resume", info.id, "--tools", "tools.py", "--format", "json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["result"] == "SENT REFUND"
    assert (tmp_path / "calls.log").read_text().split("\n") == ["refund", "sent REFUND", ""]  # draft ran once


def test_a_refused_gate_follows_the_failure_policy(tmp_path):
    env = gate_env(tmp_path)
    cli(tmp_path, env, "run", "plan.yaml", "--tools", "tools.py")
    (info,) = RunStore(tmp_path / "state").list()
    assert cli(tmp_path, env, "answer", info.id, "ok", "reject").returncode == 0
    done = cli(tmp_path, env, "resume", info.id, "--tools", "tools.py", "--format", "json")
    report = json.loads(done.stdout)
    assert report["steps"]["ok"]["status"] == "failed" and "refused" in report["steps"]["ok"]["error"]["message"]
    assert report["steps"]["send"]["status"] == "skipped"  # skip_dependents


def test_a_gate_answered_interactively_on_a_terminal(tmp_path):
    from terminal import run_on_terminal

    out, code, answered = run_on_terminal(
        [sys.executable, "-m", "dagplan", "run", "plan.yaml", "--tools", "tools.py"],
        cwd=tmp_path,
        env=gate_env(tmp_path),
        prompt=b"Send the refund REFUND?",
        answer=b"approve",
    )
    assert answered and code == 0, out
    assert (tmp_path / "calls.log").read_text().split("\n") == ["refund", "sent REFUND", ""]


def test_gates_through_the_api_with_a_callback_and_a_schema(tmp_path):
    plan = write(
        tmp_path,
        "p.yaml",
        """\
        steps:
          - id: amount
            gate: {question: "How much?", schema: {type: integer, minimum: 1}}
            output: †state.amount
        result: †state.amount
        """,
    )
    asked = []
    result = dagplan.run(str(plan), ask_gate=lambda request: asked.append(request) or 5)
    assert result.result == 5 and asked[0]["schema"] == {"type": "integer", "minimum": 1}
    result = dagplan.run(str(plan), ask_gate=lambda request: 0)
    assert "does not match the gate's schema" in result.steps["amount"].error["message"]


# --- examples ---------------------------------------------------------------------------------------

EXAMPLES = ROOT / "examples"


@pytest.fixture
def example_tools():
    from dagplan.interpreter.tools.sources import load_tools

    return load_tools([EXAMPLES / "tools.py"])


def test_example_review_prs_fans_out_over_a_sub_plan(example_tools, tmp_path):
    result = dagplan.run(
        str(EXAMPLES / "review_prs.yaml"),
        tools=example_tools,
        inputs={"repo": "acme/api"},
        durable=True,
        state_dir=tmp_path,
    )
    assert result.status == "completed" and not result.had_errors
    assert [r["title"] for r in result.result][:2] == ["Fix typo in README", "Add retry to the HTTP client"]
    info = RunStore(tmp_path).list()[0]
    assert (info.done, info.total) == (2, 2)  # children are not counted as plan steps


def test_example_wait_for_job_loops_until_done(example_tools):
    result = dagplan.run(str(EXAMPLES / "wait_for_job.yaml"), tools=example_tools, inputs={"jobId": "job-7"})
    assert result.result == "Job job-7 finished after 3 checks"


@pytest.mark.parametrize("answer, status", [("approve", "completed"), ("reject", "skipped")])
def test_example_approve_refund(example_tools, answer, status):
    result = dagplan.run(
        str(EXAMPLES / "approve_refund.yaml"),
        tools=example_tools,
        inputs={"customerId": "cust_42", "amount": 25},
        ask_gate=lambda request: answer,
    )
    assert result.steps["refund"].status == status


def test_example_approve_refund_waits_without_a_person(example_tools, tmp_path):
    result = dagplan.run(
        str(EXAMPLES / "approve_refund.yaml"),
        tools=example_tools,
        inputs={"customerId": "cust_42", "amount": 25},
        durable=True,
        state_dir=tmp_path,
    )
    assert result.status == "waiting" and result.steps["history"].status == "completed"
    assert result.steps["refund"].status == "pending"
    assert [r["step"] for r in result.waiting] == ["approve"]
    dagplan.answer(result.run_id, "approve", "approve", state_dir=tmp_path)
    resumed = dagplan.resume(result.run_id, tools=example_tools, state_dir=tmp_path)
    assert resumed.status == "completed" and resumed.result["amount"] == 25
    assert resumed.steps["history"].replayed


def test_an_interrupted_side_effecting_step_of_a_sub_plan_follows_the_policy(tmp_path):
    write(tmp_path, "tools.py", KILL_TOOLS)
    write(
        tmp_path,
        "child.yaml",
        """\
        steps:
          - {id: ten, tool: work, args: {x: 10}, output: †state.ten}
          - {id: two, tool: work, args: {x: 2}, deps: [ten], output: †state.two}
        result: †state.two
        """,
    )
    plan = write(tmp_path, "plan.yaml", "steps:\n  - id: sub\n    plan: child.yaml\n")
    log = tmp_path / "calls.log"
    env = {
        **os.environ,
        "DAGPLAN_STATE_DIR": str(tmp_path / "state"),
        "FANOUT_LOG": str(log),
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "PURITY": "side_effect",
    }
    (tmp_path / "dagplan.toml").write_text('[resume]\nside_effect = "adopt"\n')
    run = [sys.executable, "-m", "dagplan"]
    assert (
        subprocess.run(
            [*run, "run", str(plan), "--tools", "tools.py"], env=env, cwd=tmp_path, capture_output=True, timeout=120
        ).returncode
        == -9
    )
    (info,) = RunStore(tmp_path / "state").list()
    second = subprocess.run(
        [*run, "resume", info.id, "--tools", "tools.py", "--format", "json"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert second.returncode == 0, second.stderr
    assert [int(x) for x in log.read_text().split()] == [10, 2]  # `ten` adopted, not repeated


def test_resume_from_a_fan_out_step_runs_its_items_again(tmp_path):
    calls = []

    def double(x: int, at: int) -> int:
        calls.append(x)
        return 2 * x

    plan = write(tmp_path, "p.yaml", FAN_OUT % {"max_items": 5})
    first = dagplan.run(
        str(plan), tools={"double": double}, inputs={"items": [1, 2, 3]}, durable=True, state_dir=tmp_path / "state"
    )
    again = dagplan.resume(first.run_id, tools={"double": double}, from_step="double", state_dir=tmp_path / "state")
    assert again.result == [2, 4, 6] and sorted(calls) == [1, 1, 2, 2, 3, 3]  # children cleared with their parent


@pytest.mark.extra  # needs an extra (litellm, mcp): not in the core run (requirements/test-core.txt)
def test_fan_out_of_an_llm_prompt_and_a_gate_inside_a_sub_plan(stub, stub_model, tmp_path):
    from llm_stub import text

    stub.script(text("one"), text("two"), text("three"))
    plan = write(
        tmp_path,
        "p.yaml",
        """\
        initial_state: {words: [uno, dos, tres]}
        steps:
          - id: tr
            for_each: †state.words
            max_items: 3
            max_concurrency: 1
            llm: "Translate †item (word †index)"
            output: †state.english
          - id: check
            plan:
              inputs: {words: {type: array}}
              steps:
                - {id: ok, gate: {question: "Fine?"}, output: †state.ok}
              result: †state.ok
            args: {words: †state.english}
            output: †state.verdict
        result: †state.verdict
        """,
    )
    state = tmp_path / "state"
    waiting = dagplan.run(str(plan), model=stub_model, completion_kwargs=stub.kwargs(), durable=True, state_dir=state)
    assert waiting.status == "waiting" and waiting.state["english"] == ["one", "two", "three"]
    prompts = [r["messages"][-1]["content"] for r in stub.requests]
    assert prompts == ["Translate uno (word 0)", "Translate dos (word 1)", "Translate tres (word 2)"]
    assert [r["step"] for r in waiting.waiting] == ["check.ok"]
    assert [r["step"] for r in dagplan.run_report(waiting.run_id, state).waiting] == ["check.ok"]
    dagplan.answer(waiting.run_id, "check.ok", "approve", state_dir=state)
    done = dagplan.resume(waiting.run_id, model=stub_model, completion_kwargs=stub.kwargs(), state_dir=state)
    assert done.status == "completed" and done.result == "approve"
    assert len(stub.requests) == 3  # nothing asked of the model again


def test_item_reference_in_a_plan_without_any_composition(tmp_path):
    plan = write(tmp_path, "p.yaml", "steps:\n  - id: a\n    tool: t\n    args: {x: $item.name}\n")
    (diag,) = check(plan).errors
    assert diag.code == "item-outside-for-each" and diag.span.line == 4


def test_preview_of_a_gate_shows_its_question_and_choices():
    data = dagplan.preview(str(EXAMPLES / "approve_refund.yaml")).to_json()
    gate = {s["id"]: s for s in data["steps"]}["approve"]
    assert gate["kind"] == "gate" and gate["repeat"] == "asks a person: approve / reject"
    assert gate["prompt"].startswith("Refund †input.amount")


def test_a_run_that_needs_a_decision_goes_on_once_an_operator_adopts_the_step(tmp_path):
    report, _ = kill_then_resume(tmp_path, "side_effect")
    env = {**os.environ, "DAGPLAN_STATE_DIR": str(tmp_path / "state"), "FANOUT_LOG": str(tmp_path / "calls.log"),
           "PURITY": "side_effect"}  # fmt: skip
    decided = subprocess.run(
        [sys.executable, "-m", "dagplan", "resume", report["run_id"], "--on-interrupted", "adopt", "--format", "json"],
        env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert decided.returncode == 0, decided.stderr
    result = json.loads(decided.stdout)["result"]
    assert result[10] is None and result[11:] == [x * x for x in range(11, 20)]  # adopted: no second call
    calls = [int(line) for line in (tmp_path / "calls.log").read_text().split()]
    assert calls == list(range(20))


def test_for_each_over_a_literal_list_with_a_reference_in_it(tmp_path):
    root = with_example_tools(tmp_path)
    (root / "fe.yaml").write_text("inputs:\n  city: {type: string}\nsteps:\n  - id: w\n"
                                  "    for_each: [Rome, †input.city]\n    tool: getWeather\n    args: {city: †item}\n"
                                  "    catch: [{errors: ['*'], output: †state.odd}]\n    output: †state.ws\n")  # fmt: skip
    checked = run_dagplan(root, "check", "fe.yaml", "--tools", "tools.py", "--strict")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    done = run_dagplan(root, "run", "fe.yaml", "--tools", "tools.py", "-i", "city=Lima", "--format", "json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["steps"]["w"]["output"][0] == {"city": "Rome", "sky": "sunny"}
    shown = run_dagplan(root, "preview", "fe.yaml", "--tools", "tools.py")
    assert "(at most 2)" in shown.stdout


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
    bounded = run_dagplan(tmp_path, "check", "p.yaml")
    assert "p.yaml: worst case 10 steps, 10 LLM steps, 10 model calls, <= 1.5k input tokens" in bounded.stderr
    assert "unbounded" not in bounded.stderr
    (tmp_path / "p.yaml").write_text(plan.replace(", maxLength: 200", ""), encoding="utf-8")
    unbounded = run_dagplan(tmp_path, "check", "p.yaml")
    assert "input tokens unbounded (†item.body)" in unbounded.stderr, unbounded.stderr
