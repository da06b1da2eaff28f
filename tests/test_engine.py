"""The eager interpreter: concurrency, references, branching, joins, skips, retries, failures."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

import dagplan
from dagplan import Branch, TransientError, tool
import os
import subprocess
import sys


def plan_of(yaml: str):
    return dagplan.load(text=yaml)


class Clock:
    """Records when each call started and ended, to assert overlap without timing thresholds."""

    def __init__(self):
        self.spans: dict[str, tuple[float, float]] = {}
        self.running = 0
        self.peak = 0
        self.lock = threading.Lock()

    def enter(self):
        with self.lock:
            self.running += 1
            self.peak = max(self.peak, self.running)
        return time.perf_counter()

    def leave(self, name, start):
        with self.lock:
            self.running -= 1
            self.spans[name] = (start, time.perf_counter())

    def overlap(self, a, b) -> bool:
        (a0, a1), (b0, b1) = self.spans[a], self.spans[b]
        return a0 < b1 and b0 < a1


TWO_INDEPENDENT = """
steps:
  - {id: a, tool: nap, args: {name: a}, output: †state.a}
  - {id: b, tool: nap, args: {name: b}, output: †state.b}
  - {id: c, tool: join, args: {x: †state.a, y: †state.b}}
"""


def test_independent_async_steps_run_concurrently():
    clock = Clock()

    @tool
    async def nap(name: str) -> str:
        start = clock.enter()
        await asyncio.sleep(0.2)
        clock.leave(name, start)
        return name

    @tool
    def join(x: str, y: str) -> str:
        return x + y

    result = dagplan.run(plan_of(TWO_INDEPENDENT), tools=[nap, join])
    assert result.status == "completed" and result.result == "ab"
    assert clock.overlap("a", "b")


def test_sync_tools_run_in_worker_threads_concurrently():
    clock = Clock()

    @tool
    def nap(name: str) -> str:
        start = clock.enter()
        time.sleep(0.2)
        clock.leave(name, start)
        return name

    @tool
    def join(x: str, y: str) -> str:
        return x + y

    result = dagplan.run(plan_of(TWO_INDEPENDENT), tools=[nap, join])
    assert result.result == "ab"
    assert clock.overlap("a", "b")


def test_max_concurrency_is_never_exceeded():
    clock = Clock()

    @tool
    async def nap(name: str) -> str:
        start = clock.enter()
        await asyncio.sleep(0.01)
        clock.leave(name, start)
        return name

    steps = "\n".join(f"  - {{id: s{i}, tool: nap, args: {{name: s{i}}}}}" for i in range(20))
    result = dagplan.run(plan_of("steps:\n" + steps), tools=[nap], max_concurrency=3)
    assert result.status == "completed"
    assert clock.peak == 3


WEATHER = """
inputs: {city: {type: string}}
steps:
  - {id: weather, tool: getWeather, args: {city: †input.city}, output: †state.sunny || †state.notSunny}
  - {id: park, tool: suggest, args: {what: park, w: †state.sunny}, output: †state.suggestion}
  - {id: picnic, tool: suggest, args: {what: "picnic after #park"}, output: †state.picnic}
  - {id: movie, tool: suggest, args: {what: movie, w: †state.notSunny}, output: †state.suggestion}
  - {id: present, tool: suggest, args: {what: †state.suggestion}, output: †state.message}
