"""Streamed plans (interpreter/ops/streamed.py): steps that change nothing start while the model is still
writing the plan; nothing else starts before the whole plan passed check and was approved.

The provider is the stub OpenAI server streaming a scripted plan in pieces; where a test needs "the stream is
still going", the stub holds the rest of the answer until the test's condition (an Event) is met, so no test
depends on how fast the machine is. The local model's own streamed run is in test_local_model.py.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import dagplan
from llm_stub import streamed

MODEL = "openai/gpt-4o-mini"
REPO = Path(__file__).resolve().parent.parent


def plan_text(*steps: dict) -> str:
    """The plan as a model writes it (its result: the booking, when a step books)."""
    books = any(s.get("output") == "$state.b" for s in steps)
    return json.dumps({"summary": "trip", "steps": list(steps), **({"result": "$state.b"} if books else {})})


FIND = {"id": "find", "tool": "searchFlights", "args": {"origin": "Rome", "destination": "Oslo"}, "output": "$state.f"}
BOOK = {"id": "book", "tool": "bookFlight", "args": {"flightId": "$state.f.id"}, "output": "$state.b"}
PRICE = {"id": "price", "tool": "getPrice", "args": {"flightId": "$state.f.id"}, "output": "$state.p"}


class Tools:
    """Two pure tools and a side effect, noting each call (and waking the stub's hold on the first)."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.found = threading.Event()

        @dagplan.tool(purity="pure")
        def searchFlights(origin: str, destination: str) -> dict:
            self.calls.append("searchFlights")
            self.found.set()
            return {"id": f"{origin[:1]}{destination[:1]}1"}

        @dagplan.tool(purity="idempotent")
        def getPrice(flightId: str) -> int:
            self.calls.append("getPrice")
            return 99

        @dagplan.tool(purity="side_effect")
        def bookFlight(flightId: str) -> str:
            self.calls.append("bookFlight")
            return "booked " + flightId

        self.all = [searchFlights, getPrice, bookFlight]


def streamed_run(stub, tools: Tools, tmp_path, events: list, **kwargs):
    def approve(preview) -> bool:
        events.append({"type": "approved"})
        return True

    return dagplan.plan("Find a flight from Rome to Oslo, then book it", tools=tools.all, model=MODEL, run=True,
                        stream=True, completion_kwargs=stub.kwargs(), state_dir=tmp_path / "state",
                        on_event=events.append, approve=approve, **kwargs)  # fmt: skip


def kinds(events: list) -> list[str]:
    return [f"{e['type']}:{e.get('step', '')}" for e in events]


def test_a_pure_step_starts_while_the_plan_is_still_being_written(stub, tmp_path):
    """The stub holds the rest of the plan until searchFlights was called: it is, so the stream goes on."""
    tools = Tools()
    stub.script(streamed(plan_text(FIND, PRICE, BOOK), hold_after='"$state.f"}', hold=tools.found))
    events: list = []
    result = streamed_run(stub, tools, tmp_path, events)
    assert result.run.status == "completed" and result.run.result == "booked RO1"
    assert tools.calls == ["searchFlights", "getPrice", "bookFlight"]  # each once: the run proper reused two
    order = kinds(events)
    assert order.index("started_early:find") < order.index("answer_complete:")  # before the stream ended
    assert order.index("started_early:price") < order.index("approved:")
    assert result.run.steps["find"].reused == "early" and result.run.steps["price"].reused == "early"
    assert result.run.steps["book"].reused is None and result.run.steps["book"].attempts == 1


def test_a_side_effect_never_starts_before_the_whole_plan_passed_check_and_was_approved(stub, tmp_path):
    """The stub holds after the side-effect step until it was checked: at that moment it has not run, and it
    runs only after the approval of the whole plan."""
    tools = Tools()
    checked_book = threading.Event()
    first = {**BOOK, "args": {"flightId": "X1"}}
    stub.script(streamed(plan_text(first, FIND), hold_after='"$state.b"}', hold=checked_book))
    events: list = []

    def seen(event):
        events.append(event)
        if event["type"] == "step_checked" and event.get("step") == "book":
            assert "bookFlight" not in tools.calls  # checked, complete, and still not started
            checked_book.set()

    result = dagplan.plan("Book X1, then find a flight", tools=tools.all, model=MODEL, run=True, stream=True,
                          completion_kwargs=stub.kwargs(), state_dir=tmp_path / "state", on_event=seen,
                          approve=lambda preview: events.append({"type": "approved"}) or True)  # fmt: skip
    order = kinds(events)
    assert "started_early:book" not in order and "started_early:find" in order
    assert result.run.steps["book"].attempts == 1 and tools.calls.count("bookFlight") == 1
    assert order.index("step_checked:book") < order.index("approved:")


def test_a_plan_that_turns_invalid_at_its_last_step_ran_no_side_effect_and_its_repair_repays_nothing(stub, tmp_path):
    tools = Tools()
    bad = {"id": "book", "tool": "bookFlight", "args": {"flight": "$state.f.id"}, "output": "$state.b"}  # no `flight`
    stub.script(
        streamed(plan_text(FIND, PRICE, bad), hold_after='"$state.p"}', hold=tools.found),
        streamed(plan_text(FIND, PRICE, BOOK)),  # the repair
    )
    events: list = []
    result = streamed_run(stub, tools, tmp_path, events)
    assert len(result.attempts) == 2 and not result.attempts[0].ok
    assert tools.calls == ["searchFlights", "getPrice", "bookFlight"]  # the repaired plan paid nothing again
    assert result.run.steps["find"].reused == "early" and result.run.steps["price"].reused == "early"
    assert "prefix_failed:" in kinds(events)  # said as the bad step's text completed, with its place
    failed = next(e for e in events if e["type"] == "prefix_failed")
    assert "unknown-arg" in failed["diagnostic"] or "flight" in failed["diagnostic"], failed


def test_a_stream_that_repeats_an_id_starts_nothing_after_it_and_is_repaired(stub, tmp_path):
    tools = Tools()
    again = {**PRICE, "id": "find"}
    # the stub holds after the first step until it ran: without the hold, a fast stream reaches the repeated
    # id before the first step could start, and "find started early" would depend on the machine's speed
    first = streamed(plan_text(FIND, again, BOOK), hold_after='"$state.f"}', hold=tools.found)
    stub.script(first, streamed(plan_text(FIND, PRICE, BOOK)))
    events: list = []
    result = streamed_run(stub, tools, tmp_path, events)
    failed = next(e for e in events if e["type"] == "prefix_failed")
    assert any("duplicate-id" in d for d in failed["diagnostics"]), failed
    first_attempt = [e for e in events if e["type"] == "started_early" and e.get("attempt", 1) == 1]
    assert [e["step"] for e in first_attempt] == ["find"]  # nothing after the repeated id started early
    assert result.run.status == "completed" and tools.calls.count("searchFlights") == 1


def test_a_stream_cut_mid_step_stops_the_run_resumably_and_what_completed_is_kept(stub, tmp_path):
    """The connection drops inside the second step: the model's error, nothing with a side effect ran, and
    `resume` asks the model again and takes the first step's result back."""
    tools = Tools()
    text = plan_text(FIND, PRICE, BOOK)
    stub.script(streamed(text, cut_after='"tool": "getPr', hold_after='"$state.f"}', hold=tools.found), streamed(text))
    created: list = []
    with pytest.raises(dagplan.DagplanError) as caught:
        streamed_run(stub, tools, tmp_path, [], on_run_created=created.append)
    assert caught.value.diagnostics[0].code == "llm-unavailable"
    assert tools.calls == ["searchFlights"]
    assert dagplan.run_report(created[0], state_dir=tmp_path / "state").status == "interrupted"
    done = dagplan.resume(
        created[0],
        tools=tools.all,
        state_dir=tmp_path / "state",
        approve=lambda preview: True,
        completion_kwargs=stub.kwargs(),
    )
    assert done.status == "completed" and done.result == "booked RO1"
    assert tools.calls == ["searchFlights", "getPrice", "bookFlight"]
    assert done.steps["find"].reused == "early"


def test_a_plan_that_is_not_approved_ran_only_what_changes_nothing(stub, tmp_path):
    tools = Tools()
    stub.script(streamed(plan_text(FIND, BOOK)))
    with pytest.raises(dagplan.RunError) as caught:
        dagplan.plan("Find a flight, then book it", tools=tools.all, model=MODEL, run=True, stream=True,
                     completion_kwargs=stub.kwargs(), state_dir=tmp_path / "state", approve=lambda preview: False)  # fmt: skip
    assert caught.value.diagnostics[0].code == "not-approved"
    assert tools.calls == ["searchFlights"]


# --- through the CLI, killed mid-stream ------------------------------------------------------

CLI_TOOLS = """
import os
import dagplan

def note(name):
    with open(os.environ["CALLS"], "a") as f:
        f.write(name + "\\n"); f.flush(); os.fsync(f.fileno())

@dagplan.tool(purity="pure")
def searchFlights(origin: str, destination: str) -> dict:
    note("searchFlights")
    return {"id": "RO1"}

@dagplan.tool(purity="side_effect")
def bookFlight(flightId: str) -> str:
    note("bookFlight")
    return "booked " + flightId
"""


def test_kill_9_while_the_plan_streams_then_resume_keeps_what_completed(stub, tmp_path):
    (tmp_path / "tools.py").write_text(CLI_TOOLS)
    (tmp_path / "dagplan.toml").write_text(f'model = "{MODEL}"\n[llm]\napi_base = "{stub.url}"\napi_key = "x"\n')
    calls = tmp_path / "calls.txt"
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "CALLS": str(calls),
           "DAGPLAN_STATE_DIR": str(tmp_path / "state")}  # fmt: skip
    env.pop("DAGPLAN_MODEL", None)
    text = plan_text(FIND, BOOK)
    never = threading.Event()
    stub.script(streamed(text, hold_after='"$state.f"}', hold=never))
    cli = [sys.executable, "-m", "dagplan"]
    child = subprocess.Popen(
        [*cli, "plan", "Find a flight from Rome to Oslo, then book it", "--tools", "tools.py", "--run", "--stream",
         "--yes"],  # fmt: skip
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    deadline = time.monotonic() + 120

    def early_result_durable() -> bool:
        return any('"fp:' in wal.read_text() for wal in (tmp_path / "state").glob("runs/*/wal.jsonl"))

    while not early_result_durable() and child.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert early_result_durable(), child.stderr.read().decode() if child.poll() is not None else "child too slow"
    child.send_signal(signal.SIGKILL)
    child.wait()
    never.set()
    assert calls.read_text().split() == ["searchFlights"]
    run_id = next((tmp_path / "state").glob("runs/*")).name

    stub.script(streamed(text))  # the model is asked again: its interrupted answer was never complete
    done = subprocess.run([*cli, "resume", run_id, "--yes"], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert calls.read_text().split() == ["searchFlights", "bookFlight"]  # the pure step was not paid again
    shown = subprocess.run([*cli, "runs", "show", run_id], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert "started while the plan was being written" in shown.stdout, shown.stdout
    assert "booked RO1" in shown.stdout
    again = subprocess.run([*cli, "resume", run_id, "--yes"], cwd=tmp_path, env=env, capture_output=True, text=True,
                           timeout=300)  # fmt: skip
    assert calls.read_text().split() == ["searchFlights", "bookFlight"], again.stderr  # finished: nothing again
