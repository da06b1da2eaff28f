"""An acting call happens once (issue 60), as a property over attempts.

A seeded generator builds a plan ``read -> act -> after`` where ``act`` calls a tool of one purity (undeclared,
``side_effect``, ``idempotent``, ``pure``), or is a step whose own ``purity: side_effect`` makes a pure tool act,
or is a model step whose model calls an acting tool; the tool acts (a line in a list) and then: returns, raises
a transient ``ConnectionError`` (its answer lost on the way back), or outlives the step's ``timeout``; the plan
writes ``retry:`` on ``act`` or does not. The durable run is then resumed: plainly, ``--from read`` without the
flag, or ``--from read`` with ``rerun_side_effects`` (a person chose again).

Invariant: an acting call's effect happens at most once per person's choice: once in the first run unless the
plan wrote ``retry:`` (then at most 1 + its limit, never after a timeout), never again on a resume unless a
person chose again; ``pure`` and ``idempotent`` tools may repeat (that is what they declare). The oracle's
"acts" is its own: what the tool or the step says, undeclared counting as acting.
``DAGPLAN_PROPERTY_SCALE=N`` runs N times as many combinations (240 a CI run).
"""

from __future__ import annotations

import json
import os
import random
import time
from dataclasses import dataclass
from typing import Any

import pytest

import dagplan
from dagplan.interpreter.tools.catalog import Tool

SEED = 60
COUNT = 240 * int(os.environ.get("DAGPLAN_PROPERTY_SCALE", "1") or 1)
EFFECTS: list[str] = []
MODE = {"value": "returns"}


def _read() -> str:
    return "acct-1"


def _act(value: Any = None) -> str:
    EFFECTS.append(str(value))
    if MODE["value"] == "raises":
        raise ConnectionError("the answer was lost on the way back")
    if MODE["value"] == "slow":
        time.sleep(0.2)  # a thread nobody can stop: the timed-out attempt may still be acting
    return "done"


def _after(value: Any = None) -> str:
    return f"after {value}"


PURITIES = ("undeclared", "side_effect", "idempotent", "pure", "step_side_effect")


def tools(purity: str) -> dict[str, Tool]:
    declared = {"undeclared": None, "step_side_effect": "pure"}.get(purity, purity)
    return {
        "read": Tool("read", _read, purity="pure"),
        "act": Tool("act", _act, purity=declared),
        "after": Tool("after", _after, purity="pure"),
    }


@dataclass(frozen=True)
class Case:
    purity: str
    mode: str  # returns | raises | slow
    retry: int | None  # the limit the plan writes, or None (not written)
    resume: str  # none | plain | from | from_rerun
    door: str  # api | cli-like: the same API, durable

    @property
    def acts(self) -> bool:
        return self.purity in ("undeclared", "side_effect", "step_side_effect")


def cases(count: int, seed: int) -> list[Case]:
    rng = random.Random(seed)
    return [
        Case(
            purity=rng.choice(PURITIES),
            mode=rng.choice(["returns", "raises", "slow"]),
            retry=rng.choice([None, None, 1, 2]),
            resume=rng.choice(["none", "plain", "from", "from_rerun"]),
            door="api",
        )
        for _ in range(count)
    ]


def plan_text(case: Case) -> str:
    act: dict[str, Any] = {"id": "act", "tool": "act", "args": {"value": "$state.r"}, "output": "$state.a"}
    if case.purity == "step_side_effect":
        act["purity"] = "side_effect"
    if case.retry is not None:
        act["retry"] = {"limit": case.retry, "backoff": 0}
    if case.mode == "slow":
        act["timeout"] = "50ms"
    steps = [
        {"id": "read", "tool": "read", "output": "$state.r"},
        act,
        {"id": "after", "tool": "after", "args": {"value": "$state.a"}, "output": "$state.done"},
    ]
    return json.dumps({"steps": steps, "result": "$state.done"})


def allowed(case: Case, phase: str) -> int:
    """How many effects the phase may add (the oracle)."""
    if not case.acts:
        return 10**6  # declared safe to repeat
    if phase == "first":
        if case.mode == "slow":
            return 1  # never another attempt while the first may still run
        return 1 + (case.retry or 0) if case.mode == "raises" else 1
    if phase == "from_rerun":
        return 1 + (case.retry or 0) if case.mode == "raises" else 1  # a person chose again: one more run of it
    return 0  # a plain resume, or --from without the flag: never again


def run_case(case: Case, state: Any) -> list[str]:
    EFFECTS.clear()
    MODE["value"] = case.mode
    found = []
    plan = dagplan.load(text=plan_text(case), name="attempts.json", tools=tools(case.purity))
    first = dagplan.run(plan, tools=tools(case.purity), durable=True, state_dir=state)
    if len(EFFECTS) > allowed(case, "first"):
        found.append(f"first run: {len(EFFECTS)} effects, at most {allowed(case, 'first')}")
    before = len(EFFECTS)
    if case.resume == "none":
        return found
    kwargs: dict[str, Any] = {"tools": tools(case.purity), "state_dir": state}
    if case.resume in ("from", "from_rerun"):
        kwargs["from_step"] = "read"
        kwargs["rerun_side_effects"] = case.resume == "from_rerun"
    phase = "from_rerun" if case.resume == "from_rerun" else "again"
    try:
        dagplan.resume(first.run_id, **kwargs)
    except dagplan.RunError as exc:  # refused (rerun-side-effects) or stopped for a decision: nothing ran
        assert exc.code in ("rerun-side-effects", "needs-decision", "not-resumable", "finished"), exc
    added = len(EFFECTS) - before
    if added > allowed(case, phase):
        found.append(f"resume ({case.resume}): {added} more effects, at most {allowed(case, phase)}")
    return found


@pytest.fixture(autouse=True)
def no_backoff(monkeypatch):
    """Retries do not wait (what is counted is the calls, not the time between them)."""
    from dagplan.interpreter.engine import attempts

    monkeypatch.setattr(attempts, "backoff", lambda rule, attempt: 0.0)


def test_an_acting_call_happens_once_per_choice_whatever_the_attempts(tmp_path):
    problems, spread = [], set()
    for index, case in enumerate(cases(COUNT, SEED)):
        spread.add((case.purity, case.mode, case.resume))
        # the journal in memory (the same journal rules as a file's, without an fsync a commit); a sample on disk
        state = tmp_path / "state" if index % 8 == 0 else dagplan.MemoryRegistry()
        for problem in run_case(case, state):
            problems.append(f"case {index} {case}: {problem}")
    assert not problems, "\n".join(problems[:10])
    assert len(spread) >= 5 * 3 * 4 * 3 // 4, len(spread)  # most of the 60 combinations of the main axes met


@pytest.mark.parametrize("mode", ["raises", "slow"])
def test_the_oracle_can_fail_a_pure_tool_repeats_as_it_may(tmp_path, mode):
    """So that the property can fail the other way: a pure tool with `retry:` is tried again after a transient
    error or a timeout (the rule holds back only what acts)."""
    case = Case("pure", mode, 2, "none", "api")
    EFFECTS.clear()
    MODE["value"] = mode
    plan = dagplan.load(text=plan_text(case), name="attempts.json", tools=tools("pure"))
    dagplan.run(plan, tools=tools("pure"), durable=True, state_dir=tmp_path / "state")
    assert len(EFFECTS) == 3
