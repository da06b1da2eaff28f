"""``dagplan test --paths PLAN``: the branch combinations no case covers, each with a starting case.

The combinations are those of :func:`.coverage.combinations` (one outcome per decision,
enumerated up to a bound); one counts as covered when some case's run made each of its
decisions that it reached the way the combination says. For each of the others a test
case is drafted: the plan's inputs, a mock per tool and LLM step (``TODO`` where a value
is needed), the alternative, the error or the gate answer each decision needs, and in
its description what no mock can force (a loop's exit, a fan-out over zero items, a
``when:`` condition).
"""

from __future__ import annotations

import io
import json
from dataclasses import dataclass
from typing import Any, Iterable

from ...dsl.compose import is_refusal
from ...dsl.ir import Plan, Step, StepKind
from .coverage import Point, covered_by, paths, walk

TODO = "TODO"


@dataclass
class PathsReport:
    plan: str
    total: int  # combinations enumerated
    truncated: bool  # more combinations than the bound
    untested: list[tuple[tuple[Point, ...], dict[str, Any]]]  # each with its drafted case

    def to_json(self) -> dict[str, Any]:
        return {
            "plan": self.plan,
            "combinations": self.total,
            "truncated": self.truncated,
            "untested": [{"path": [p.label for p in combo], "case": case} for combo, case in self.untested],
        }

    def to_yaml(self) -> str:
        """The drafted cases as a ``cases:`` list to paste into a test file."""
        from ruamel.yaml import YAML

        yaml = YAML()
        yaml.default_flow_style = None
        yaml.width = 100
        out = io.StringIO()
        yaml.dump({"cases": [case for _, case in self.untested]}, out)
        return out.getvalue()


def untested(plan: Plan, plan_path: str, runs: Iterable[set[str]], limit: int = 64) -> PathsReport:
    found, truncated = paths(plan, limit)
    seen = list(runs)
    missing = [(combo, values) for combo, values in found if not covered_by(combo, seen)]
    return PathsReport(plan_path, len(found), truncated, [(c, draft(plan, c, values)) for c, values in missing])


def draft(plan: Plan, combo: tuple[Point, ...], values: dict[str, Any] | None = None) -> dict[str, Any]:
    """A starting test case that would take ``combo``'s decisions (``values``: what its conditions read,
    by reference, that makes them come out as it says: inputs are filled in, state is said)."""
    steps = dict(walk(plan))
    tools: dict[str, Any] = {}
    llm: dict[str, Any] = {}
    gates: dict[str, Any] = {}
    notes: list[str] = []
    for sid, step in steps.items():
        if step.kind is StepKind.TOOL and step.tool:
            tools.setdefault(step.tool, {"result": TODO})
        elif step.kind is StepKind.LLM:
            llm[sid] = {"json": TODO} if step.llm and step.llm.output_schema else {"text": TODO}
        elif step.gate is not None:
            gates[sid] = step.gate.choices[0] if step.gate.choices else TODO
    for point in combo:
        step = steps[point.step]
        if point.kind == "branch":
            _branch(step, point, tools, llm, notes)
        elif point.kind == "gate":
            gates[point.step] = point.choice
        elif point.kind == "loop":
            notes.append(f"{point.step} ends by its until condition" if point.choice == "condition"
                         else f"{point.step} reaches max_iterations without its until condition")  # fmt: skip
        elif point.kind == "fanout":
            over = step.for_each.over if step.for_each is not None else "its list"
            notes.append(
                f"{point.step} runs over {'an empty list' if point.choice == 'zero' else 'a non-empty list'} ({over})"
            )
        elif point.kind == "when":
            notes.append(f"{point.step}'s condition is {'true' if point.choice else 'false'}")
    case: dict[str, Any] = {"name": " / ".join(p.label for p in combo) or "the plan runs"}
    if notes:
        case["description"] = "make: " + "; ".join(notes)
    given = {ref[len("\u2020input.") :]: v for ref, v in (values or {}).items() if ref.startswith("\u2020input.")}
    state = [f"{ref} is {json.dumps(v)}" for ref, v in (values or {}).items() if ref.startswith("\u2020state.")]
    if state:
        notes.append("its conditions hold when " + ", ".join(state))
        case["description"] = "make: " + "; ".join(notes)
    if plan.inputs:
        case["inputs"] = {name: given.get(name, TODO) for name in plan.inputs}
    mocks = {k: v for k, v in (("tools", tools), ("llm", llm), ("gates", gates)) if v}
    if mocks:
        case["mocks"] = mocks
    case["expect"] = {"status": "completed", "result": TODO}
    if any(p.kind == "gate" and is_refusal(p.choice) for p in combo):
        case["expect"]["had_errors"] = True  # a refused gate is a failed step: the run completes with errors
    return case


def _branch(step: Step, point: Point, tools: dict, llm: dict, notes: list[str]) -> None:
    index = int(point.choice)
    output = step.output
    assert output is not None
    routed = index >= len(output.own)
    if routed:  # a catch path: the step fails with an error its entry takes
        entry = next((c for c in step.catch if c.alternative == index), None)
        kind = next((e for e in entry.errors if e != "*"), "TimeoutError") if entry else "Error"
        response: dict[str, Any] = {"error": {"type": kind, "message": TODO}}
    else:
        response = {"alternative": index}
    if step.kind is StepKind.TOOL and step.tool:
        tools[step.tool] = {"result": TODO, **response} if not routed else response
    elif step.kind is StepKind.LLM:
        key = point.step
        llm[key] = {**llm.get(key, {"text": TODO}), **response} if not routed else response
    else:
        notes.append(point.label)
