"""The planner and its repair loop, against the stub server."""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import pytest

from dagplan.dsl import check
from dagplan.interpreter.llm.conversation import Budget, BudgetExceeded
from dagplan.interpreter.llm.planner import PlanningFailed, plan, repair_text, tool_catalog
from dagplan.interpreter.tools.sources import load_tool_specs
from llm_stub import json_reply, text
from as_user import with_example_tools

REPO = Path(__file__).resolve().parents[1]
MODEL = "openai/gpt-4o-mini"


@pytest.fixture(scope="module")
def specs():
    return load_tool_specs([REPO / "examples" / "tools.py"])


CYCLIC = {
    "summary": "Refund",
    "steps": [
        {"id": "a", "tool": "checkBillingHistory", "args": {"customerId": "$state.b"}, "output": "$state.a"},
        {"id": "b", "tool": "checkBillingHistory", "args": {"customerId": "$state.a"}, "output": "$state.b"},
    ],
}
UNKNOWN_TOOL = {
    "summary": "Refund",
    "inputs": {"customerId": {"type": "string"}},
    "steps": [
        {"id": "history", "tool": "checkBilling", "args": {"customerId": "$input.customerId"}, "output": "$state.h"},
        {"id": "answer", "llm": "Summarize #history", "output": "$state.answer"},
    ],
    "result": "$state.answer",
}
GOOD = json.loads(json.dumps(UNKNOWN_TOOL).replace('"checkBilling"', '"checkBillingHistory"'))


def run_planner(stub, specs, *answers, **kw):
    stub.script(*answers)
    return plan(
        "Refund the customer's last order",
        tools=specs,
        model=kw.pop("model", MODEL),
        completion_kwargs=stub.kwargs(),
        **kw,
    )


def test_repair_loop_fixes_a_cycle_then_an_unknown_tool(stub, specs):
    fenced = "Here is the plan:\n```json\n" + json.dumps(CYCLIC, indent=1) + "\n```\nHope it helps {really}."
    result = run_planner(stub, specs, text(fenced), json_reply(UNKNOWN_TOOL), json_reply(GOOD))
    assert stub.count == 3 and result.repairs == 2
    codes = [[d.code for d in a.diagnostics if d.severity == "error"] for a in result.attempts]
    # (the cyclic plan also passes a history, a list, as a customer id: its tool says what it returns)
    assert codes == [["cycle", "bad-argument", "bad-argument"], ["unknown-tool"], []]
    # the diagnostics go back to the model, located in its own answer, with hints
    first_repair = stub.requests[1]["messages"][-1]["content"]
    assert (
        "plan-attempt-1:7:10: error cycle" in first_repair
        and "error cycle: dependency cycle: a -> b -> a" in first_repair
    )
    second_repair = stub.requests[2]["messages"][-1]["content"]
    assert "error unknown-tool: unknown tool 'checkBilling'" in second_repair
    assert "hint: did you mean 'checkBillingHistory'?" in second_repair
    # the conversation keeps the model's own answers
    assert stub.requests[2]["messages"][2] == {"role": "assistant", "content": fenced}
    assert [s.id for s in result.plan.steps] == ["history", "answer"]
    assert result.document_yaml.startswith("dagplan: 1\n")
    assert "customerId: \u2020input.customerId" in result.document_yaml
    assert check(text=result.document_yaml, tools=specs).ok


def test_first_request_carries_the_format_rules_and_the_catalog(stub, specs):
    run_planner(stub, specs, json_reply(GOOD))
    body = stub.requests[0]
    system, user = body["messages"][0]["content"], body["messages"][1]["content"]
    assert "2 to 7 steps" in system and "#<id>.head=N" in system and "final answer" in system
    assert user.startswith("Task: Refund the customer's last order")
    assert "- issueRefund: " in user and '"amount":{"type":"number"}' in user
    assert body["response_format"]["type"] == "json_schema"
    schema = body["response_format"]["json_schema"]["schema"]  # the catalog's plan shape, not the whole language
    variants = schema["properties"]["steps"]["items"]["anyOf"]
    tools = {v["properties"]["tool"]["const"]: v for v in variants if "tool" in v["properties"]}
    assert set(tools) == set(specs)
    refund = tools["issueRefund"]["properties"]["args"]
    assert set(refund["required"]) == {"customerId", "amount"} and refund["additionalProperties"] is False


def test_a_server_litellm_does_not_know_gets_the_schema_as_llama_cpp_takes_it(stub, specs):
    run_planner(stub, specs, json_reply(GOOD), model="openai/local-llama")
    sent = stub.requests[0]["response_format"]
    assert sent["type"] == "json_object" and sent["schema"]["properties"]["steps"]["items"]["anyOf"]


