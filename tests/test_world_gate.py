"""The one gate to the world, as a property (engine/world.py).

A seeded generator builds plans from every combination of: the tool's purity (none declared, pure,
idempotent, side effect, destructive) x the step's own `purity:` x `trigger` x `on_failure` x a `catch` on
the step read x what that step does (succeeds or fails) x a gate (none, or answered approve / reject / not
at all) and how the plan takes its answer (a plain gate, a routed refusal `†state.ok || †state.no`, a
decision a `when:` reads) x how the acting step reads (a value, a placeholder, a bare `deps`) x nesting
(a step, a sub-plan, a fan-out, a loop) x the door (the API with an `ask_gate`, a durable run answered and
resumed, and on a sample the CLI). Each plan runs; every call of the acting tool is recorded.

Invariant: a call that acts on the world happens only when no gate before it was refused (unless the step
reads the refusal's branch or the decision), never while the run waits for a person, and never on a
failure value. And, so that the test can fail the other way, the clean case acts: when what it reads
succeeded and the gate (if any) was approved, the acting step ran.

``DAGPLAN_PROPERTY_SCALE=N`` runs N times as many combinations (500 a CI run).
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import dagplan
from dagplan.interpreter.tools.catalog import Tool

SEED = 48
COUNT = 500 * int(os.environ.get("DAGPLAN_PROPERTY_SCALE", "1") or 1)
CALLS: list[tuple[str, Any]] = []


def _recording(name: str):
    def fn(value: Any = None, n: Any = None) -> str:
        CALLS.append((name, value))
        return f"{name} done"

    fn.__name__ = name
    return fn


def _read_ok() -> str:
    return "the weather is fine"


def _read_fail() -> str:
    raise ValueError("the weather service is down")


PURITIES = {"none": None, "pure": "pure", "idempotent": "idempotent", "side_effect": "side_effect",
            "destructive": "idempotent"}  # fmt: skip


def tools() -> dict[str, Tool]:
    out = {
        "read_ok": Tool("read_ok", _read_ok, purity="pure"),
        "read_fail": Tool("read_fail", _read_fail, purity="pure"),
    }
    for label, purity in PURITIES.items():
        name = f"act_{label}"
        out[name] = Tool(name, _recording(name), purity=purity, destructive=label == "destructive")
    return out


@dataclass(frozen=True)
class Case:
    tool: str
    step_purity: str | None
    trigger: str | None
    on_failure: str
    catch: bool
    source_fails: bool
    gate: str  # none | approve | reject | unanswered
    route: str  # plain | branch | decided
    reads_decision: bool  # the acting step reads the gate's branch / decision (routes the refusal to itself)
    reads: str  # value | placeholder | deps
    nesting: str  # step | subplan | fanout | loop
    door: str  # api | resume | cli

    @property
    def acts(self) -> bool:
        """The oracle's own purity rule: the tool's word (undeclared acts, destructive acts), `purity:` only stricter."""
        return self.tool in ("none", "side_effect", "destructive") or self.step_purity == "side_effect"

    def describe(self) -> str:
        return json.dumps(self.__dict__)


def cases(count: int, seed: int) -> list[Case]:
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        gate = rng.choice(["none", "approve", "reject", "unanswered"])
        route = rng.choice(["plain", "branch", "decided"]) if gate != "none" else "plain"
        out.append(Case(
            tool=rng.choice(list(PURITIES)),
            step_purity=rng.choice([None, "pure", "idempotent", "side_effect"]),
            trigger=rng.choice([None, "all_succeeded", "all_done", "none_failed", "one_succeeded"]),
            on_failure=rng.choice(["continue", "skip_dependents", "abort"]),
            catch=rng.random() < 0.25,
            source_fails=rng.random() < 0.5,
            gate=gate,
            route=route,
            reads_decision=route != "plain" and rng.random() < 0.4,
            reads=rng.choice(["value", "placeholder", "deps"]),
            nesting=rng.choice(["step", "subplan", "fanout", "loop"]),
            door=rng.choice(["api", "resume"]),
        ))  # fmt: skip
    return out


def plan_of(case: Case) -> dict[str, Any]:
    source: dict[str, Any] = {
        "id": "src",
        "tool": "read_fail" if case.source_fails else "read_ok",
        "output": "$state.src",
    }
    if case.catch:
        source["output"] = "$state.src || $state.src_error"
        source["catch"] = [{"errors": ["ValueError"], "output": "$state.src_error"}]
    steps: list[dict[str, Any]] = [source]
    act: dict[str, Any] = {"id": "act", "output": "$state.out"}
    read = {"value": "$state.src", "placeholder": "Weather: #src", "deps": "fixed"}[case.reads]
    deps = ["src"] if case.reads == "deps" else []
    if case.gate != "none":
        gate: dict[str, Any] = {"id": "ok", "gate": {"question": "Act on the world?", "choices": ["approve", "reject"]}}
        gate["output"] = {"plain": "$state.ok", "branch": "$state.ok || $state.no", "decided": "$state.decision"}[
            case.route
        ]
        steps.append(gate)
        if case.route == "decided":  # a step whose `when:` reads the answer makes a refusal the gate's value
            steps.append(
                {"id": "told", "tool": "read_ok", "when": '$state.decision == "reject"', "output": "$state.told"}
            )
        if case.reads_decision:
            if case.route == "branch":
                read = "$state.no || $state.ok"  # the refusal's branch (or the approval): the plan routes it here
            else:
                act["when"] = '$state.decision == "approve" or $state.decision == "reject"'
        deps.append("ok")
    tool = f"act_{case.tool}"
    purity = {"purity": case.step_purity} if case.step_purity else {}
    if case.nesting == "step":
        act.update(tool=tool, args={"value": read}, **purity)
    elif case.nesting == "fanout":
        act.update(tool=tool, args={"value": read, "n": "$item"}, for_each=[1, 2], max_items=3, **purity)
    else:
        child = {"inputs": {"value": {}}, "steps": [{"id": "inner", "tool": tool, "args": {"value": "$input.value"},
                                                     "output": "$state.r", **purity}], "result": "$state.r"}  # fmt: skip
        act.update(args={"value": read})
        act.update(plan=child) if case.nesting == "subplan" else act.update(loop={"plan": child, "max_iterations": 1})
    if deps:
        act["deps"] = deps
    if case.trigger:
        act["trigger"] = case.trigger
    steps.append(act)
    return {"summary": "property", "on_failure": case.on_failure, "steps": steps}


def run_case(case: Case, state: Path) -> Any:
    """The case's run (None when `check` refused the plan: nothing runs, which is safe)."""
    CALLS.clear()
    try:
        plan = dagplan.load(text=json.dumps(plan_of(case)), name="property.json", tools=tools())
    except dagplan.PlanInvalid as exc:  # e.g. laxer-purity: a step may not make its tool laxer
        assert exc.code == "laxer-purity", exc  # the only refusal the generator can meet
        return None
    answer = {"approve": "approve", "reject": "reject"}.get(case.gate)
    if case.door == "api":
        ask = (lambda request: answer) if answer is not None else None
        return dagplan.run(plan, tools=tools(), ask_gate=ask)
    result = dagplan.run(plan, tools=tools(), durable=True, state_dir=state)
    if str(result.status) == "waiting" and answer is not None:  # a person answers later, from elsewhere
        dagplan.answer(result.run_id, "ok", answer, state_dir=state)
        result = dagplan.resume(result.run_id, tools=tools(), state_dir=state)
    return result