result: †state.message
"""


@tool
def getWeather(city: str):
    return {"sky": "sun"} if city == "Rome" else Branch("†state.notSunny", {"sky": "rain"})


@tool
def suggest(what: str, w: dict | None = None) -> str:
    return f"go: {what}"


@pytest.mark.parametrize(
    "city, taken, skipped, message",
    [("Rome", "park", {"movie"}, "go: go: park"), ("Oslo", "movie", {"park", "picnic"}, "go: go: movie")],
)
def test_branch_join_and_transitive_skips(city, taken, skipped, message):
    result = dagplan.run(plan_of(WEATHER), tools=[getWeather, suggest], inputs={"city": city})
    statuses = {sid: s.status for sid, s in result.steps.items()}
    assert {sid for sid, st in statuses.items() if st == "skipped"} == skipped
    assert statuses[taken] == "completed" and statuses["present"] == "completed"
    assert result.result == message and not result.had_errors


def test_branch_with_unknown_alternative_fails_the_step():
    @tool
    def pick():
        return Branch("†state.nowhere", 1)

    plan = plan_of("steps:\n  - {id: p, tool: pick, output: †state.a || †state.b}")
    result = dagplan.run(plan, tools=[pick])
    # a branching step's failure goes to its last alternative as an error object
    assert result.steps["p"].status == "handled"
    assert "not one of its output paths" in result.state["b"]["message"]


def test_retries_transient_errors_with_backoff_events():
    calls = []

    @tool
    def flaky() -> str:
        calls.append(1)
        if len(calls) < 3:
            raise TransientError("try again")
        return "ok"

    events = []
    plan = plan_of("steps:\n  - {id: f, tool: flaky, retry: {limit: 3, backoff: 0.01}}")
    result = dagplan.run(plan, tools=[flaky], subscribers=[events.append])
    assert result.steps["f"].status == "completed" and result.steps["f"].attempts == 3
    retries = [e for e in events if e.type == "plan_step_retrying"]
    assert [e.data["attempt"] for e in retries] == [1, 2]
    assert retries[0].data["delay"] <= 0.01 and retries[1].data["delay"] <= 0.02
    assert retries[1].data["delay"] >= 0.01  # exponential: the second wait is at least the base


def test_non_transient_errors_are_not_retried():
    @tool
    def broken():
        raise KeyError("nope")

    result = dagplan.run(plan_of("steps:\n  - {id: b, tool: broken}"), tools=[broken])
    assert result.steps["b"].attempts == 1 and result.steps["b"].status == "failed"


def test_retry_budget_can_be_extended_by_the_hook():
    calls = []

    @tool
    def flaky():
        calls.append(1)
        if len(calls) < 4:
            raise ConnectionError("reset")
        return "ok"

    asked = []

    def extend(step_id, error, attempts):
        asked.append((step_id, attempts))
        return True

    plan = plan_of("steps:\n  - {id: f, tool: flaky, retry: {limit: 2, backoff: 0}}")
    result = dagplan.run(plan, tools=[flaky], on_limit_exceeded=extend)
    assert result.steps["f"].status == "completed" and result.steps["f"].attempts == 4
    assert asked == [("f", 3)]


def test_exhausted_retries_fail_without_the_hook():
    @tool
    def down():
        raise TimeoutError()

    plan = plan_of("steps:\n  - {id: d, tool: down, retry: {limit: 2, backoff: 0}}")
    result = dagplan.run(plan, tools=[down])
    assert result.steps["d"].status == "failed" and result.steps["d"].attempts == 3


FAILING = """
{on_failure}
steps:
  - {{id: a, tool: boom, output: †state.a}}
  - {{id: b, tool: echo, args: {{text: "got #a"}}, output: †state.b}}
  - {{id: c, tool: echo, args: {{text: †state.b}}}}
  - {{id: d, tool: echo, args: {{text: independent}}}}
  - {{id: e, tool: echo, args: {{text: †state.a.field}}}}
"""


@tool
def boom():
    raise ValueError("bad input")


@tool(purity="pure")  # a step that reads: it receives a failure's text (one that may act never does)
def echo(text: str) -> str:
    return text


def test_failed_step_hands_dependents_the_failure_text():
    result = dagplan.run(plan_of(FAILING.format(on_failure="")), tools=[boom, echo])
    assert result.had_errors and result.status == "completed"
    assert result.steps["a"].status == "failed"
    assert result.steps["b"].output == "got (FAILED: ValueError: bad input)"
    assert result.steps["c"].status == "completed" and result.steps["d"].status == "completed"
    assert result.steps["e"].output == "(FAILED: ValueError: bad input)"  # a reader below the failed path too


def test_skip_dependents_policy():
    result = dagplan.run(plan_of(FAILING.format(on_failure="on_failure: skip_dependents")), tools=[boom, echo])
    statuses = {sid: s.status for sid, s in result.steps.items()}
    assert statuses == {"a": "failed", "b": "skipped", "c": "skipped", "d": "completed", "e": "skipped"}


def test_abort_policy_stops_the_run():
    result = dagplan.run(plan_of(FAILING.format(on_failure="on_failure: abort")), tools=[boom, echo], max_concurrency=1)
    assert result.status == "aborted" and result.had_errors
    assert result.steps["b"].status == "skipped" and result.steps["c"].status == "skipped"


def test_failure_of_a_branching_step_goes_to_the_last_alternative():
    @tool
    def pay(amount: float):
        raise RuntimeError("card declined")

    plan = plan_of(
        """
