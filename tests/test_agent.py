"""The agent loop on seed 004's examples: refund, pet-friendly hotel, payment failure."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

import dagplan
from dagplan.interpreter.llm.agent import AgentError, agent_loop
from dagplan.interpreter.llm.conversation import MemoryMemo
from dagplan.interpreter.tools.sources import load_tools
from llm_stub import json_reply, text
from as_user import run_dagplan
from test_mcp_server import TOOLS as AGENT_TOOLS

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

    result = asyncio.run(
        agent_loop(task, tools=specs, model=MODEL, run_plan=run_plan, completion_kwargs=stub.kwargs(), **kw)
    )
    return result, ran


def test_refund_follows_the_plan_one_batch_at_a_time(stub, tools):
    history = {
        "_tool": "checkBillingHistory",
        "customerId": f"{D}input.customerId",
        "_outputPath": f"{D}state.billingHistory",
    }
    refund = {
        "_tool": "issueRefund",
        "customerId": f"{D}input.customerId",
        "amount": f"{D}input.amount",
        "history": f"{D}state.billingHistory",
        "_outputPath": f"{D}state.refund",
    }
    output = {"confirmationId": "refund_xyz789", "message": "The refund has been processed successfully."}
    stub.script(
        json_reply({"calls": [history, refund], "output": None}), json_reply({"calls": [refund], "output": output})
    )
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
    current = json.dumps(
        [
            {"_tool": "bookFlight", "destination": f"{D}input.destination"},
            {"_tool": "bookHotel", "destination": f"{D}input.destination"},
        ]
    )
    stub.script(
        json_reply(
            {
                "calls": [
                    {"_tool": "bookFlight", "destination": f"{D}input.destination", "_outputPath": f"{D}state.flight"},
                    {
                        "_tool": "findPetFriendlyHotel",
                        "destination": f"{D}input.destination",
                        "_outputPath": f"{D}state.hotel",
                    },
                ],
                "output": None,
            }
        ),
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
        json_reply(
            {
                "calls": [
                    {
                        "_tool": "processPayment",
                        "amount": f"{D}input.amount",
                        "_outputPath": f"{D}state.receipt || {D}state.error",
                    },
                    {"_tool": "confirmOrder", "receipt": f"{D}state.receipt"},
                ],
                "output": None,
            }
        ),
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


# --- durable mode: kill -9 / interruption, then resume ---------------------------------------

JOURNAL_TOOLS = '''
import dagplan

def _journal(name):
    with open({journal!r}, "a") as f:
        f.write(name + "\\n")

@dagplan.tool(purity="pure")
async def lookupOrder(orderId: str) -> dict:
    """Look up an order."""
    _journal("lookupOrder")
    return {{"orderId": orderId, "total": 42.0}}

@dagplan.tool(purity="side_effect")
async def refundOrder(order: dict) -> dict:
    """Refund an order."""
    _journal("refundOrder")
    return {{"refundId": "r-" + order["orderId"], "amount": order["total"]}}
'''

KILLED_CHILD = """
import asyncio, sys
import dagplan
from dagplan.interpreter.llm.agent import durable_agent_loop

tools_file, state_dir, api_base, model, marker = sys.argv[1:6]
tools = dagplan.load_tools([tools_file])

async def run_plan(plan):
    if "refundOrder" in [s.tool for s in plan.steps]:  # turn 2's batch: say so, then wait for the kill
        open(marker, "w").close()
        await asyncio.Event().wait()
    return (await dagplan.arun(plan, tools=tools, inputs={"orderId": "o7"})).state

asyncio.run(durable_agent_loop({"orderId": "o7", "request": "refund my order"},
                               tools={n: t.spec for n, t in tools.items()}, model=model,
                               run_plan=run_plan, state_dir=state_dir,
                               completion_kwargs={"api_base": api_base, "api_key": "x"}))
