"""Composition in the plan language: fan-out, sub-plans, bounded loops, approval gates.

Three jobs, all static (nothing here runs a step):

* :func:`composition_fields` -- the step keys ``for_each``/``as``/``max_items``/
  ``max_concurrency``, ``plan``, ``loop`` and ``gate`` -> IR values (called by ``parse``);
* :func:`resolve_children` -- loads every sub-plan (a file relative to the caller, or
  inline), checks it with the whole pipeline, rejects include cycles, checks the call's
  arguments against the child's inputs, and inlines file children into the plan's
  document so a durable run's artifact is self-contained (a run is never re-derived);
* :func:`worst_case` -- the most steps and LLM steps a plan can execute, from
  ``max_items`` and ``max_iterations``; ``check`` fails plans over a ``max_steps`` budget.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from .record import record, replace
from typing import Any, Callable

from .errors import Diagnostic, PlanInvalid, Span, error
from .expr import classify, parse_expr, parse_template
from .ir import AllOf, AnyOf, FanOut, Gate, Loop, Plan, Ref, Step, SubPlan, parse_duration
from .refschema import ref_schema

REFUSALS = frozenset({"reject", "rejected", "no", "deny", "denied", "refuse", "refused", "false"})
DEFAULT_CHOICES = ("approve", "reject")
COMPOSITE_KEYS = ("plan", "loop", "gate")


# --- parsing the step keys ------------------------------------------------------------------


def composition_fields(ctx: Any, raw: Mapping, path: tuple) -> dict[str, Any]:
    """Step keyword arguments for the composition keys present in ``raw`` (``ctx`` is parse's _Context)."""
    out: dict[str, Any] = {}
    if raw.get("for_each") is not None:
        out["for_each"] = _fan_out(ctx, raw, path)
    if raw.get("plan") is not None:
        out["plan"] = _sub_plan(ctx, raw["plan"], path + ("plan",))
    if raw.get("loop") is not None:
        out["loop"] = _loop(ctx, raw["loop"], path + ("loop",))
    if raw.get("gate") is not None:
        out["gate"] = _gate(ctx, raw["gate"], path + ("gate",))
    return out


def _fan_out(ctx: Any, raw: Mapping, path: tuple) -> FanOut | None:
    given = raw["for_each"]
    name = raw.get("as") or "item"
    cap = _positive(raw.get("max_items"))
    if isinstance(given, list):  # a literal list (its items may hold references): its length bounds it
        over = ctx.value(given, path + ("for_each",))
        return FanOut(over, str(name), min(cap, len(given)) if cap else len(given) or 1,
                      _positive(raw.get("max_concurrency")))  # fmt: skip
    over = _expression(ctx, given, path + ("for_each",))
    return FanOut(over, str(name), cap, _positive(raw.get("max_concurrency")))


def _expression(ctx: Any, text: Any, path: tuple) -> Any:
    if not isinstance(text, str):
        ctx.fail("schema", "`for_each` must be a reference such as †state.items, or a list", path)
        return None
    node = ctx.guard(classify, text, ctx.span(path))
    if node is not None and not isinstance(node, (Ref, AnyOf, AllOf)):
        ctx.fail(
            "bad-for-each",
            f"`for_each` must be a reference to a list, not text: {text!r}",
            path,
            "write for_each: †state.items",
        )
        return None
    return node


def _positive(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _sub_plan(ctx: Any, raw: Any, path: tuple) -> SubPlan | None:
    if isinstance(raw, str):
        base = os.path.dirname(ctx.name) if ctx.name and not ctx.name.startswith("<") else "."
        return SubPlan(raw, os.path.normpath(os.path.join(base, raw)), at=path)
    if isinstance(raw, Mapping):
        return SubPlan(None, ctx.name, inline=raw, at=path)
    ctx.fail("schema", "`plan` must be a file path or an inline plan", path)
    return None


def _loop(ctx: Any, raw: Any, path: tuple) -> Loop | None:
    if not isinstance(raw, Mapping) or raw.get("plan") is None:
        ctx.fail("schema", "`loop` needs `plan` and `max_iterations`", path)
        return None
    child = _sub_plan(ctx, raw["plan"], path + ("plan",))
    bound = _positive(raw.get("max_iterations"))
    if bound is None:
        ctx.fail(
            "unbounded-loop",
            "a loop needs `max_iterations` (a positive integer)",
            path,
            "there is no unbounded loop: add max_iterations: 10",
        )
        return None
    until = None
    if raw.get("until") is not None:
        until = _until(ctx, raw["until"], path + ("until",))
    return Loop(child, bound, until) if child is not None else None


def _until(ctx: Any, text: Any, path: tuple) -> Any:
    """``†result.done`` (ASCII ``$result.done``): read as a reference into the child's result."""
    if not isinstance(text, str):
        ctx.fail("schema", "`until` must be a reference such as †result.done", path)
        return None
    stripped = text.strip()
    spelled = stripped.replace("\u2020result", "\u2020state").replace("$result", "$state")
    if not stripped.startswith(("\u2020result", "$result")) or "input" in spelled or "\u2020state" in stripped:
        ctx.fail("bad-until", f"`until` must read the child's result, e.g. †result.done, not {text!r}", path)
        return None
    alts = ctx.guard(lambda: parse_expr(spelled, ctx.span(path))[0])
    if not alts:
        return None
    return alts[0][0] if len(alts) == 1 and len(alts[0]) == 1 else AnyOf(tuple(a[0] for a in alts))


def _gate(ctx: Any, raw: Any, path: tuple) -> Gate | None:
    if not isinstance(raw, Mapping) or not isinstance(raw.get("question"), str):
        ctx.fail("schema", "`gate` needs a `question` (text)", path)
        return None
    question = ctx.guard(parse_template, raw["question"], ctx.span(path + ("question",)))
    choices = raw.get("choices")
    schema = raw.get("schema")
    if choices is None and schema is None:
        choices = list(DEFAULT_CHOICES)
    timeout = raw.get("timeout")
    seconds = parse_duration(timeout) if timeout is not None else None
    if timeout is not None and not seconds:
        ctx.fail("bad-duration", f"gate timeout {timeout!r} is not a positive duration of at most 366d",
                 path + ("timeout",))  # fmt: skip
    notify = raw.get("notify") or ()
    gate = Gate(
        question,
        tuple(str(c) for c in choices) if isinstance(choices, list) else None,
        schema if isinstance(schema, Mapping) else None,
        seconds or None,
        raw.get("on_timeout", "fail"),
        (notify,) if isinstance(notify, str) else tuple(str(n) for n in notify),
        "person" if raw.get("answered_by") == "person" else "anyone",
    )
    if "on_timeout" in raw and timeout is None:
        ctx.fail("gate-timeout", "`on_timeout` says what happens after `timeout`, and the gate has none",
                 path + ("on_timeout",))  # fmt: skip
    elif gate.on_timeout != "fail" and gate.choices and gate.on_timeout not in gate.choices:
        ctx.fail("gate-timeout", f"on_timeout {gate.on_timeout!r} is neither `fail` nor one of the choices "
                 f"({', '.join(gate.choices)})", path + ("on_timeout",))  # fmt: skip
    elif gate.on_timeout != "fail" and gate.schema is not None and not _fits(gate.on_timeout, gate.schema):
        ctx.fail("gate-timeout", f"on_timeout {gate.on_timeout!r} is neither `fail` nor an answer the gate's schema "
                 "accepts", path + ("on_timeout",))  # fmt: skip
    return gate


def _fits(value: Any, schema: Mapping[str, Any]) -> bool:
    """Whether ``value`` is an answer ``schema`` accepts (an unusable schema is reported on its own)."""
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import SchemaError

    try:
        return Draft202012Validator(dict(schema)).is_valid(value)
    except (SchemaError, TypeError, ValueError):
        return True


# --- children: load, check, cycles, arguments -------------------------------------------------


@record(frozen=True)
class Budget:
    """What ``check`` enforces about composition (from the project configuration)."""

    default_max_items: int | None = None
    max_steps: int | None = None

    @classmethod
    def of(cls, config: Any) -> "Budget | None":
        """The budget of a configuration object (its ``max_items`` and ``max_steps``), None when it sets neither."""
        if config is None or (
            getattr(config, "max_items", None) is None and getattr(config, "max_steps", None) is None
        ):
            return None
        return cls(config.max_items, config.max_steps)


def resolve_children(
    plan: Plan, data: Any, check_child: Callable, includes: tuple[str, ...], budget: Budget
) -> tuple[Plan, list[Diagnostic], Any]:
    """Each sub-plan loaded and checked; returns the plan with children attached, diagnostics,
    and the document with file children inlined (None when there were none)."""
    diags: list[Diagnostic] = list(_local_rules(plan, budget))
    steps, inlined = [], None
    for index, step in enumerate(plan.steps):
        sub = step.plan or (step.loop.child if step.loop else None)
        if sub is None:
            steps.append(step)
            continue
        child, found, child_doc = _resolve(sub, plan, check_child, includes, budget)
        diags += found
        if child.plan is not None:
            diags += _argument_rules(step, child.plan)
        if step.plan is not None:
            steps.append(replace(step, plan=child))
        elif step.loop is not None:
            steps.append(replace(step, loop=replace(step.loop, child=child)))
        if child_doc is not None:
            inlined = _inline(inlined if inlined is not None else data, index, sub, child_doc)
    if any(d.severity == "error" for d in diags):
        return plan, diags, None
    return replace(plan, steps=tuple(steps)), diags, inlined


def _resolve(sub: SubPlan, parent: Plan, check_child: Callable, includes: tuple[str, ...], budget: Budget):
    """(resolved SubPlan, diagnostics, child document data when it came from a file)."""
    if sub.inline is not None:
        result = check_child(None, sub.inline, parent.source, sub.at, includes)
        return replace(sub, plan=result.plan, analysis=result.analysis), list(result.diagnostics), None
    try:
        real = os.path.realpath(sub.source)
    except ValueError:  # a lone surrogate or NUL: the loader reports the path as an `io` error
        real = sub.source
    if real in includes:
        chain = " -> ".join(os.path.basename(p) for p in (*includes, real))
        return (
            sub,
            [
                error(
                    "include-cycle",
                    f"include cycle: {chain}",
                    Span(parent.source, sub.at),
                    "a plan may not run itself, directly or through other plans",
                )
            ],
            None,
        )
    result = check_child(sub.source, None, None, None, includes + (real,))
    child = replace(sub, plan=result.plan, analysis=result.analysis)
    document = (
        result.plan.document
        if result.plan is not None and result.plan.document is not None
        else (result.document.data if result.document is not None else None)
    )
    return child, list(result.diagnostics), document


def _inline(data: Any, index: int, sub: SubPlan, child_doc: Any) -> Any:
    """A copy of the document with the step's file child replaced by its (checked) document."""
    out = dict(data)
    steps = list(out["steps"])
    step = dict(steps[index])
    body = {**child_doc, "x-source": sub.path}
    if "plan" in step:
        step["plan"] = body
    else:
        step["loop"] = {**step["loop"], "plan": body}
    steps[index] = step
    out["steps"] = steps
    return out


def _argument_rules(step: Step, child: Plan) -> list[Diagnostic]:
    """The call's ``args`` are the child's †input: required ones present, no unknown ones."""
    if step.loop is not None:
        return []  # later iterations get the previous result; only the first is the step's args
    out = []
    known = dict(child.inputs or {})
    for name in child.required_inputs:
        if name not in step.args:
            out.append(
                error(
                    "bad-argument",
                    f"sub-plan {child.source} needs input '{name}'",
                    step.span.at("args"),
                    f"add args: {{{name}: ...}}",
                )
            )
    for name in step.args:
        if known and name not in known:
            out.append(
                error(
                    "bad-argument",
                    f"sub-plan {child.source} has no input '{name}'",
                    step.span.at("args", name),
                    f"its inputs: {', '.join(known)}",
                )
            )
    return out


def _local_rules(plan: Plan, budget: Budget):
    for step in plan.steps:
        kinds = [k for k in ("tool", "llm") if getattr(step, k) is not None] + [
            k for k in COMPOSITE_KEYS if getattr(step, k) is not None
        ]
        if len(kinds) > 1:
            yield error("schema", f"step {step.id} has {' and '.join(kinds)}; it needs exactly one", step.span)
        if step.for_each is not None:
            yield from _fan_out_rules(step, budget)
        else:
            for ref in _item_refs(step):
                yield error(
                    "item-outside-for-each",
                    f"{ref} is only meaningful in a step with for_each",
                    ref.span,
                    "add for_each: †state.list to the step",
                )


def _fan_out_rules(step: Step, budget: Budget):
    assert step.for_each is not None
    if step.for_each.max_items is None and budget.default_max_items is None:
        yield error(
            "missing-max-items",
            f"step {step.id} has for_each but no max_items",
            step.span.at("for_each"),
            "add max_items: N (or set max_items in the configuration)",
        )
    if step.loop is not None or step.gate is not None:
        yield error(
            "schema", f"step {step.id}: for_each works with tool, llm and plan steps only", step.span.at("for_each")
        )


def _item_refs(step: Step):
    from .schedule import step_reads, refs_of

    for node in step_reads(step):
        if isinstance(node, (Ref, AnyOf, AllOf)):
            for ref in refs_of(node):
                if ref.root in ("item", "index"):
                    yield ref


# --- static bounds ------------------------------------------------------------------------------


@record(frozen=True)
class Bounds:
    """The most a plan can execute: steps (children counted) and LLM steps."""

    steps: int
    llm_steps: int

    def to_json(self) -> dict:
        return {"steps": self.steps, "llm_steps": self.llm_steps}


def items_bound(plan: Plan, step: Step, default_max_items: int | None) -> int:
    """The most items a fan-out can have: its cap (``max_items``, else the configuration's), or fewer when
    the schema of the list it goes over says ``maxItems`` (an input's, the state's)."""
    assert step.for_each is not None
    cap = step.for_each.max_items or default_max_items
    over = over_schema(plan, step)
    most = over.get("maxItems") if isinstance(over, Mapping) else None
    if type(most) is int and most >= 0:
        cap = most if cap is None else min(cap, most)
    return cap or 1


def over_schema(plan: Plan, step: Step) -> Any:
    """The schema of the list a fan-out goes over, when the plan says it (None: unknown)."""
    over = step.for_each.over if step.for_each is not None else None
    return ref_schema(plan, over) if isinstance(over, Ref) else None


def worst_case(plan: Plan, default_max_items: int | None = None) -> Bounds:
    steps = llm = 0
    for step in plan.steps:
        inner = _step_bounds(step, default_max_items)
        times = 1
        if step.for_each is not None:
            times = items_bound(plan, step, default_max_items)
        steps += inner.steps * times
        llm += inner.llm_steps * times
    return Bounds(steps, llm)


def _step_bounds(step: Step, default_max_items: int | None) -> Bounds:
    if step.plan is not None and step.plan.plan is not None:
        child = worst_case(step.plan.plan, default_max_items)
        return Bounds(child.steps + 1, child.llm_steps)
    if step.loop is not None and step.loop.child.plan is not None:
        child = worst_case(step.loop.child.plan, default_max_items)
        n = step.loop.max_iterations
        return Bounds(child.steps * n + 1, child.llm_steps * n)
    return Bounds(1, 1 if step.llm is not None else 0)


def budget_rule(plan: Plan, budget: Budget) -> list[Diagnostic]:
    if budget.max_steps is None:
        return []
    bounds = worst_case(plan, budget.default_max_items)
    if bounds.steps <= budget.max_steps:
        return []
    return [
        error(
            "too-many-steps",
            f"this plan could execute {bounds.steps} steps, over the budget of {budget.max_steps} (max_steps)",
            Span(plan.source),
            "lower max_items / max_iterations, or raise max_steps in the configuration",
        )
    ]


def is_refusal(answer: Any) -> bool:
    return isinstance(answer, (str, bool)) and str(answer).strip().lower() in REFUSALS


__all__ = [
    "Budget",
    "Bounds",
    "composition_fields",
    "resolve_children",
    "worst_case",
    "budget_rule",
    "is_refusal",
    "PlanInvalid",
]
