"""Lazy mode: what a plan would do, computed without running anything.

``Preview.to_json()`` is a stable, documented object (see README, "Preview JSON").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from ..dsl.ir import NOT_GIVEN, AllOf, AnyOf, Plan, Placeholder, Ref, Step, Template
from ..dsl.schedule import Analysis

PREVIEW_VERSION = 1


@dataclass(frozen=True)
class StepPreview:
    id: str
    description: str
    call: str  # tool name, or "llm"
    deps: tuple[str, ...]
    args: Any  # references shown symbolically, as written canonically
    prompt: str | None
    output: str | None
    alternatives: tuple[str, ...]  # more than one: a branch point
    precomputed: bool

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "description": self.description,
            "call": self.call,
            "deps": list(self.deps),
            "args": self.args,
            "prompt": self.prompt,
            "output": self.output,
            "alternatives": list(self.alternatives),
            "precomputed": self.precomputed,
        }


@dataclass(frozen=True)
class Preview:
    source: str
    summary: str
    mode: str
    steps: tuple[StepPreview, ...]
    order: tuple[str, ...]
    parallel_groups: tuple[tuple[str, ...], ...]
    result: str | None
    inputs: Mapping[str, Any]

    @property
    def branch_points(self) -> tuple[StepPreview, ...]:
        return tuple(s for s in self.steps if len(s.alternatives) > 1)

    @property
    def run_command(self) -> str:
        """The command that runs this plan, with a placeholder for each required input."""
        parts = ["dagplan run", self.source, "--tools TOOLS.py"]
        for name, schema in self.inputs.items():
            if not (isinstance(schema, Mapping) and "default" in schema):
                kind = schema.get("type", "value") if isinstance(schema, Mapping) else "value"
                parts.append(f"--input {name}=<{kind}>")
        if self.mode == "lazy":
            parts.append("--yes")
        return " ".join(parts)

    def to_json(self) -> dict[str, Any]:
        return {
            "version": PREVIEW_VERSION,
            "source": self.source,
            "summary": self.summary,
            "mode": self.mode,
            "inputs": dict(self.inputs),
            "order": list(self.order),
            "parallel_groups": [list(g) for g in self.parallel_groups],
            "steps": [s.to_json() for s in self.steps],
            "branch_points": [{"step": s.id, "alternatives": list(s.alternatives)} for s in self.branch_points],
            "result": self.result,
            "run": self.run_command,
        }


def build_preview(plan: Plan, analysis: Analysis) -> Preview:
    steps = tuple(_step_preview(plan.by_id[sid], analysis) for sid in analysis.order)
    return Preview(
        source=plan.source,
        summary=plan.summary,
        mode=plan.mode,
        steps=steps,
        order=analysis.order,
        parallel_groups=analysis.groups,
        result=symbolic(plan.result) if plan.result is not None else None,
        inputs={k: dict(v) if isinstance(v, Mapping) else v for k, v in (plan.inputs or {}).items()},
    )


def _step_preview(step: Step, analysis: Analysis) -> StepPreview:
    alternatives = tuple(" && ".join(map(str, alt)) for alt in step.output.alternatives) if step.output else ()
    return StepPreview(
        id=step.id,
        description=step.description,
        call=step.tool or "llm",
        deps=analysis.deps[step.id],
        args=symbolic(step.args),
        prompt=symbolic(step.llm.prompt) if step.llm else None,
        output=str(step.output) if step.output else None,
        alternatives=alternatives,
        precomputed=step.precomputed is not NOT_GIVEN,
    )


def symbolic(node: Any) -> Any:
    """An argument tree with every reference, placeholder and template as its canonical text."""
    if isinstance(node, (Ref, AnyOf, AllOf, Template, Placeholder)):
        return str(node)
    if isinstance(node, Mapping):
        return {k: symbolic(v) for k, v in node.items()}
    if isinstance(node, (tuple, list)):
        return [symbolic(v) for v in node]
    return node