def violations(case: Case, calls: list[tuple[str, Any]], status: str) -> list[str]:
    acting = [value for name, value in calls if name == f"act_{case.tool}"] if case.acts else []
    out = []
    for value in acting:
        if "(FAILED:" in json.dumps(value):
            out.append(f"acted on a failure value: {value!r}")
    refused = case.gate in ("reject", "unanswered")
    routed = case.reads_decision and case.gate == "reject"
    if acting and refused and not routed:
        out.append(f"acted after the gate was {case.gate}")
    clean = (
        not case.source_fails
        and case.gate in ("none", "approve")
        and not (case.reads_decision and case.route == "branch")
    )
    if clean and not calls:
        out.append(f"the clean case did not act (run {status})")
    return out


def test_no_acting_call_unless_approved_and_on_successes_only(tmp_path):
    found = []
    seen: set[tuple] = set()
    ran = 0
    for index, case in enumerate(cases(COUNT, SEED)):
        result = run_case(case, tmp_path / "state")
        if result is None:
            continue
        ran += 1
        seen.add((case.tool, case.trigger, case.gate, case.nesting, case.door))
        problems = violations(case, list(CALLS), str(result.status))
        if problems:
            found.append(f"case {index}: {'; '.join(problems)}\n  {case.describe()}\n  {json.dumps(plan_of(case))}")
    assert not found, f"{len(found)} of {COUNT} combinations broke the gate:\n" + "\n".join(found[:10])
    # most run, and they spread over the 800 combinations of the main axes
    assert ran > COUNT * 3 // 4 and len(seen) > min(ran // 3, 600), (ran, len(seen))