def test_structured_output_json_object_forces_plain_json_mode(stub, specs):
    run_planner(stub, specs, json_reply(GOOD), model="openai/local-llama", structured_output="json_object")
    assert stub.requests[0]["response_format"] == {"type": "json_object"}


DIALECTS = {
    "calls": [
        {"_tool": "checkBillingHistory", "customerId": "\u2020input.customerId", "_outputPath": "\u2020state.history"},
        {
            "_tool": "issueRefund",
            "customerId": "\u2020input.customerId",
            "amount": "\u2020input.amount",
            "_outputPath": "\u2020state.receipt",
        },
    ],
    "steps": json.loads((REPO / "examples" / "oauth.json").read_text()),
    "plan-tool": {
        "goal": "Plan a trip",
        "steps": [
            {"id": "flight", "description": "Book a flight to Berlin", "tools": ["bookFlight"]},
            {
                "id": "hotel",
                "description": "Find a pet-friendly hotel in Berlin",
                "tools": ["findPetFriendlyHotel"],
                "depends_on": ["flight"],
            },
        ],
    },
}


@pytest.mark.parametrize("dialect", sorted(DIALECTS))
def test_other_dialects_wrapped_in_prose_are_accepted(stub, specs, dialect):
    answer = f"Sure. The plan:\n\n```json\n{json.dumps(DIALECTS[dialect], indent=2)}\n```\n\nLet me know!"
    result = run_planner(stub, specs, text(answer))
    assert stub.count == 1 and result.plan.dialect == dialect
    assert check(text=result.document_yaml, tools=specs).ok


def test_malformed_answers_are_repaired_too(stub, specs):
    result = run_planner(
        stub, specs, text("I think you should refund them."), text('{"steps": [ {"id": '), json_reply(GOOD)
    )
    first, second, _ = result.attempts
    assert first.diagnostics and not first.ok
    assert not second.ok
    assert stub.count == 3


def test_gives_up_after_repair_attempts(stub, specs):
    with pytest.raises(PlanningFailed) as caught:
        run_planner(stub, specs, json_reply(CYCLIC), json_reply(CYCLIC), repair=1)
    failure = caught.value
    assert stub.count == 2
    assert failure.code == "planning-failed" and "no valid plan after 2 attempt(s)" in str(failure)
    assert [d.code for d in failure.diagnostics] == ["planning-failed", "cycle", "bad-argument", "bad-argument"]
    assert len(failure.attempts) == 2
    assert pickle.loads(pickle.dumps(failure)).attempts == failure.attempts


def test_repair_zero_means_one_attempt(stub, specs):
    with pytest.raises(PlanningFailed):
        run_planner(stub, specs, json_reply(CYCLIC), repair=0)
    assert stub.count == 1


def test_usage_is_summed_over_attempts(stub, specs):
    result = run_planner(stub, specs, json_reply(CYCLIC), json_reply(GOOD))
    assert (result.calls, result.prompt_tokens, result.completion_tokens) == (2, 22, 14)
    assert result.cost == pytest.approx(22 * 0.15e-6 + 14 * 0.6e-6)
    assert result.model == "gpt-4o-mini"


def test_budget_stops_the_planner(stub, specs):
    with pytest.raises(BudgetExceeded):
        run_planner(stub, specs, json_reply(CYCLIC), json_reply(GOOD), budget=Budget(max_tokens=18))
    assert stub.count == 1


def test_tool_catalog_and_repair_text(specs):
    catalog = tool_catalog({"checkBillingHistory": specs["checkBillingHistory"]})
    assert catalog.startswith("- checkBillingHistory: ")
    assert '"required":["customerId"]' in catalog
    assert tool_catalog({}) == "(no tools: use llm steps only)"
    diags = check(text=json.dumps(CYCLIC), name="p", tools=specs).diagnostics
    assert repair_text(diags).startswith("p:1:")


# --- the CLI ----------------------------------------------------------------------------------

import os  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402


def dagplan_cli(*args, cwd, **env):
    full_env = {
        **os.environ,
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "OPENAI_API_KEY": "x",
        "DAGPLAN_STATE_DIR": str(Path(cwd) / "state"),
        **env,
    }
    full_env.pop("DAGPLAN_MODEL", None)
    return subprocess.run(
        [sys.executable, "-m", "dagplan", *args], cwd=cwd, env=full_env, capture_output=True, text=True, timeout=120
    )


