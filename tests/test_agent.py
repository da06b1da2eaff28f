"""The agent loop on seed 004's examples: refund, pet-friendly hotel, payment failure."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

import dagplan
from dagplan.interpreter.agent import AgentError, agent_loop
from dagplan.interpreter.llm import MemoryMemo
from dagplan.interpreter.tools import load_tools
from llm_stub import json_reply, text

REPO = Path(__file__).resolve().parents[1]
MODEL = "openai/gpt-4o-mini"
D = "\u2020"


@pytest.fixture(scope="module")
def tools():
    return load_tools([REPO / "examples" / "tools.py"])


def run_agent(stub, tools, task, **kw):
    specs = {name: t.spec for name, t in tools.items()}
    inputs = task if isinstance(task, dict) else {}
    ran: list[list[str]] = []

    async def run_plan(plan):
        ran.append([s.tool for s in plan.steps])
        result = await dagplan.arun(plan, tools=tools, inputs=inputs)
        return result.state

    result = asyncio.run(agent_loop(task, tools=specs, model=MODEL, run_plan=run_plan,
                                    completion_kwargs=stub.kwargs(), **kw))
    return result, ran


def test_refund_follows_the_plan_one_batch_at_a_time(stub, tools):
    history = {"_tool": "checkBillingHistory", "customerId": f"{D}input.customerId",
               "_outputPath": f"{D}state.billingHistory"}
    refund = {"_tool": "issueRefund", "customerId": f"{D}input.customerId", "amount": f"{D}input.amount",
              "history": f"{D}state.billingHistory", "_outputPath": f"{D}state.refund"}
    output = {"confirmationId": "refund_xyz789", "message": "The refund has been processed successfully."}
    stub.script(json_reply({"calls": [history, refund], "output": None}),
                json_reply({"calls": [refund], "output": output}))
    schema = {"type": "object", "properties": {"confirmationId": {"type": "string"}, "message": {"type": "string"}}}
    task = {"request": "I'd like a refund for my last order.", "customerId": "cust_123", "amount": 50.0}
    result, ran = run_agent(stub, tools, task, output_schema=schema)
    assert ran == [["checkBillingHistory"], ["issueRefund"]]  # one batch, then the model looks again
    assert result.output == output
    assert result.state["billingHistory"]["orders"] == 5
    assert result.state["refund"]["confirmationId"].startswith("refund_")
    second = stub.requests[1]["messages"][1]["content"]
    assert '"billingHistory": {"customerId": "cust_123", "orders": 5' in second  # the live state
    assert '"_tool": "issueRefund"' in second  # the current plan
    assert len(result.turns) == 2 and result.cost > 0


def test_pet_friendly_hotel_replaces_the_plan(stub, tools):
    current = json.dumps([{"_tool": "bookFlight", "destination": f"{D}input.destination"},
                          {"_tool": "bookHotel", "destination": f"{D}input.destination"}])
    stub.script(
        json_reply({"calls": [
            {"_tool": "bookFlight", "destination": f"{D}input.destination", "_outputPath": f"{D}state.flight"},
            {"_tool": "findPetFriendlyHotel", "destination": f"{D}input.destination", "_outputPath": f"{D}state.hotel"},
        ], "output": None}),
        json_reply({"calls": [], "output": "Flight and a pet-friendly hotel booked."}),
    )
    task = {"destination": "Berlin", "instruction": "Actually, I'll be traveling with my dog."}
    result, ran = run_agent(stub, tools, task, plan=current)
    assert ran == [["bookFlight", "findPetFriendlyHotel"]]  # independent: one batch; bookHotel never ran
    assert result.state["hotel"]["petFriendly"] is True
    assert "bookHotel" in stub.requests[0]["messages"][1]["content"]  # the old plan was shown
    assert result.output == "Flight and a pet-friendly hotel booked."


def test_payment_failure_replans(stub, tools):
    stub.script(
        json_reply({"calls": [
            {"_tool": "processPayment", "amount": f"{D}input.amount", "_outputPath": f"{D}state.receipt || {D}state.error"},
            {"_tool": "confirmOrder", "receipt": f"{D}state.receipt"},
        ], "output": None}),
        json_reply({"calls": [{"_tool": "reportFailure", "error": f"{D}state.error"}], "output": {"status": "Failed"}}),
    )
    schema = {"type": "object", "properties": {"status": {"enum": ["Success", "Failed"]}}, "required": ["status"]}
    result, ran = run_agent(stub, tools, {"amount": 500.0}, output_schema=schema)
    assert ran == [["processPayment"], ["reportFailure"]]  # confirmOrder never ran
    assert result.state["error"]["message"] == "Your card was declined."
    assert result.output == {"status": "Failed"}
    assert "card was declined" in stub.requests[1]["messages"][1]["content"]


def test_invalid_plans_and_outputs_are_repaired_before_anything_runs(stub, tools):
    stub.script(
        json_reply({"calls": [{"_tool": "refundEverything", "x": 1}], "output": None}),
        json_reply({"calls": [], "output": {"status": "Maybe"}}),
        json_reply({"calls": [], "output": {"status": "Success"}}),
    )
    schema = {"type": "object", "properties": {"status": {"enum": ["Success", "Failed"]}}}
    result, ran = run_agent(stub, tools, "check the payment", output_schema=schema)
    assert ran == [] and result.output == {"status": "Success"}
    assert "unknown-tool" in stub.requests[1]["messages"][-1]["content"]
    assert "output-schema" in stub.requests[2]["messages"][-1]["content"]
    assert [d.code for d in result.turns[0].diagnostics] == ["unknown-tool", "output-schema"]


def test_max_turns(stub, tools):
    stub.default = json_reply({"calls": [{"_tool": "checkBillingHistory", "customerId": "c"}], "output": None})
    with pytest.raises(AgentError) as caught:
        run_agent(stub, tools, "loop forever", max_turns=2)
    assert caught.value.code == "max-turns" and stub.count == 2


def test_turns_are_checkpointed_and_replayed_from_the_memo(stub, tools):
    memo, seen = MemoryMemo(), []
    stub.script(text('{"calls": [], "output": "done"}'))
    run_agent(stub, tools, "say done", memo=memo, checkpoint=seen.append)
    again, _ = run_agent(stub, tools, "say done", memo=memo)
    assert stub.count == 1 and again.output == "done"
    assert [t.number for t in seen] == [1]
