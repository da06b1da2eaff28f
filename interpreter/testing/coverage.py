"""Branch coverage of a plan: what it could do (:func:`points`) and what a run did (:func:`observe`).

A *point* is one thing a run can do or not do: a step running, one alternative of a
branching output (its ``||`` paths and its ``catch:`` paths), one choice of a gate, a loop
ending by its ``until`` condition or by its bound, a fan-out over zero items or some, a
``when:`` condition true or false. Points of sub-plans and loop bodies carry the
parent's prefix (``sub.fetch``, ``poll.check``), as their events do once the indexes
are dropped (``poll[2].check``). What a run did is read from its events, the same ones
the journal keeps, so the coverage of a test run and of a recorded run are one thing.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from ...dsl.ir import Plan, Step, walk
from ..core.calls import step_names
from ..core.vocabulary import Cause, Event, EventType


@dataclass(frozen=True)
class Point:
    key: str  # stable: "branch:weather:1"
    step: str  # the step's full id (sub-plans prefixed)
    kind: str  # step | branch | gate | loop | fanout | when
    choice: Any  # the alternative's index, the gate's choice, "condition"/"bound", "zero"/"some", True/False
    label: str  # what a person reads: "weather -> †state.notSunny"

    @property
    def decision(self) -> str:
        """The decision this point is one outcome of (points with the same decision exclude each other)."""
        return f"{self.kind}:{self.step}"


def points(plan: Plan) -> list[Point]:
    """Everything a run of ``plan`` can do, in plan order."""
    out: list[Point] = []
    for sid, step in walk(plan):
        out.append(Point(f"step:{sid}", sid, "step", None, f"{sid} runs"))
        out += decision_points(sid, step)
    return out


def decision_points(sid: str, step: Step) -> list[Point]:
    """The outcomes of the decisions a step makes (none for a step that always does the same)."""
    out = []
    if step.guard is not None:
        text = step.guard.text
        out += [
            Point(f"when:{sid}:true", sid, "when", True, f"{sid} when {text}: true"),
            Point(f"when:{sid}:false", sid, "when", False, f"{sid} when {text}: false"),
        ]
    if step.output is not None and step.output.branching:
        for index, alternative in enumerate(step.output.alternatives):
            paths = " && ".join(map(str, alternative))
            routed = index >= len(step.output.own)
            what = f"catch -> {paths}" if routed else f"-> {paths}"
            out.append(Point(f"branch:{sid}:{index}", sid, "branch", index, f"{sid} {what}"))
    if step.gate is not None and step.gate.choices:
        out += [Point(f"gate:{sid}:{c}", sid, "gate", c, f"{sid} answered {c}") for c in step.gate.choices]
    if step.loop is not None and step.loop.until is not None:
        out += [
            Point(f"loop:{sid}:condition", sid, "loop", "condition", f"{sid} ends by its until condition"),
            Point(f"loop:{sid}:bound", sid, "loop", "bound", f"{sid} reaches max_iterations"),
        ]
    if step.for_each is not None:
        out += [
            Point(f"fanout:{sid}:zero", sid, "fanout", "zero", f"{sid} over zero items"),
            Point(f"fanout:{sid}:some", sid, "fanout", "some", f"{sid} over some items"),
        ]
    return out


def observe(plan: Plan, events: Iterable[Event]) -> set[str]:
    """The keys of the points a run's events show it did."""
    steps = dict(walk(plan))
    seen: set[str] = set()
    fanned: set[str] = set()  # fan-outs with at least one item
    for event in events:
        if event.step is None or not isinstance(event.type, EventType):
            continue
        names = step_names(event.step)
        sid = names[1] if len(names) > 1 else names[0]  # the id without indexes
        step = steps.get(sid)
        if step is None:
            continue
        child = sid != event.step and event.step.endswith("]")  # a fan-out item or a loop iteration
        if child and step.for_each is not None:
            fanned.add(sid)
        _seen(seen, event, sid, step, child, fanned)
    return seen