"""

LOOKUP = {"_tool": "lookupOrder", "orderId": f"{D}input.orderId", "_outputPath": f"{D}state.order"}
REFUND = {"_tool": "refundOrder", "order": f"{D}state.order", "_outputPath": f"{D}state.refund"}
REFUND_TASK = {"orderId": "o7", "request": "refund my order"}
TURN1 = json_reply({"calls": [LOOKUP, REFUND], "output": None})  # two batches: lookup now, refund next turn
TURN2 = json_reply({"calls": [REFUND], "output": None})
TURN3 = json_reply({"calls": [], "output": {"refunded": True}})


def journal_tools(folder: Path):
    """Tools that append their name to ``folder/journal.txt`` each time they run."""
    folder.mkdir(parents=True, exist_ok=True)
    journal = folder / "journal.txt"
    (folder / "journal_tools.py").write_text(JOURNAL_TOOLS.format(journal=str(journal)))
    return folder / "journal_tools.py", journal


def ran_tools(journal: Path) -> list[str]:
    return journal.read_text().split() if journal.exists() else []


def durable(stub, tools_file: Path, state_dir: Path, *, fail_on: str | None = None, **kw):
    """durable_agent_loop on the journal tools; ``fail_on``: run_plan raises (once) before running that tool."""
    from dagplan.interpreter.llm.agent import durable_agent_loop

    tools = dagplan.load_tools([tools_file])
    failing = [fail_on]

    async def run_plan(plan):
        if failing[0] in [s.tool for s in plan.steps]:
            failing[0] = None
            raise KeyboardInterrupt  # the process is interrupted before the batch's tools run
        return (await dagplan.arun(plan, tools=tools, inputs={"orderId": "o7"})).state

    return asyncio.run(
        durable_agent_loop(
            tools={n: t.spec for n, t in tools.items()},
            run_plan=run_plan,
            state_dir=state_dir,
            completion_kwargs=stub.kwargs(),
            **kw,
        )
    )


def uninterrupted(stub, tmp_path: Path):
    """The reference: the same three turns in one go (own tools journal and state dir)."""
    tools_file, journal = journal_tools(tmp_path / "reference")
    stub.script(TURN1, TURN2, TURN3)
    result = durable(stub, tools_file, tmp_path / "reference" / "state", task_or_input=REFUND_TASK, model=MODEL)
    requests = [r["messages"] for r in stub.requests]
    stub.reset()
    assert ran_tools(journal) == ["lookupOrder", "refundOrder"] and len(requests) == 3
    return result, requests


def only_run(state_dir: Path) -> str:
    from dagplan.interpreter.stores.store import RunStore

    (info,) = RunStore(state_dir).list()
    return info.id


def test_agent_run_killed_in_turn_two_resumes_without_repaying_or_rerunning(stub, tmp_path):
    import os
    import signal
    import subprocess
    import sys
    import time

    expected, reference_requests = uninterrupted(stub, tmp_path)
    tools_file, journal = journal_tools(tmp_path / "killed")
    state_dir = tmp_path / "killed" / "state"
    (tmp_path / "child.py").write_text(KILLED_CHILD)
    marker = tmp_path / "in-turn-2"

    stub.script(TURN1, TURN2)  # turn 1 completes; turn 2's answer is in when its batch is killed
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    child = subprocess.Popen(
        [sys.executable, str(tmp_path / "child.py"), str(tools_file), str(state_dir), stub.url, MODEL, str(marker)],
        env=env,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 120  # a bound on waiting (litellm's import), not a timing assertion
    while not marker.exists():
        assert child.poll() is None, child.stderr.read().decode()
        assert time.monotonic() < deadline, "the child never reached turn 2's batch"
        time.sleep(0.02)
    os.kill(child.pid, signal.SIGKILL)
    child.wait()
    child.stderr.close()
    assert stub.count == 2 and ran_tools(journal) == ["lookupOrder"]

    stub.reset()
    stub.script(TURN3)
    result = durable(stub, tools_file, state_dir, run_id=only_run(state_dir))  # task, model: from the run

    assert stub.count == 1  # turn 3 only: turns 1 and 2's model calls were committed before the kill
    assert ran_tools(journal) == ["lookupOrder", "refundOrder"]  # turn 1's tool did not run again
    assert stub.requests[0]["messages"] == reference_requests[2]  # same prompt: the state replayed exactly
    assert result.output == expected.output == {"refunded": True}
    assert result.state == expected.state and result.state["refund"] == {"refundId": "r-o7", "amount": 42.0}
    assert [t.replayed for t in result.turns] == [True, False, False]


def test_interrupted_agent_run_replays_memoized_calls_and_completed_turns(stub, tmp_path):
    from dagplan.interpreter.stores.store import RunStore

    expected, _ = uninterrupted(stub, tmp_path)
    tools_file, journal = journal_tools(tmp_path / "run")
    state_dir = tmp_path / "run" / "state"
    stub.script(TURN1, TURN2)
    with pytest.raises(KeyboardInterrupt):  # turn 2's answer is in, its batch never ran
        durable(stub, tools_file, state_dir, fail_on="refundOrder", task_or_input=REFUND_TASK, model=MODEL)
    assert stub.count == 2 and ran_tools(journal) == ["lookupOrder"]
    run_id = only_run(state_dir)
    assert RunStore(state_dir).open(run_id).progress().status == "interrupted"

    stub.reset()
    stub.script(TURN3)
    result = durable(stub, tools_file, state_dir, run_id=run_id, task_or_input=REFUND_TASK)
    assert stub.count == 1  # only turn 3: turn 2's completed model call came from the memo
    assert ran_tools(journal) == ["lookupOrder", "refundOrder"]
    assert (result.output, result.state) == (expected.output, expected.state)
    assert result.run_id == run_id and [t.replayed for t in result.turns] == [True, False, False]

    run = RunStore(state_dir).open(run_id)
    turns = [e.data for e in run.events({dagplan.EventType.AGENT_TURN})]
    assert [e["turn"] for e in turns] == [1, 2, 3]
    assert turns[0]["plan"]["steps"] == [
        {"id": "E1", "tool": "lookupOrder", "output": f"{D}state.order", "args": {"orderId": f"{D}input.orderId"}}
    ]
    assert turns[1]["state"]["refund"]["refundId"] == "r-o7" and turns[2]["output"] == {"refunded": True}
    assert run.progress().status == "completed"

    again = durable(stub, tools_file, state_dir, run_id=run_id)  # a finished run replays whole, for free
    assert stub.count == 1 and ran_tools(journal) == ["lookupOrder", "refundOrder"]
    assert again.output == expected.output and all(t.replayed for t in again.turns)

    with pytest.raises(dagplan.RunError) as err:  # `dagplan resume` points at the agent API instead
        dagplan.resume(run_id, state_dir=state_dir)
    assert err.value.code == "agent-run" and "durable_agent_loop" in err.value.hint


def test_resuming_an_agent_run_with_another_task_is_refused(stub, tmp_path):
    tools_file, journal = journal_tools(tmp_path / "run")
    state_dir = tmp_path / "run" / "state"
    stub.script(TURN3)
    durable(stub, tools_file, state_dir, task_or_input=REFUND_TASK, model=MODEL)
    with pytest.raises(dagplan.RunError) as caught:
        durable(stub, tools_file, state_dir, run_id=only_run(state_dir), task_or_input={"orderId": "o8"})
    assert caught.value.code == "agent-run-mismatch" and stub.count == 1 and ran_tools(journal) == []


def test_a_turn_with_no_valid_answer_says_why_in_its_headline(stub, tools):
    """The durable agent loop keeps only the headline as its run's reason: it says why the answers were
    rejected, not only that they were."""
    stub.default = json_reply({"calls": [{"_tool": "noSuchTool", "x": 1}], "output": None})
    with pytest.raises(AgentError) as caught:
        run_agent(stub, tools, "do it", repair=1)
    headline = caught.value.diagnostics[0]
    assert headline.code == "planning-failed" and "the last one: unknown-tool:" in headline.message, headline
    assert "noSuchTool" in headline.message


def test_the_agent_command_says_each_turn_as_it_starts_and_ends(stub, tmp_path):
    """`dagplan agent` is not silent while the model thinks: a line as each turn asks the model, one as it ends."""
    import os
    import subprocess
    import sys

    look = {"_tool": "getWeather", "city": "Oslo", "_outputPath": f"{D}state.sunny || {D}state.rainy"}
    stub.script(json_reply({"calls": [look], "output": None}), json_reply({"calls": [], "output": "Sunny in Oslo."}))
    (tmp_path / "dagplan.toml").write_text(f'[llm]\napi_base = "{stub.url}"\napi_key = "sk-test"\n')
    env = {k: v for k, v in os.environ.items() if not k.startswith("DAGPLAN_STATE")}
    done = subprocess.run([sys.executable, "-m", "dagplan", "agent", "What is the weather in Oslo?", "--tools",
                           str(REPO / "examples" / "tools.py"), "--model", MODEL, "--no-input"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120,
                          env={**env, "LITELLM_LOCAL_MODEL_COST_MAP": "True"})  # fmt: skip
    assert done.returncode == 0, done.stderr
    lines = [line.strip() for line in done.stderr.splitlines() if line.strip().startswith("turn ")]
    assert lines == [
        f"turn 1: asking {MODEL} for the first steps (at most 5 turns)...",
        "turn 1: ran getWeather",
        f"turn 2: asking {MODEL} for the next steps...",
        "turn 2: ran nothing and answered",
    ], done.stderr
    assert done.stdout.strip() == "Sunny in Oslo."


def test_dagplan_agent_runs_the_loop_and_a_person_approves_what_acts(tmp_path, stub):
    from llm_stub import json_reply

    (tmp_path / "tools.py").write_text(AGENT_TOOLS)
    (tmp_path / "dagplan.toml").write_text(
        f'tools = ["tools.py"]\nmodel = "openai/gpt-4o-mini"\n[llm]\napi_base = "{stub.url}"\napi_key = "x"\n'
    )
    look = json_reply({"calls": [{"_tool": "lookup", "customer": "ada", "_outputPath": "$state.who"}],
                       "output": None})  # fmt: skip
    mail = json_reply({"calls": [{"_tool": "send_email", "to": "$state.who.email", "body": "hi",
                                  "_outputPath": "$state.sent"}], "output": None})  # fmt: skip
    stub.script(look, mail)
    refused = run_dagplan(tmp_path, "agent", "email ada hi", "--no-input")
    assert refused.returncode == 1 and "not approved" in refused.stderr, refused.stderr
    assert "turn 1: ran lookup" in refused.stderr and not (tmp_path / "outbox.txt").exists()
    stub.script(look, mail, json_reply({"calls": [], "output": "done"}))
    done = run_dagplan(tmp_path, "agent", "email ada hi", "--yes")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "done" and "the agent's next steps act on the world" in done.stderr
    assert (tmp_path / "outbox.txt").read_text() == "ada@example.com: hi\n"
