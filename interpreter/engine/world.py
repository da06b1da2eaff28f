"""The one gate to the world: whether a step that can act on the world may act now.

Every call that can act goes through an execution's start of a step (``Execution._start``: a plan's
steps, a sub-plan's, a fan-out's items and a loop's iterations are steps of an execution), whichever door
started the run (``run``, ``resume``, ``--from``, a streamed plan, MCP, a worker, a schedule, the agent,
the API, a plan test); and there it asks :func:`held_back`. A step *acts* by the one purity rule
(:func:`dagplan.dsl.ir.can_act`: the tool's own word, an undeclared tool acting, a step's ``purity:``
only stricter, a destructive MCP tool acting; an LLM step with acting tools, and a sub-plan, fan-out or
loop holding one, act). Such a step is held back, whatever its plan says (``trigger``, ``on_failure``):

- after a person's refusal: a gate before it was refused (failed, took its refusal branch, or answered a
  refusal a ``when:`` reads), unless on every path from the step up to that gate a step reads what the
  gate decided (the refusal's branch, the decision a ``when:`` compares): the plan then chose what follows;
- on a failure: under its default rule (``all_succeeded``) when a step it depends on failed; under an
  explicit ``trigger:`` (``all_done``, ``none_failed``, ``one_succeeded``) when a step whose output it
  reads failed. A step that acts never receives a failure value (``(FAILED: ...)``); a step that only
  reads may, and reason about it.

Held back, it is skipped with the cause ``refused`` or ``input-failed``, naming the step; the run then
ends with errors (exit 1).
"""

from __future__ import annotations

from typing import Any

from ...dsl.ir import Step
from ...dsl.schedule import read_from
from ..core.vocabulary import Cause, StepStatus


def held_back(execution: Any, step: Step) -> tuple[str, Cause] | None:
    """Why ``step`` may not act now (a reason and its cause), or None: it may (or it does not act)."""
    if not execution.scope.acts(step):
        return None
    refused = _refusal_before(execution, step.id)
    if refused is not None:
        return f"it acts on the world, and a person refused {refused} before it", Cause.REFUSED
    units = execution.units
    failed = [dep for dep in execution.analysis.deps[step.id] if units[dep].status is StepStatus.FAILED]
    if not failed:
        return None
    if step.trigger == "all_succeeded":
        return f"it acts on the world, and {failed[0]}, which it depends on, failed", Cause.INPUT_FAILED
    reads = read_from(execution.analysis, step)
    read_failed = [dep for dep in failed if dep in reads]
    if read_failed:
        return (f"it acts on the world, and it would act on the failure of {read_failed[0]} "
                f"(its trigger {step.trigger} runs it, but never on a failure value)"), Cause.INPUT_FAILED  # fmt: skip
    return None


def _refusal_before(execution: Any, step_id: str) -> str | None:
    """A refused gate before ``step_id`` (among everything it depends on, however far) that the plan did not
    route to it: a path from the step up to the gate on which no step reads what the gate decided. A gate
    is refused when a person said no (:func:`refused`); a step reading its decision (the refusal's branch
    ``†state.rejected``, or the decision a ``when:`` compares) routes it, unless the gate failed (then
    what it reads is a failure)."""
    units = execution.units  # the plan's gates (cached with it), each by its own unit here: no walk of every step
    gates = {
        g.id for g in execution.plan.gate_steps if g.id in units and units[g.id].step is g and refused(units[g.id])
    }
    if not gates:
        return None
    deps, analysis = execution.analysis.deps, execution.analysis
    seen, todo = set(), [step_id]
    while todo:
        current = todo.pop()
        if current in seen:
            continue
        seen.add(current)
        for parent in deps[current]:
            if parent in gates:
                routed = units[parent].status is not StepStatus.FAILED and parent in read_from(
                    analysis, execution.plan.by_id[current]
                )
                if not routed:
                    return parent
                continue  # this path reads the decision: the plan chose what follows a refusal here
            todo.append(parent)
    return None


def refused(unit: Any) -> bool:
    """Whether a gate's unit holds a person's no: it failed (refused, no answer in time, an answer off its
    choices), its refusal took the branch the plan routes it to (handled), or its answer is a refusal a
    ``when:`` reads (completed with it)."""
    from ...dsl.compose import is_refusal

    if unit.status in (StepStatus.FAILED, StepStatus.HANDLED):
        return True
    return unit.status is StepStatus.COMPLETED and is_refusal(unit.output)