steps:
  - {id: pay, tool: pay, args: {amount: 5}, output: †state.receipt || †state.error}
  - {id: ok, tool: echo, args: {text: †state.receipt}}
  - {id: report, tool: echo, args: {text: †state.error.message}}
"""
    )
    result = dagplan.run(plan, tools=[pay, echo])
    assert result.steps["pay"].status == "handled" and not result.had_errors
    assert result.state["error"] == {"step": "pay", "type": "RuntimeError", "message": "card declined"}
    assert result.steps["ok"].status == "skipped"
    assert result.steps["report"].output == "card declined"


def test_timeout_is_transient_and_reported():
    @tool(purity="pure")
    async def slow():
        await asyncio.sleep(5)

    plan = plan_of("steps:\n  - {id: s, tool: slow, timeout: 50ms, retry: {limit: 1, backoff: 0}}")
    result = dagplan.run(plan, tools=[slow])
    step = result.steps["s"]
    assert step.status == "failed" and step.attempts == 2
    assert step.error["type"] == "TimeoutError" and "0.05s" in step.error["message"]


def test_a_step_that_acts_is_never_tried_again_after_a_timeout():
    """Its attempt may still be acting (issue 60): one attempt, whatever `retry:` says; the error says the
    outcome is unknown (a resume asks)."""

    @tool
    async def slow_act():  # declares nothing: it acts
        await asyncio.sleep(5)

    plan = plan_of("steps:\n  - {id: s, tool: slow_act, timeout: 50ms, retry: {limit: 3, backoff: 0}}")
    step = dagplan.run(plan, tools=[slow_act]).steps["s"]
    assert step.status == "failed" and step.attempts == 1
    assert step.error["outcome"] == "unknown" and "may or may not have acted" in step.error["message"]


def test_fallback_and_join_expressions():
    @tool
    def second():
        return Branch(1, "other")

    plan = plan_of(
        """
steps:
  - {id: w, tool: echo, args: {text: hi}, output: †state.a && †state.b}
  - {id: br, tool: second, output: †state.missing || †state.other}
  - {id: f, tool: echo, args: {text: †state.missing || †state.b}}
  - {id: j, tool: echo, args: {text: †state.a && †state.b}}
"""
    )
    result = dagplan.run(plan, tools=[echo, second])
    assert result.state["a"] == result.state["b"] == "hi"
    assert result.steps["f"].output == "hi" and result.steps["j"].output == "hi"


def test_placeholder_views():
    @tool
    def text() -> str:
        return "\n\n  first line  \nsecond line\nthird"

    plan = plan_of(
        """
steps:
  - {id: t, tool: text}
  - {id: v, tool: echo, args: {text: "[#t.summary][#t.head=5][#t.last=5][#t.head=100]"}}