def test_cli_plan_writes_a_valid_plan_after_a_repair(stub, tmp_path):
    stub.script(json_reply(UNKNOWN_TOOL), json_reply(GOOD))
    out = tmp_path / "plan.yaml"
    done = dagplan_cli(
        "plan",
        "Refund the customer's last order",
        "--tools",
        str(REPO / "examples" / "tools.py"),
        "--model",
        MODEL,
        "--api-base",
        stub.url,
        "-o",
        str(out),
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert "1 error(s) (unknown-tool); asking the model to repair" in done.stderr
    assert f"wrote {out}" in done.stderr
    assert "Summary: Refund" in done.stdout and "Parallel groups:" in done.stdout
    assert stub.count == 2
    checked = dagplan_cli("check", str(out), "--tools", str(REPO / "examples" / "tools.py"), cwd=tmp_path)
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_cli_plan_failure_shows_diagnostics_and_the_last_answer(stub, tmp_path):
    stub.script(json_reply(CYCLIC), json_reply(CYCLIC))
    done = dagplan_cli(
        "plan",
        "refund",
        "--tools",
        str(REPO / "examples" / "tools.py"),
        "--model",
        MODEL,
        "--api-base",
        stub.url,
        "--repair",
        "1",
        cwd=tmp_path,
    )
    assert done.returncode == 1
    assert "error planning-failed: no valid plan after 2 attempt(s)" in done.stderr
    assert "error cycle: dependency cycle: a -> b -> a" in done.stderr
    assert "the model's last answer was:" in done.stderr and '"id": "a"' in done.stderr


def test_cli_plan_without_a_model_is_a_usage_error(tmp_path):
    done = dagplan_cli("plan", "refund", cwd=tmp_path)
    assert done.returncode == 2 and "no model" in done.stderr


def test_cli_plan_json_format(stub, tmp_path):
    stub.script(json_reply(GOOD))
    done = dagplan_cli(
        "plan",
        "refund",
        "--tools",
        str(REPO / "examples" / "tools.py"),
        "--model",
        MODEL,
        "--api-base",
        stub.url,
        "--format",
        "json",
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    shown = json.loads(done.stdout)
    assert shown["attempts"] == [{"valid": True, "diagnostics": []}]
    assert shown["usage"]["calls"] == 1 and shown["plan"].startswith("dagplan: 1")


def test_cli_plan_run_needs_approval(stub, tmp_path):
    stub.script(json_reply(GOOD))
    done = dagplan_cli(
        "plan",
        "refund",
        "--tools",
        str(REPO / "examples" / "tools.py"),
        "--model",
        MODEL,
        "--api-base",
        stub.url,
        "--run",
        "--input",
        "customerId=cust_123",
        cwd=tmp_path,
    )
    assert done.returncode == 1 and "not approved" in done.stderr
    assert stub.count == 1  # planned, but nothing ran


def test_cli_plan_then_run(stub, tmp_path):
    stub.script(json_reply(GOOD), text("Customer cust_123 has 5 orders."))
    done = dagplan_cli(
        "plan",
        "refund",
        "--tools",
        str(REPO / "examples" / "tools.py"),
        "--model",
        MODEL,
        "--api-base",
        stub.url,
        "--run",
        "--yes",
        "--input",
        "customerId=cust_123",
        "-o",
        str(tmp_path / "p.yaml"),
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Customer cust_123 has 5 orders." in done.stdout
    assert stub.count == 2
    assert "cust_123" in stub.requests[1]["messages"][0]["content"]


def test_cli_score(tmp_path):
    done = dagplan_cli(
        "score",
        "Crie main.py, adicione testes em test_main.py e depois atualize README.md",
        "--format",
        "json",
        cwd=tmp_path,
    )
    assert done.returncode == 0
    shown = json.loads(done.stdout)
    assert shown["score"] == 7 and shown["plan_first"] is True
    text_out = dagplan_cli("score", "read main.go", "--mode", "always", cwd=tmp_path).stdout
    assert text_out.splitlines()[0] == "score 1/10 -> plan first: yes (mode always, threshold 6)"


def test_dagplan_plan_without_a_provider_key_says_so_before_any_call(tmp_path):
    root = with_example_tools(tmp_path)
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    done = subprocess.run([sys.executable, "-m", "dagplan", "plan", "refund order 42", "--model", "openai/gpt-4o-mini",
                           "--tools", "tools.py"], cwd=root, env={**env, "LITELLM_LOCAL_MODEL_COST_MAP": "True"},
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert "error no-credentials: model 'openai/gpt-4o-mini' (the planner) needs OPENAI_API_KEY" in done.stderr