@pytest.mark.parametrize("answer", ["reject", "approve"])
@pytest.mark.parametrize("trigger", ["all_done", "one_succeeded", None])
def test_the_cli_door_holds_the_same_rule(tmp_path, answer, trigger):
    """`dagplan run --answer ok=reject` with the plan's own trigger and on_failure: the side effect never runs."""
    case = Case("side_effect", None, trigger, "continue", False, False, answer, "plain", False, "deps", "step", "cli")
    (tmp_path / "tools.py").write_text(
        "import dagplan, pathlib\n\n@dagplan.tool(purity='pure')\ndef read_ok() -> str:\n    return 'fine'\n\n"
        "@dagplan.tool(purity='side_effect')\ndef act_side_effect(value: str = '', n: int = 0) -> str:\n"
        "    pathlib.Path('ACTED').write_text(str(value))\n    return 'done'\n")  # fmt: skip
    (tmp_path / "plan.json").write_text(json.dumps(plan_of(case)))
    done = subprocess.run([sys.executable, "-m", "dagplan", "run", "plan.json", "--tools", "tools.py", "--answer",
                           f"ok={answer}", "--no-input"], cwd=tmp_path, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "DAGPLAN_STATE_DIR": str(tmp_path / "state")})  # fmt: skip
    if answer == "reject":
        assert not (tmp_path / "ACTED").exists(), done.stdout
        assert done.returncode == 1, done.stdout + done.stderr
        assert "a person refused ok" in done.stdout + done.stderr, done.stdout
    else:
        assert (tmp_path / "ACTED").exists() and done.returncode == 0, done.stdout + done.stderr


def test_a_step_that_acts_is_skipped_as_input_failed_naming_the_failed_step(tmp_path):
    """The CHANGELOG case: a read step failed; the write step (reading its output) never receives the failure
    text, whatever trigger it has, and the run exits 1. A reading step still receives it, as the seeds say."""
    plan = {"steps": [{"id": "read", "tool": "read_fail", "output": "$state.notes"},
                      {"id": "write", "tool": "act_side_effect", "args": {"value": "$state.notes"},
                       "trigger": "all_done", "output": "$state.written"},
                      {"id": "look", "tool": "act_pure", "args": {"value": "$state.notes"}, "output": "$state.seen"}]}  # fmt: skip
    CALLS.clear()
    result = dagplan.run(dagplan.load(text=json.dumps(plan), name="p.json", tools=tools()), tools=tools())
    assert [name for name, _ in CALLS] == ["act_pure"] and "(FAILED: ValueError" in CALLS[0][1]
    write = result.steps["write"]
    assert str(write.status) == "skipped" and "read" in (write.reason or ""), write
    assert result.had_errors