"""
    )
    out = dagplan.run(plan, tools=[text, echo]).steps["v"].output
    assert out == "[first line][first\u2026][\u2026third][first line  \nsecond line\nthird]"


def test_precomputed_output_is_not_executed():
    calls = []

    @tool
    def summarize(text: str) -> str:
        calls.append(text)
        return "computed"

    plan = dagplan.load(text='[{"_tool": "summarize", "text": "x", "_output": "given", "_outputPath": "†state.s"}]')
    events = []
    result = dagplan.run(plan, tools=[summarize], subscribers=[events.append])
    assert calls == [] and result.state["s"] == "given"
    done = [e for e in events if e.type == "plan_step_completed"]
    assert done[0].data["precomputed"] is True


def test_result_defaults_to_last_step_in_order():
    plan = plan_of("steps:\n  - {id: E10, tool: echo, args: {text: ten}}\n  - {id: E2, tool: echo, args: {text: two}}")
    assert dagplan.run(plan, tools=[echo]).result == "ten"  # E2 sorts before E10


def test_lazy_plan_needs_approval():
    plan = plan_of("mode: lazy\nsteps:\n  - {id: a, tool: echo, args: {text: x}}")
    with pytest.raises(dagplan.RunError) as err:
        dagplan.run(plan, tools=[echo])
    assert err.value.code == "approval-required"
    with pytest.raises(dagplan.RunError) as err:
        dagplan.run(plan, tools=[echo], approve=lambda preview: False)
    assert err.value.code == "not-approved"
    seen = []
    result = dagplan.run(plan, tools=[echo], approve=lambda p: seen.append(p.order) or True)
    assert result.result == "x" and seen == [("a",)]


def test_inputs_are_validated_and_defaulted():
    plan = plan_of(
        "inputs: {n: {type: integer}, who: {type: string, default: you}}\n"
        "steps:\n  - {id: a, tool: echo, args: {text: '†input.who †input.n'}}"
    )
    assert dagplan.run(plan, tools=[echo], inputs={"n": 3}).result == "you 3"
    with pytest.raises(dagplan.RunError) as err:
        dagplan.run(plan, tools=[echo], inputs={"n": "three"})
    assert err.value.code == "bad-input"
    with pytest.raises(dagplan.RunError) as err:
        dagplan.run(plan, tools=[echo])
    assert err.value.code == "missing-input"


def test_events_cover_the_lifecycle_in_order():
    events = []
    dagplan.run(plan_of(FAILING.format(on_failure="")), tools=[boom, echo], subscribers=[events.append])
    types = [e.type for e in events]
    assert types[0] == "plan_started" and types[-1] == "plan_completed"
    assert types.count("plan_step_started") == 5 and "plan_step_failed" in types
    run_ids = {e.run_id for e in events}
    assert len(run_ids) == 1
    completed = [e for e in events if e.type == "plan_step_completed"]
    assert all(e.duration is not None and e.duration >= 0 for e in completed)


def test_several_plans_run_concurrently_in_one_process():
    @tool
    async def wait(seconds: float) -> float:
        await asyncio.sleep(seconds)
        return seconds

    async def main():
        slow = dagplan.arun(plan_of("steps:\n  - {id: a, tool: wait, args: {seconds: 0.3}}"), tools=[wait])
        fast = dagplan.arun(plan_of("steps:\n  - {id: a, tool: wait, args: {seconds: 0.01}}"), tools=[wait])
        finished = []
        for next_done in asyncio.as_completed([slow, fast]):
            finished.append(await next_done)
        return finished

    first, second = asyncio.run(main())
    assert first.result == 0.01 and second.result == 0.3
    assert first.run_id != second.run_id


def test_tool_not_given_to_the_run_is_rejected_before_running():
    plan = "steps:\n  - {id: a, tool: secret}"
    with pytest.raises(dagplan.PlanInvalid) as err:
        dagplan.run(plan, tools=[echo])
    assert err.value.code == "unknown-tool"


def test_run_result_json_shape():
    result = dagplan.run(plan_of(FAILING.format(on_failure="")), tools=[boom, echo])
    data = result.to_json()
    assert set(data) >= {"run_id", "status", "had_errors", "result", "steps"}
    assert data["steps"]["a"]["status"] == "failed" and data["steps"]["d"]["output"] == "independent"
    assert set(data["steps"]["d"]) >= {"status", "output", "attempts"}


def test_nested_initial_state_and_precomputed_values_are_plain_data():
    @tool
    def add(n: int, box: dict) -> int:
        box["seen"] = True  # a tool may mutate what it is given without touching the plan
        return n + box["base"]

    plan = plan_of(
        """
