"""The yes and the failure travel with the value (issue 59), as a property.

A seeded generator puts a *source* at the head of a chain and a step that acts at its end:

- the source: a read that succeeds or fails, at the top or inside a sub-plan (nested one to three deep);
  a fan-out whose items succeed or one of which fails; a gate answered approve or reject, at the top, inside
  a sub-plan (nested) or inside a loop;
- the chain between them, zero to four links, each one of: a pure step that passes the value on, a template
  that quotes it in a text (``#step``), a nested state path (``†state.deep.v2.x``), a sub-plan (one to three
  deep), a fan-out over it, a loop around it;
- the door: the API with an ``ask_gate``, or a durable run (a journal) answered the same way.

Invariant: no acting call when the source failed or a person refused (no route is written in these plans),
and, so that the test can fail the other way, exactly one when the source succeeded and every gate said yes.
``DAGPLAN_PROPERTY_SCALE=N`` runs N times as many combinations (600 a CI run).
"""

from __future__ import annotations

import json
import os
import random
from dataclasses import dataclass
from typing import Any

import dagplan
from dagplan.interpreter.tools.catalog import Tool

SEED = 59
COUNT = 600 * int(os.environ.get("DAGPLAN_PROPERTY_SCALE", "1") or 1)
ACTED: list[Any] = []


def _read_ok() -> str:
    return "the account is 42"


def _read_fail() -> str:
    raise ValueError("the account service is down")


def _item(n: Any = None) -> str:
    if n == "bad":
        raise ValueError("this item failed")
    return f"item {n}"


def _pass(value: Any = None) -> Any:
    return value


def _pay(value: Any = None) -> str:
    ACTED.append(value)
    return "paid"


def tools() -> dict[str, Tool]:
    return {
        "read_ok": Tool("read_ok", _read_ok, purity="pure"),
        "read_fail": Tool("read_fail", _read_fail, purity="pure"),
        "item": Tool("item", _item, purity="pure"),
        "pass_on": Tool("pass_on", _pass, purity="pure"),
        "pay": Tool("pay", _pay, purity="side_effect"),
    }


SOURCES = ["ok", "fail", "fail_in_sub", "items_ok", "item_fails", "gate_top", "gate_in_sub", "gate_in_loop"]
LINKS = ["pure", "template", "path", "subplan", "fanout", "loop"]


@dataclass(frozen=True)
class Case:
    source: str
    depth: int  # how deep a source inside a sub-plan sits (1-3)
    answer: str  # approve | reject (for the gate sources)
    links: tuple[tuple[str, int], ...]  # each link and, for a sub-plan, how deep
    door: str  # api | durable

    @property
    def bad(self) -> bool:
        return self.source in ("fail", "fail_in_sub", "item_fails") or (
            self.source.startswith("gate") and self.answer == "reject"
        )


def cases(count: int, seed: int) -> list[Case]:
    rng = random.Random(seed)
    return [
        Case(
            source=rng.choice(SOURCES),
            depth=rng.randint(1, 3),
            answer=rng.choice(["approve", "reject"]),
            links=tuple((rng.choice(LINKS), rng.randint(1, 3)) for _ in range(rng.randint(0, 4))),
            door=rng.choice(["api", "durable"]),
        )
        for _ in range(count)
    ]


def _nested(steps: list[dict], depth: int, result: str) -> dict[str, Any]:
    """A sub-plan holding ``steps`` (its result ``result``), wrapped ``depth`` times; takes †input.value."""
    plan: dict[str, Any] = {"inputs": {"value": {}}, "steps": steps, "result": result}
    for _ in range(depth - 1):
        plan = {
            "inputs": {"value": {}},
            "steps": [{"id": "wrap", "plan": plan, "args": {"value": "$input.value"}, "output": "$state.r"}],
            "result": "$state.r",
        }
    return plan


GATE = {"gate": {"question": "Pay the supplier?", "choices": ["approve", "reject"]}}