MCP_TOOLS = """import json, os
import dagplan

def _note(name, value):
    with open(os.environ["DAGPLAN_PROPERTY_CALLS"], "a") as f:
        f.write(json.dumps([name, value]) + "\\n")

@dagplan.tool(purity="pure")
def read_ok() -> str:
    return "the weather is fine"

@dagplan.tool(purity="pure")
def read_fail() -> str:
    raise ValueError("the weather service is down")
""" + "".join(
    f"""
@dagplan.tool(name="act_{label}", purity={purity!r})
def act_{label}(value: object = None, n: object = None) -> str:
    _note("act_{label}", value)
    return "done"
"""
    for label, purity in PURITIES.items()
    if label != "destructive"
)


@pytest.mark.extra  # needs an extra (litellm, mcp): not in the core run (requirements/test-core.txt)
def test_the_mcp_door_holds_the_same_rule(tmp_path):
    """`dagplan mcp --allow-run`: a client's plan (its own trigger and on_failure), the server's person gate
    answered approve or reject by a person (`dagplan answer`), then `resume_run`: the same invariant."""
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    (tmp_path / "tools.py").write_text(MCP_TOOLS)
    (tmp_path / "dagplan.toml").write_text('tools = ["tools.py"]\n')
    (tmp_path / ".git").mkdir()
    calls = tmp_path / "calls.jsonl"
    env = {**os.environ, "DAGPLAN_PROPERTY_CALLS": str(calls), "DAGPLAN_STATE_DIR": str(tmp_path / "state"),
           "LITELLM_LOCAL_MODEL_COST_MAP": "True"}  # fmt: skip
    rng = random.Random(SEED)
    sample = [Case(rng.choice(["none", "side_effect", "pure"]), None, rng.choice([None, "all_done", "one_succeeded"]),
                   rng.choice(["continue", "skip_dependents"]), False, rng.random() < 0.5, "none", "plain", False,
                   rng.choice(["value", "deps"]), rng.choice(["step", "subplan"]), "mcp") for _ in range(8)]  # fmt: skip
    answers = [rng.choice(["approve", "reject"]) for _ in sample]
    assert any(c.acts and a == "reject" for c, a in zip(sample, answers))  # the sample meets both answers
    assert any(c.acts and a == "approve" and not c.source_fails for c, a in zip(sample, answers))
    params = StdioServerParameters(command=sys.executable, args=["-m", "dagplan", "mcp", "--allow-run"],
                                   cwd=str(tmp_path), env=env)  # fmt: skip

    async def main() -> list[tuple[Case, str, list]]:
        out = []
        async with Client(params) as client:
            for case, answer in zip(sample, answers):
                calls.write_text("")
                plan = json.dumps(plan_of(case))
                started = (await client.call_tool("run_plan", {"plan": plan})).structured_content
                if started.get("status") == "waiting":
                    dagplan.answer(started["run_id"], started["waiting"][0]["step"], answer,
                                   state_dir=tmp_path / "state")  # fmt: skip
                    await client.call_tool("resume_run", {"run_id": started["run_id"]})
                made = [json.loads(line) for line in calls.read_text().splitlines()]
                out.append((case, answer, [(name, value) for name, value in made]))
        return out

    for case, answer, made in asyncio.run(asyncio.wait_for(main(), 240)):
        acted = [value for name, value in made if case.acts and name == f"act_{case.tool}"]
        assert not (acted and answer == "reject"), (case, answer, made)  # a person's no holds every acting step
        assert not any("(FAILED:" in json.dumps(value) for value in acted), (case, made)
        if not case.source_fails and answer == "approve" and case.acts:
            assert acted, (case, made)  # and a yes lets the clean case act