def _seen(seen: set[str], event: Event, sid: str, step: Step, child: bool, fanned: set[str]) -> None:
    data: Mapping[str, Any] = event.data
    kind = event.type
    if kind is EventType.GATE_ANSWERED:  # a refusal fails the gate: the answer is still a choice made
        if step.gate is not None and step.gate.choices and not child:
            seen.add(f"gate:{sid}:{data.get('value')}")
        return
    if kind is EventType.STEP_SKIPPED:
        if step.guard is not None and data.get("cause") == Cause.CONDITION:
            seen.add(f"when:{sid}:false")
        return
    if kind not in (EventType.STEP_STARTED, EventType.STEP_COMPLETED, EventType.STEP_FAILED):
        return
    seen.add(f"step:{sid}")
    if step.guard is not None:
        seen.add(f"when:{sid}:true")
    if kind is EventType.STEP_STARTED:
        return
    branching = step.output is not None and step.output.branching
    if branching and "alternative" in data and (kind is EventType.STEP_COMPLETED or data.get("handled")):
        if not (child and kind is EventType.STEP_COMPLETED):  # an item's success is the step's first path
            seen.add(f"branch:{sid}:{data['alternative']}")
    if child:
        return
    if kind is EventType.STEP_COMPLETED:
        if step.gate is not None and step.gate.choices and "output" in data:
            seen.add(f"gate:{sid}:{data['output']}")
        if step.loop is not None and step.loop.until is not None:
            seen.add(f"loop:{sid}:condition")
        if step.for_each is not None:
            seen.add(f"fanout:{sid}:{'some' if sid in fanned else 'zero'}")
    elif kind is EventType.STEP_FAILED:
        if step.loop is not None and (data.get("error") or {}).get("cause") == Cause.MAX_ITERATIONS:
            seen.add(f"loop:{sid}:bound")


@dataclass
class PlanCoverage:
    """The points of one plan and those some case did."""

    plan: str
    points: list[Point]
    covered: set[str]

    @property
    def percent(self) -> float:
        return 100.0 * len(self.hit) / len(self.points) if self.points else 100.0

    @property
    def hit(self) -> list[Point]:
        return [p for p in self.points if p.key in self.covered]

    @property
    def missed(self) -> list[Point]:
        return [p for p in self.points if p.key not in self.covered]

    def to_json(self) -> dict[str, Any]:
        kinds: dict[str, dict[str, int]] = {}
        for p in self.points:
            entry = kinds.setdefault(p.kind, {"total": 0, "covered": 0})
            entry["total"] += 1
            entry["covered"] += p.key in self.covered
        return {
            "plan": self.plan,
            "percent": round(self.percent, 1),
            "covered": len(self.hit),
            "total": len(self.points),
            "kinds": kinds,
            "missed": [{"key": p.key, "step": p.step, "label": p.label} for p in self.missed],
        }


# --- paths --------------------------------------------------------------------------------


def combinations(plan: Plan, limit: int) -> tuple[list[tuple[Point, ...]], bool]:
    """The combinations of decision outcomes (one outcome per decision), at most ``limit``; and
    whether there were more."""
    decisions: dict[str, list[Point]] = {}
    for p in points(plan):
        if p.kind != "step":
            decisions.setdefault(p.decision, []).append(p)
    out: list[tuple[Point, ...]] = []
    for combo in itertools.product(*decisions.values()):
        if len(out) == limit:
            return out, True
        out.append(combo)
    return out, False


def covered_by(combo: tuple[Point, ...], runs: Iterable[set[str]]) -> bool:
    """Whether one run made every decision of ``combo`` that it reached as ``combo`` says (and made at
    least one of them)."""
    for seen in runs:
        made = [p for p in combo if any(k.startswith(f"{p.kind}:{p.step}:") for k in seen)]
        if made and all(p.key in seen for p in made):
            return True
    return False
