"""LLM steps through litellm's real HTTP path, against the stub server."""

from __future__ import annotations

import asyncio
import json
import os
import pickle
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from dagplan.dsl.ir import LLMCall, Template, ToolSpec
from dagplan.interpreter.llm.conversation import (
    Budget,
    BudgetExceeded,
    LLMStepError,
    MemoryMemo,
    default_model,
    parse_json,
    run_llm_step,
)
from llm_stub import error, json_reply, text, tool_calls

REPO = Path(__file__).resolve().parents[1]
ADD = ToolSpec(
    "add", "Add two numbers.", {"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}}
)


def call(prompt: str = "Say hi", **kw) -> LLMCall:
    return LLMCall(prompt=Template((prompt,)), **kw)


def run(stub, model, llm_call=None, prompt="Say hi", system=None, **kw):
    return asyncio.run(
        run_llm_step("s1", llm_call or call(prompt), prompt, system, model=model, completion_kwargs=stub.kwargs(), **kw)
    )


def adder(journal: list | None = None):
    async def add(a, b):
        if journal is not None:
            journal.append((a, b))
        return {"sum": a + b}

    return {"add": add}


def test_plain_text_answer_and_request_shape(stub, stub_model):
    stub.script(text("Hello there"))
    result = run(stub, stub_model, system="Be brief.")
    assert result.output == "Hello there"
    assert (result.calls, result.replayed, result.alternative) == (1, 0, 0)
    body = stub.requests[0]
    assert body["messages"] == [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Say hi"}]
    assert "tools" not in body and "response_format" not in body


def test_cost_comes_from_the_offline_cost_map(stub, stub_model):
    stub.script(text("a", prompt_tokens=1000, completion_tokens=500))
    result = run(stub, stub_model)
    assert (result.prompt_tokens, result.completion_tokens) == (1000, 500)
    # gpt-4o-mini: $0.15 / 1M input tokens, $0.60 / 1M output tokens
    assert result.cost == pytest.approx(1000 * 0.15e-6 + 500 * 0.6e-6)


def test_sampling_params_are_passed(stub, stub_model):
    stub.script(text("x"))
    run(stub, stub_model, llm_call=call(params={"temperature": 0.2, "max_tokens": 50}))
    assert stub.requests[0]["temperature"] == 0.2
    assert stub.requests[0]["max_tokens"] == 50


def test_tool_calling_loop_through_real_http_path(stub, stub_model):
    journal: list = []
    stub.script(tool_calls(("add", {"a": 2, "b": 3})), text("The sum is 5."))
    result = run(
        stub,
        stub_model,
        llm_call=call("2+3?", tools=("add",)),
        prompt="2+3?",
        tools=adder(journal),
        tool_specs={"add": ADD},
    )
    assert result.output == "The sum is 5."
    assert journal == [(2, 3)]
    assert result.calls == 2
    first, second = stub.requests
    assert first["tools"][0]["function"]["name"] == "add"
    assert first["tools"][0]["function"]["parameters"]["properties"]["a"] == {"type": "number"}
    tool_message = second["messages"][-1]
    assert tool_message["role"] == "tool" and tool_message["tool_call_id"] == "call_1"
    assert json.loads(tool_message["content"]) == {"sum": 5}
    assert second["messages"][-2]["tool_calls"][0]["function"]["name"] == "add"


def test_tool_loop_stops_at_its_bound(stub, stub_model):
    stub.default = tool_calls(("add", {"a": 1, "b": 1}))
    with pytest.raises(LLMStepError) as caught:
        run(stub, stub_model, tools=adder(), tool_specs={"add": ADD}, max_iterations=3)
    assert caught.value.code == "max-iterations"
    assert "after 3 model calls" in str(caught.value)
    assert "step 's1'" in str(caught.value)
    assert stub.count == 3


def test_step_max_iterations_wins_over_default(stub, stub_model):
    stub.default = tool_calls(("add", {"a": 1, "b": 1}))
    with pytest.raises(LLMStepError):
        run(stub, stub_model, llm_call=call(max_iterations=2), tools=adder(), tool_specs={"add": ADD})
    assert stub.count == 2


def test_tool_problems_go_back_to_the_model(stub, stub_model):
    async def broken(**kw):
        raise ValueError("no such customer")

    stub.script(tool_calls(("broken", {}), ("nope", {})), text("sorry"))
    result = run(stub, stub_model, tools={"broken": broken}, tool_specs={"broken": ToolSpec("broken")})
    assert result.output == "sorry"
    answers = [m["content"] for m in stub.requests[1]["messages"] if m["role"] == "tool"]
    assert answers == ["error: ValueError: no such customer", "error: unknown tool 'nope'; available: broken"]


def test_output_schema_parses_and_validates(stub, stub_model):
    schema = {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]}
    stub.script(text('Here you go:\n```json\n{"id": "r-1"}\n```\nanything else?'))
    result = run(stub, stub_model, llm_call=call(output_schema=schema))
    assert result.output == {"id": "r-1"}
    fmt = stub.requests[0]["response_format"]
    assert fmt["type"] == "json_schema" and fmt["json_schema"]["schema"] == schema


def test_output_schema_mismatch_is_a_step_failure_with_the_reason(stub, stub_model):
    schema = {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]}
    stub.script(json_reply({"id": 7}))
    with pytest.raises(LLMStepError) as caught:
        run(stub, stub_model, llm_call=call(output_schema=schema))
    assert caught.value.code == "output-schema"
    assert "['id']: 7 is not of type 'string'" in str(caught.value)