@pytest.mark.extra  # needs an extra (litellm, mcp): not in the core run (requirements/test-core.txt)
def test_the_streamed_door_holds_the_same_rule(stub, tmp_path):
    """The same plans as a model's answer, streamed (`dagplan.plan(..., run=True, stream=True)`): a step may
    start while the plan is written only on its tool's own word, the whole plan is approved or refused by a
    person, and the rule holds for what runs after."""
    from llm_stub import streamed

    rng = random.Random(SEED + 1)
    # every tool that acts x every step `purity:` a model may write x the person's yes and no (f01's class),
    # then a random sample of the rest
    sample = [Case(tool, purity, None, "continue", False, False, "none", "plain", False, "value", "step", "stream")
              for tool in ("none", "side_effect", "destructive") for purity in (None, "pure", "idempotent")
              for _ in (0, 1)]  # fmt: skip
    approvals = [index % 2 == 0 for index in range(len(sample))]
    more = [c for c in cases(400, SEED + 1) if c.nesting in ("step", "fanout") and c.route == "plain"][:16]
    sample += more
    approvals += [rng.random() < 0.7 for _ in more]
    assert any(c.acts and ok for c, ok in zip(sample, approvals)) and any(c.acts and not ok for c, ok in zip(sample,
                                                                                                           approvals))  # fmt: skip
    for case, approved in zip(sample, approvals):
        CALLS.clear()
        stub.script(streamed(json.dumps(plan_of(case))))
        answer = {"approve": "approve", "reject": "reject"}.get(case.gate)
        try:
            result = dagplan.plan("do the task", tools=tools(), model="openai/gpt-4o-mini", run=True, stream=True,
                                  completion_kwargs=stub.kwargs(), state_dir=tmp_path / "state", repair=0,
                                  approve=lambda preview, ok=approved: ok,
                                  ask_gate=(lambda request, a=answer: a) if answer else None).run  # fmt: skip
            status = str(result.status)
        except dagplan.DagplanError as exc:  # refused by a person, or by check: nothing that acts ran
            status = exc.code
        problems = violations(case, list(CALLS), status if approved else "not-approved")
        if not approved or status == "planning-failed":  # nothing was to run: safety holds, liveness is moot
            problems = [p for p in problems if "clean case" not in p]
            acting = [v for n, v in CALLS if case.acts and n == f"act_{case.tool}"]
            assert not acting, (case.describe(), "acted though the person refused the whole plan", CALLS)
        assert not problems, (case.describe(), problems, status)


def test_one_predicate_decides_whether_a_step_acts():
    """Issue 60: whether a step acts is asked of one function (dsl.ir.can_act) everywhere a decision depends on
    it. No second test of it remains in the code: no comparison of a purity (``purity_of(...)``, a step's or a
    tool's) with ``"side_effect"`` outside can_act (and resume_class, which asks it), walked in the source."""
    import ast

    root = Path(__file__).resolve().parent.parent
    found = []
    for folder in ("dsl", "interpreter", "dagplan"):
        for path in sorted((root / folder).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            owners = {}
            for fn in ast.walk(tree):
                if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    for node in ast.walk(fn):
                        owners.setdefault(id(node), fn.name)
            for node in ast.walk(tree):
                if not isinstance(node, ast.Compare):
                    continue
                sides = [node.left, *node.comparators]
                if not any(isinstance(s, ast.Constant) and s.value == "side_effect" for s in sides):
                    continue
                called = [s for s in sides if isinstance(s, ast.Call)]
                names = {getattr(c.func, "id", getattr(c.func, "attr", "")) for c in called}
                if names & {"purity_of", "purity", "_purity"} and owners.get(id(node)) != "can_act":
                    found.append(f"{path.relative_to(root)}:{node.lineno} (in {owners.get(id(node))})")
    assert not found, "a second test of 'does this step act' (ask dsl.ir.can_act): " + ", ".join(found)