initial_state: {box: {base: 40, tags: [a]}}
steps:
  - {id: two, tool: add, args: {n: 2, box: †state.box}, output: †state.answer}
"""
    )
    first = dagplan.run(plan, tools=[add])
    second = dagplan.run(plan, tools=[add])
    assert first.result == second.result == 42
    assert "seen" not in first.state["box"]  # nor the run's shared state
    assert plan.initial_state["box"]["tags"] == ("a",)  # the plan itself is untouched


def test_a_value_that_does_not_fit_the_tools_parameter_fails_the_step_before_the_call():
    """What `check` says when it knows the value's type (bad-argument), the engine says before the call."""
    calls = []

    @dagplan.tool(purity="pure")
    def days_of(count: int) -> int:
        calls.append(count)
        return count

    plan = dagplan.load(text='{"steps": [{"id": "a", "tool": "days_of", "args": {"count": "$input.n"}, "output": '
                             '"$state.d"}]}', tools=[days_of])  # fmt: skip
    failed = dagplan.run(plan, tools=[days_of], inputs={"n": "three"})
    step = failed.steps["a"]
    assert calls == [] and str(step.status) == "failed"
    assert "bad-argument: argument 'count' must be integer, not string (tool days_of)" in str(step.output)
    assert dagplan.run(plan, tools=[days_of], inputs={"n": 3}).result == 3 and calls == [3]


def test_the_engine_s_argument_check_says_what_the_one_type_rule_says_for_every_value():
    """The engine checks each call's arguments through sets worked out once a tool (the hot path); whatever
    the declared type and the value (subclasses, whole floats, booleans, nested values), it refuses exactly
    what ``argument_problem`` (``check``'s rule) refuses, with its words."""
    import enum

    from hypothesis import given, settings, strategies as st

    from dagplan.dsl.validate_tools import argument_problem
    from dagplan.interpreter.engine.attempts import StepFailure
    from dagplan.interpreter.engine.scope import bad_arguments
    from dagplan.interpreter.tools.catalog import Tool

    class Colour(str, enum.Enum):
        RED = "red"

    class Count(enum.IntEnum):
        ONE = 1

    kinds = ["string", "integer", "number", "boolean", "object", "array", "null"]
    declared = st.one_of(st.none(), st.sampled_from(kinds), st.lists(st.sampled_from(kinds), min_size=1, max_size=3))
    leaf = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=3),
                     st.sampled_from([Colour.RED, Count.ONE, 2.0, -0.0]))  # fmt: skip
    values = st.recursive(leaf, lambda inner: st.lists(inner, max_size=2) | st.dictionaries(st.text(max_size=2), inner, max_size=2), max_leaves=4)  # fmt: skip

    @settings(max_examples=400, deadline=None)
    @given(st.dictionaries(st.sampled_from("abc"), st.tuples(declared, values), min_size=1))
    def agree(params):
        properties = {name: ({} if kind is None else {"type": kind}) for name, (kind, _) in params.items()}
        tool = Tool("t", lambda **kw: None, parameters={"type": "object", "properties": properties})
        args = {name: value for name, (_, value) in params.items()}
        expected = [p for name, value in args.items() if (p := argument_problem(tool.parameters, name, value))]
        try:
            bad_arguments(tool, args)
            said = []
        except StepFailure as exc:
            said = [str(exc)]
        assert said == ([f"bad-argument: {expected[0]} (tool t)"] if expected else [])

    agree()


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


@pytest.mark.extra  # needs an extra (litellm, mcp): not in the core run (requirements/test-core.txt)
def test_a_library_a_step_needs_is_loaded_before_the_run_s_clock_starts(tmp_path):
    """A step's duration is its own work: litellm (about 3 s to import) is loaded before the run starts."""
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    done = subprocess.run([sys.executable, "-c", WARM], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=120)  # fmt: skip
    assert done.stdout.strip() == "{'litellm': True}", done.stdout + done.stderr