def test_output_not_json_is_a_step_failure(stub, stub_model):
    stub.script(text("I cannot do that."))
    with pytest.raises(LLMStepError, match="not JSON"):
        run(stub, stub_model, llm_call=call(output_schema={"type": "object"}))


def test_json_mode_for_models_without_schema_support(stub):
    stub.script(json_reply({"ok": True}))
    result = run(stub, "openai/some-local-model", llm_call=call(output_schema={"type": "object"}))
    assert result.output == {"ok": True}
    body = stub.requests[0]
    assert body["response_format"] == {"type": "json_object"}
    assert "JSON Schema" in body["messages"][0]["content"]


def test_branching_output_lets_the_model_pick(stub, stub_model):
    stub.script(json_reply({"alternative": "\u2020state.error", "value": "card declined"}))
    result = run(stub, stub_model, alternatives=("\u2020state.receipt", "\u2020state.error"))
    assert (result.output, result.alternative) == ("card declined", 1)
    schema = stub.requests[0]["response_format"]["json_schema"]["schema"]
    assert schema["properties"]["alternative"]["enum"] == ["\u2020state.receipt", "\u2020state.error"]


def test_branching_output_rejects_unknown_alternative(stub, stub_model):
    stub.script(json_reply({"alternative": "\u2020state.other", "value": 1}))
    with pytest.raises(LLMStepError) as caught:
        run(stub, stub_model, alternatives=("\u2020state.a", "\u2020state.b"))
    assert caught.value.code == "output-schema"


def test_memo_replays_every_completed_call(stub, stub_model):
    memo, journal = MemoryMemo(), []
    stub.script(tool_calls(("add", {"a": 1, "b": 2})), text("3"))
    kwargs = dict(tools=adder(journal), tool_specs={"add": ADD}, memo=memo)
    first = run(stub, stub_model, **kwargs)
    again = run(stub, stub_model, **kwargs)
    assert stub.count == 2 and journal == [(1, 2)]
    assert (again.output, again.calls, again.replayed) == ("3", 0, 2)
    assert (again.prompt_tokens, again.cost) == (first.prompt_tokens, first.cost)


def test_memo_key_ignores_transport_settings(stub, stub_model):
    memo = MemoryMemo()
    stub.script(text("x"))
    run(stub, stub_model, memo=memo)
    result = asyncio.run(
        run_llm_step(
            "s1",
            call(),
            "Say hi",
            None,
            model=stub_model,
            memo=memo,
            completion_kwargs={"api_base": stub.url, "api_key": "another"},
        )
    )
    assert (result.calls, stub.count) == (0, 1)


