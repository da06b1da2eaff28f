"""Lazy mode: what a plan would do, computed without running anything.

``Preview.to_json()`` is a stable, documented object (see README, "Preview JSON").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import AbstractSet as Set, Any, Mapping

from ...dsl.ir import NOT_GIVEN, AllOf, AnyOf, Plan, Placeholder, Ref, Step, Template, acts_as_known
from ...dsl.schedule import Analysis, early_steps
from ..core.config import is_catalog

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
    kind: str = "tool"  # tool | llm | plan | loop | gate
    repeat: str | None = None  # "for each of †state.xs (at most 20)" / "at most 10 iterations until ..."
    children: tuple["StepPreview", ...] = ()  # a sub-plan's steps, nested under their parent
    when: str | None = None  # the step's condition, as canonically written
    decided_after: tuple[str, ...] = ()  # the steps whose results the condition reads (none: known at start)
    catch: tuple[dict, ...] = ()  # {errors, output} per catch entry
    destructive: bool = False  # its tool says it may destroy something (an MCP tool's destructiveHint)
    acts: bool = False  # it can act on the world (dsl.ir.can_act: its tool, its model's tools, its children)
    purity_unknown: bool = False  # no tools known, and only they could tell whether it acts

    def to_json(self) -> dict[str, Any]:
        out = self._base_json()
        if self.kind in ("plan", "loop", "gate") or self.repeat:
            out.update(kind=self.kind, repeat=self.repeat, children=[c.to_json() for c in self.children])
        if self.when is not None:
            out["when"] = {"condition": self.when, "decided_after": list(self.decided_after)}
        if self.catch:
            out["catch"] = [dict(c) for c in self.catch]
        if self.destructive:
            out["destructive"] = True
        if self.acts:
            out["acts"] = True
        if self.purity_unknown:
            out["purity_unknown"] = True
        return out

    def _base_json(self) -> dict[str, Any]:
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
    """What a plan would run, running nothing: its steps in order, the groups that run together, the steps that act on
    the world and the worst-case cost (``to_json()``)."""

    source: str
    summary: str
    mode: str
    steps: tuple[StepPreview, ...]
    order: tuple[str, ...]
    parallel_groups: tuple[tuple[str, ...], ...]
    result: str | None
    inputs: Mapping[str, Any]
    worst_case: Mapping[str, int] | None = None  # most steps / LLM steps it can execute (composition)
    cost: Mapping[str, Any] | None = None  # the worst case of its model calls (estimate.Estimate), with LLM steps
    starts_early: tuple[str, ...] = ()  # what a streamed plan starts before it is whole (tools known only)

    @property
    def branch_points(self) -> tuple[StepPreview, ...]:
        return tuple(s for s in self.steps if len(s.alternatives) > 1)

    @property
    def run_command(self) -> str:
        """The command that runs this plan, with a placeholder for each required input."""
        return self.command_to_run()

    def command_to_run(self, tool_sources: Any = None) -> str:
        """The command that runs this plan: with the ``--tools`` given (none when the configuration names
        the tools: pass ``()``), else a ``--tools TOOLS.py`` placeholder (none for a plan that calls no tool: a
        gate's, a model's; in place of a catalog, which describes tools and runs none); a placeholder for each
        required input."""
        calls_tools = any(s.kind in ("tool", "plan", "loop") for s in self.steps)
        placeholder = ["--tools TOOLS.py"] if calls_tools else []
        tools = placeholder if tool_sources is None else list(dict.fromkeys(
            "--tools TOOLS.py" if is_catalog(t) else f"--tools {t}" for t in tool_sources))  # fmt: skip
        parts = ["dagplan run", self.source, *tools]
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
            "worst_case": dict(self.worst_case) if self.worst_case else None,
            "cost": dict(self.cost) if self.cost else None,
            "starts_early": list(self.starts_early),
        }


def build_preview(
    plan: Plan, analysis: Analysis, config: Any = None, tools: Mapping[str, Any] | None = None
) -> Preview:
    """What ``plan`` would run; ``config`` (the default model, ``max_items``) prices its model calls;
    ``tools`` (their specs) mark the steps whose tool says it is destructive."""
    destructive = {name for name, t in (tools or {}).items() if getattr(t, "destructive", False)}
    steps = tuple(_step_preview(plan.by_id[sid], analysis, destructive, tools or None) for sid in analysis.order)
    return Preview(
        source=plan.source,
        summary=plan.summary,
        mode=plan.mode,
        steps=steps,
        order=analysis.order,
        parallel_groups=analysis.groups,
        result=symbolic(plan.result) if plan.result is not None else None,
        inputs={k: dict(v) if isinstance(v, Mapping) else v for k, v in (plan.inputs or {}).items()},
        worst_case=_worst_case(plan),
        cost=_cost(plan, config),
        starts_early=early_steps(plan, tools) if tools else (),
    )


def _cost(plan: Plan, config: Any) -> Mapping[str, Any] | None:
    from ..llm.preflight import llm_steps

    if not llm_steps(plan):
        return None
    from ..llm.estimate import estimate

    found = estimate(plan, *_defaults(config))
    return {**found.to_json(), "summary": found.summary(steps=False)}


def _defaults(config: Any) -> tuple[Any, Any, int]:
    if config is None:
        return None, None, 5
    return config.default_model, config.max_items, config.step_max_iterations


def _worst_case(plan: Plan) -> Mapping[str, int]:
    from ...dsl.compose import worst_case

    return worst_case(plan).to_json()


def _composition(step: Step) -> dict[str, Any]:
    """kind, repeat and children of a composition step (see dsl.compose)."""
    from ...dsl.schedule import analyze

    out: dict[str, Any] = {"kind": step.kind}
    if step.gate is not None:
        out["repeat"] = "asks a person: " + (" / ".join(step.gate.choices) if step.gate.choices else "a value (schema)")
    if step.for_each is not None:
        cap = step.for_each.max_items
        out["repeat"] = f"for each of {symbolic(step.for_each.over)}" + (f" (at most {cap})" if cap else "")
    sub = step.plan or (step.loop.child if step.loop else None)
    if step.loop is not None:
        until = (
            f" until {str(step.loop.until).replace(chr(0x2020) + 'state', chr(0x2020) + 'result')}"
            if step.loop.until
            else ""
        )
        out["repeat"] = f"at most {step.loop.max_iterations} iterations{until}"
    if sub is not None and sub.plan is not None:
        analysis = sub.analysis or analyze(sub.plan)
        out["children"] = tuple(_step_preview(sub.plan.by_id[sid], analysis) for sid in analysis.order)
    return out


def _routing(step: Step, analysis: Analysis) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if step.guard is not None:
        from ...dsl.condition import condition_refs, to_text
        from ...dsl.schedule import writers_of

        reads = {
            w
            for ref in condition_refs(step.guard.condition)
            if ref.root == "state"
            for w, _ in writers_of(analysis, ref)
        }
        out["when"] = to_text(step.guard.condition)
        out["decided_after"] = tuple(sid for sid in analysis.order if sid in reads and sid != step.id)
    if step.catch and step.output is not None:
        out["catch"] = tuple(
            {"errors": list(c.errors), "output": " && ".join(map(str, step.output.alternatives[c.alternative]))}
            for c in step.catch
        )
    return out


def _step_preview(step: Step, analysis: Analysis, destructive: Set[str] = frozenset(),
                  tools: Mapping[str, Any] | None = None) -> StepPreview:  # fmt: skip
    alternatives = tuple(" && ".join(map(str, alt)) for alt in step.output.own) if step.output else ()
    return StepPreview(
        id=step.id,
        description=step.description,
        call=step.tool or ("llm" if step.llm is not None else step.kind),
        deps=analysis.deps[step.id],
        args=symbolic(step.args),
        prompt=symbolic(step.llm.prompt) if step.llm else symbolic(step.gate.question) if step.gate else None,
        output=str(step.output) if step.output else None,
        alternatives=alternatives,
        precomputed=step.precomputed is not NOT_GIVEN,
        destructive=step.tool in destructive,
        acts=acts_as_known(step, tools) is True,
        purity_unknown=acts_as_known(step, tools) is None,
        **(_routing(step, analysis) if step.guard is not None or step.catch else {}),
        **(_composition(step) if step.tool is None and step.llm is None or step.for_each is not None else {}),
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