def source_steps(case: Case) -> tuple[list[dict], str]:
    """The source's steps and the state path that holds its value."""
    if case.source in ("ok", "fail"):
        return [{"id": "src", "tool": f"read_{case.source}", "output": "$state.v0"}], "$state.v0"
    if case.source == "fail_in_sub":
        inner = [{"id": "look", "tool": "read_fail", "output": "$state.r"}]
        return [{"id": "src", "plan": _nested(inner, case.depth, "$state.r"), "args": {"value": "x"},
                 "output": "$state.v0"}], "$state.v0"  # fmt: skip
    if case.source in ("items_ok", "item_fails"):
        items = ["a", "bad"] if case.source == "item_fails" else ["a", "b"]
        return [
            {"id": "src", "tool": "item", "for_each": items, "args": {"n": "$item"}, "output": "$state.v0"}
        ], "$state.v0"
    inner = [{"id": "ok", **GATE, "output": "$state.ok"},
             {"id": "n", "tool": "pass_on", "deps": ["ok"], "args": {"value": "go"}, "output": "$state.r"}]  # fmt: skip
    if case.source == "gate_top":
        return [{"id": "ok", **GATE, "output": "$state.ok"},
                {"id": "src", "tool": "pass_on", "deps": ["ok"], "args": {"value": "go"}, "output": "$state.v0"}], "$state.v0"  # fmt: skip
    if case.source == "gate_in_sub":
        return [{"id": "src", "plan": _nested(inner, case.depth, "$state.r"), "args": {"value": "x"},
                 "output": "$state.v0"}], "$state.v0"  # fmt: skip
    loop = {"plan": _nested(inner, 1, "$state.r"), "max_iterations": 1}
    return [{"id": "src", "loop": loop, "args": {"value": "x"}, "output": "$state.v0"}], "$state.v0"


def plan_of(case: Case) -> dict[str, Any]:
    steps, current = source_steps(case)
    previous = "src"
    for index, (link, depth) in enumerate(case.links, 1):
        sid, out = f"c{index}", f"$state.v{index}"
        if link == "pure":
            step = {"tool": "pass_on", "args": {"value": current}}
        elif link == "template":
            step = {"tool": "pass_on", "args": {"value": f"account: #{previous}"}}
        elif link == "path":
            out = f"$state.deep.v{index}.x"
            step = {"tool": "pass_on", "args": {"value": current}}
        elif link == "subplan":
            inner = [{"id": "p", "tool": "pass_on", "args": {"value": "$input.value"}, "output": "$state.r"}]
            step = {"plan": _nested(inner, depth, "$state.r"), "args": {"value": current}}
        elif link == "fanout":
            step = {"tool": "pass_on", "for_each": [current, "more"], "args": {"value": "$item"}}
        else:
            inner = [{"id": "p", "tool": "pass_on", "args": {"value": "$input.value"}, "output": "$state.r"}]
            step = {"loop": {"plan": _nested(inner, 1, "$state.r"), "max_iterations": 1}, "args": {"value": current}}
        steps.append({"id": sid, **step, "output": out})
        current, previous = out, sid
    steps.append({"id": "act", "tool": "pay", "args": {"value": current}, "output": "$state.paid"})
    return {"summary": "value paths", "steps": steps}


def run_case(case: Case, state: Any) -> Any:
    ACTED.clear()
    plan = dagplan.load(text=json.dumps(plan_of(case)), name="paths.json", tools=tools())
    ask = lambda request: case.answer  # noqa: E731 - every gate of the case gets the case's answer
    if case.door == "api":
        return dagplan.run(plan, tools=tools(), ask_gate=ask)
    return dagplan.run(plan, tools=tools(), ask_gate=ask, durable=True, state_dir=state)


def test_no_acting_call_on_a_failure_or_after_a_refusal_however_far_it_travelled(tmp_path):
    found, spread = [], set()
    for index, case in enumerate(cases(COUNT, SEED)):
        result = run_case(case, tmp_path / "state")
        spread.add((case.source, tuple(link for link, _ in case.links[:1])))
        if case.bad and ACTED:
            found.append(f"case {index}: acted on {ACTED!r} after {case.source} ({case.answer})")
        elif case.bad and not result.had_errors:
            found.append(f"case {index}: {case.source} ({case.answer}) and the run reported no error")
        elif not case.bad and len(ACTED) != 1:
            found.append(f"case {index}: the clean case acted {len(ACTED)} times (run {result.status})")
        if len(found) >= 10:
            break
    detail = [f"{line}\n  {json.dumps(plan_of(cases(COUNT, SEED)[int(line.split()[1][:-1])]))}" for line in found]
    assert not found, "\n".join(detail)
    assert len(spread) >= len(SOURCES) * len(LINKS) * 3 // 4, len(spread)  # sources x first links, most met