def test_budget_stops_after_the_call_that_passes_it(stub, stub_model):
    budget = Budget(max_tokens=20)  # each stub call costs 18 tokens
    stub.default = tool_calls(("add", {"a": 1, "b": 1}))
    with pytest.raises(BudgetExceeded) as caught:
        run(stub, stub_model, tools=adder(), tool_specs={"add": ADD}, budget=budget)
    assert caught.value.code == "budget-exceeded"
    assert "token budget reached: 36 of max_tokens 20 (at step 's1')" in str(caught.value)
    assert stub.count == 2
    assert budget.by_step["s1"]["prompt_tokens"] == 22


def test_budget_already_spent_sends_nothing(stub, stub_model):
    budget = Budget(max_cost=0.01, cost=0.01)
    with pytest.raises(BudgetExceeded, match="cost budget reached"):
        run(stub, stub_model, budget=budget)
    assert stub.count == 0


def test_provider_errors_become_step_errors(stub, stub_model):
    stub.script(error(503, "overloaded"), error(401, "bad key"))
    with pytest.raises(LLMStepError) as first:
        run(stub, stub_model)
    assert first.value.code == "llm-unavailable" and first.value.transient
    with pytest.raises(LLMStepError) as second:
        run(stub, stub_model)
    assert second.value.code == "llm-call-failed" and not second.value.transient
    assert "bad key" in str(second.value)


def test_errors_pickle():
    err = LLMStepError.make("max-iterations", "step 'x': bound hit")
    back = pickle.loads(pickle.dumps(err))
    assert (type(back), back.code, str(back)) == (LLMStepError, "max-iterations", str(err))


def test_default_model(monkeypatch):
    monkeypatch.delenv("DAGPLAN_MODEL", raising=False)
    with pytest.raises(LLMStepError) as caught:
        default_model()
    assert caught.value.code == "no-model"
    monkeypatch.setenv("DAGPLAN_MODEL", "env-model")
    assert default_model() == "env-model"
    assert default_model(configured="cfg") == "cfg"
    assert default_model("step", "cfg") == "step"


@pytest.mark.parametrize(
    "answer, value",
    [
        ('{"a": 1}', {"a": 1}),
        ("Sure! ```json\n[1, 2]\n``` hope {this} helps", [1, 2]),
        ('text {not json} then {"b": 2}', {"b": 2}),
    ],
)
def test_parse_json_tolerates_prose(answer, value):
    assert parse_json(answer) == value


def test_importing_dagplan_does_not_import_litellm():
    code = (
        "import sys, dagplan, dagplan.dsl, dagplan.interpreter.llm.conversation, dagplan.interpreter.llm.planner, "
        "dagplan.interpreter.llm.score; print('litellm' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True)
    assert out.stdout.strip() == "False"


# --- kill -9 in the middle of a step, then resume ----------------------------------------------

CHILD = textwrap.dedent("""
    import asyncio, json, os, sys
    from dagplan.dsl.ir import LLMCall, Template, ToolSpec
    from dagplan.interpreter.llm.conversation import run_llm_step

    memo_path, journal_path, api_base = sys.argv[1:4]

    class FileMemo:  # a durable memo: one fsynced JSON line per completed call
        def __init__(self):
            self.values = {}
            if os.path.exists(memo_path):
                for line in open(memo_path):
                    if line.endswith("\\n"):
                        key, value = json.loads(line)
                        self.values[key] = value
        def memo_get(self, key):
            return key in self.values, self.values.get(key)
        def memo_put(self, key, value, call=None):
            self.values[key] = value
            with open(memo_path, "a") as f:
                f.write(json.dumps([key, value]) + "\\n"); f.flush(); os.fsync(f.fileno())

    async def add(a, b):
        with open(journal_path, "a") as f:
            f.write(f"{a}+{b}\\n"); f.flush(); os.fsync(f.fileno())
        return a + b

    spec = ToolSpec("add", "Add.", {"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}})
    result = asyncio.run(run_llm_step(
        "sum", LLMCall(Template(("add things",)), tools=("add",)), "add things", None,
        model="openai/gpt-4o-mini", tools={"add": add}, tool_specs={"add": spec}, memo=FileMemo(),
        completion_kwargs={"api_base": api_base, "api_key": "x"}))
    print(json.dumps({"output": result.output, "calls": result.calls, "replayed": result.replayed}))
""")


def test_kill_9_mid_step_then_resume_repeats_only_the_interrupted_call(stub, tmp_path):
    from llm_stub import hang

    memo, journal = tmp_path / "memo.jsonl", tmp_path / "journal.txt"
    args = [sys.executable, "-c", CHILD, str(memo), str(journal), stub.url]
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    stub.script(tool_calls(("add", {"a": 1, "b": 2})), tool_calls(("add", {"a": 3, "b": 4})), hang())
    child = subprocess.Popen(args, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while stub.count < 3 and child.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert stub.count == 3, child.stderr.read().decode() if child.poll() is not None else "child too slow"
    child.send_signal(signal.SIGKILL)
    child.wait()

    stub.script(text("The sums are 3 and 7."))
    done = subprocess.run(args, cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"output": "The sums are 3 and 7.", "calls": 1, "replayed": 2}
    assert stub.count == 4  # zero repeated requests: only the interrupted third call was sent again
    assert journal.read_text().splitlines() == ["1+2", "3+4"]  # no tool ran twice


# --- through the engine: dagplan.run -------------------------------------------------------------

AGENT_PLAN = """
summary: Answer a billing question with a tool-using LLM step
inputs:
  customerId: {type: string}
steps:
  - id: answer
    llm: "How many orders does customer $input.customerId have?"
    system: Use the tools.
    tools: [checkBillingHistory]
    output: $state.answer
  - id: shout
    llm: "Uppercase this: #answer"
    output: $state.loud
result: $state.loud
"""


def _example_tools():
    from dagplan.interpreter.tools.sources import load_tools

    return load_tools([REPO / "examples" / "tools.py"])


def test_llm_step_with_tools_runs_end_to_end(stub, stub_model):
    import dagplan

    stub.script(tool_calls(("checkBillingHistory", {"customerId": "cust_123"})), text("5 orders"), text("5 ORDERS"))
    result = dagplan.run(
        AGENT_PLAN,
        tools=_example_tools(),
        inputs={"customerId": "cust_123"},
        model=stub_model,
        completion_kwargs=stub.kwargs(),
    )
    assert result.status == "completed", result.to_json()
    assert result.result == "5 ORDERS"
    assert stub.count == 3
    assert [t["function"]["name"] for t in stub.requests[0]["tools"]] == ["checkBillingHistory"]
    assert stub.requests[0]["messages"][1]["content"] == "How many orders does customer cust_123 have?"
    assert (
        "history" in stub.requests[1]["messages"][-1]["content"] or stub.requests[1]["messages"][-1]["role"] == "tool"
    )
    assert stub.requests[2]["messages"][0]["content"] == "Uppercase this: 5 orders"
    assert result.usage["llm_calls"] == 3
    assert result.usage["prompt_tokens"] == 33 and result.usage["cost"] > 0


def test_refund_example_composes_the_confirmation(stub, stub_model):
    import dagplan

    stub.script(text("Your refund is on its way."))
    result = dagplan.run(
        REPO / "examples" / "refund.yaml",
        tools=_example_tools(),
        inputs={"customerId": "cust_123", "amount": 50},
        model=stub_model,
        completion_kwargs=stub.kwargs(),
    )
    assert result.result == "Your refund is on its way."
    assert "Receipt: {" in stub.requests[0]["messages"][0]["content"]


def test_run_budget_stops_llm_steps(stub, stub_model):
    import dagplan

    stub.default = text("fine")  # 18 tokens a call
    result = dagplan.run(
        AGENT_PLAN.replace("tools: [checkBillingHistory]", "tools: []"),
        tools=_example_tools(),
        inputs={"customerId": "c"},
        model=stub_model,
        completion_kwargs=stub.kwargs(),
        max_tokens=10,
    )
    assert stub.count == 1  # the second step is refused before sending anything
    report = result.steps["answer"].to_json()
    assert report["status"] == "failed" and "token budget reached: 18 of max_tokens 10" in report["error"]["message"]


def test_llm_step_branching_output_through_the_engine(stub, stub_model):
    import dagplan

    plan = """
steps:
  - id: judge
    llm: "Is 7 prime?"
    output: $state.yes || $state.no
  - id: after
    llm: "Say why: #judge"
    output: $state.why
    deps: [judge]
result: $state.no
"""
    stub.script(json_reply({"alternative": "\u2020state.no", "value": "not prime"}), text("because"))
    result = dagplan.run(plan, tools={}, model=stub_model, completion_kwargs=stub.kwargs())
    assert result.result == "not prime" and result.state == {"no": "not prime", "why": "because"}


# --- kill -9 of a durable `dagplan run` in the middle of an LLM step, then `dagplan resume` --------

DURABLE_TOOLS = '''
import os
import dagplan

@dagplan.tool(purity="side_effect")
def lookup(customerId: str) -> dict:
    """Look up a customer (appends to a journal so the test can count calls)."""
    with open(os.environ["JOURNAL"], "a") as f:
        f.write(customerId + "\\n")
    return {"orders": 5}
'''

DURABLE_PLAN = """
inputs:
  customerId: {type: string}
steps:
  - id: answer
    llm: "How many orders does $input.customerId have?"
    tools: [lookup]
    output: $state.answer
  - id: shout
    llm: "Uppercase: #answer"
    output: $state.loud
result: $state.loud
"""


def test_kill_9_durable_run_then_resume_sends_zero_repeated_requests(stub, tmp_path):
    from llm_stub import hang

    (tmp_path / "tools.py").write_text(DURABLE_TOOLS)
    (tmp_path / "plan.yaml").write_text(DURABLE_PLAN)
    (tmp_path / "dagplan.toml").write_text(
        f'model = "openai/gpt-4o-mini"\n[llm]\napi_base = "{stub.url}"\napi_key = "x"\n'
    )
    journal = tmp_path / "journal.txt"
    env = {
        **os.environ,
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "JOURNAL": str(journal),
        "DAGPLAN_STATE_DIR": str(tmp_path / "state"),
    }
    env.pop("DAGPLAN_MODEL", None)
    cli = [sys.executable, "-m", "dagplan"]

    stub.script(tool_calls(("lookup", {"customerId": "c1"})), hang())
    child = subprocess.Popen(
        [*cli, "run", "plan.yaml", "--tools", "tools.py", "-i", "customerId=c1"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 60
    while stub.count < 2 and child.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert stub.count == 2, child.stderr.read().decode() if child.poll() is not None else "child too slow"
    child.send_signal(signal.SIGKILL)
    child.wait()

    runs = subprocess.run([*cli, "runs", "--format", "json"], cwd=tmp_path, env=env, capture_output=True, text=True)
    listed = json.loads(runs.stdout)
    run_id = (listed["runs"] if isinstance(listed, dict) else listed)[0]["id"]
    stub.script(text("c1 has 5 orders"), text("C1 HAS 5 ORDERS"))
    resumed = subprocess.run(
        [*cli, "resume", run_id, "--tools", "tools.py", "--yes", "--format", "json"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert json.loads(resumed.stdout)["result"] == "C1 HAS 5 ORDERS"
    # 2 before the kill; after it only the interrupted call again, then the second step
    assert stub.count == 4
    assert stub.requests[2] == stub.requests[1]
    assert journal.read_text().splitlines() == ["c1"]  # the tool inside the step did not run twice


def test_a_rejected_key_is_not_retried_whatever_the_retry_rule(stub, stub_model):
    """An error that cannot go away (401) fails the step at once; a 503 is retried."""
    import dagplan

    plan = dagplan.load(text="steps:\n  - {id: a, llm: hi, retry: {limit: 3, backoff: 0}, output: \u2020state.a}\n")
    stub.script(error(401, "bad key"))
    result = dagplan.run(plan, model=stub_model, completion_kwargs=stub.kwargs())
    assert result.steps["a"].status == "failed" and result.steps["a"].attempts == 1 and stub.count == 1
    stub.reset()
    stub.script(error(503, "overloaded"), text("hello"))
    again = dagplan.run(plan, model=stub_model, completion_kwargs=stub.kwargs())
    assert again.steps["a"].status == "completed" and again.steps["a"].attempts == 2
