"""The one gate to the world: whether a step that can act on the world may act now.

Every call that can act goes through an execution's start of a step (``Execution._start``: a plan's
steps, a sub-plan's, a fan-out's items and a loop's iterations are steps of an execution), whichever door
started the run (``run``, ``resume``, ``--from``, a streamed plan, MCP, a worker, a schedule, the agent,
the API, a plan test); and there it asks :func:`held_back`. A step *acts* by the one purity rule
(:func:`dagplan.dsl.ir.can_act`: the tool's own word, an undeclared tool acting, a step's ``purity:``
only stricter, a destructive MCP tool acting; an LLM step with acting tools, and a sub-plan, fan-out or
loop holding one, act). Such a step is held back, whatever its plan says (``trigger``, ``on_failure``):

- after a person's refusal: a gate before it was refused (failed, took its refusal branch, or answered a
  refusal a ``when:`` reads), unless on every path from the step up to that gate a step routes what the
  gate decided (:func:`routes_decision`: it reads the refusal's branch, or its ``when:`` compares the
  decision; quoting the decision in an argument or a text is no route): the plan then chose what follows;
- on a failure: under its default rule (``all_succeeded``) when a step it depends on failed or *carries*
  a failure; under an explicit ``trigger:`` (``all_done``, ``none_failed``, ``one_succeeded``) when a step
  whose output it reads does. A step that acts never receives a failure value (``(FAILED: ...)``); a step
  that only reads may, and reason about it.

A failure travels with the value (:func:`tainted_by`): a step that read a failure (or a value carrying one)
completes carrying it (``Unit.tainted``: the unit it came from, journaled with its result, so a resume
keeps it); a fan-out whose items failed carries the first; a sub-plan or loop iteration in which a step
failed, or a gate was refused, fails (``Execution.run_plan``), a refusal as ``refused``, which holds what
follows as a gate's refusal would. Only a route the plan writes takes a failure off a value: a ``catch:``
entry, the error branch of an ``a || b`` output (the step is then ``handled``, not failed).

Held back, it is skipped with the cause ``refused`` or ``input-failed``, naming the step; the run then
ends with errors (exit 1).
"""

from __future__ import annotations

from typing import Any

from ...dsl.ir import Placeholder, Step
from ...dsl.schedule import read_from, refs_of, step_reads, writers_of
from ..core.vocabulary import Cause, StepStatus


def held_back(execution: Any, step: Step) -> tuple[str, Cause] | None:
    """Why ``step`` may not act now (a reason and its cause), or None: it may (or it does not act). A gate is
    held back as what acts is on a failure under its default trigger: a person is not asked a question about a
    failure's text as if it were a value (a ``trigger:`` written on the gate asks anyway: the author chose)."""
    if step.gate is not None and step.trigger == "all_succeeded":
        units = execution.units
        failed = [dep for dep in execution.analysis.deps[step.id] if units[dep].tainted]
        if failed:
            return f"it would ask a person about a failure: {_failed_text(units[failed[0]])}", Cause.INPUT_FAILED
        return None
    if not execution.scope.acts(step):
        return None
    refused = _refusal_before(execution, step.id)
    if refused is not None:
        return f"it acts on the world, and a person refused {refused} before it", Cause.REFUSED
    units = execution.units
    failed = [dep for dep in execution.analysis.deps[step.id] if units[dep].status is StepStatus.FAILED
              or units[dep].tainted]  # fmt: skip
    if not failed:
        return None
    if step.trigger == "all_succeeded":
        return f"it acts on the world, and {_failed_text(units[failed[0]])}", Cause.INPUT_FAILED
    reads = read_from(execution.analysis, step)
    read_failed = [dep for dep in failed if dep in reads]
    if read_failed:
        return (f"it acts on the world, and it would act on the failure of {_origin(units[read_failed[0]])} "
                f"(its trigger {step.trigger} runs it, but never on a failure value)"), Cause.INPUT_FAILED  # fmt: skip
    return None


def _origin(unit: Any) -> str:
    return unit.tainted if unit.status is not StepStatus.FAILED and unit.tainted else unit.id


def _failed_text(unit: Any) -> str:
    if unit.status is StepStatus.FAILED:
        return f"{unit.id}, which it depends on, failed"
    return f"{unit.id}, which it depends on, carries the failure of {unit.tainted}"


def tainted_by(execution: Any, step: Step) -> str | None:
    """The failed unit whose failure ``step``'s value carries, or None: a dependency that failed or carries
    one (under ``all_succeeded`` every dependency, else those it reads). A handled failure (``catch:``, an
    error branch) is a route the plan wrote: it carries nothing."""
    units = execution.units
    deps = execution.analysis.deps[step.id]
    reads = None if step.trigger == "all_succeeded" else read_from(execution.analysis, step)
    for dep in deps:
        if reads is not None and dep not in reads:
            continue
        unit = units[dep]
        if unit.status is StepStatus.FAILED:
            return unit.id
        if unit.tainted:
            return unit.tainted
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
    gates |= {  # a sub-plan or loop a refusal failed: a gate refused inside it, held as that gate would be
        s.id
        for s in execution.plan.nesting_steps
        if s.id in units and units[s.id].step is s and refused_inside(units[s.id])
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
                routed = units[parent].status is not StepStatus.FAILED and routes_decision(
                    analysis, execution.plan.by_id[current], units[parent].step
                )
                if not routed:
                    return parent
                continue  # this path reads the decision: the plan chose what follows a refusal here
            todo.append(parent)
    return None


def routes_decision(analysis: Any, step: Step, gate: Step) -> bool:
    """Whether ``step`` routes what ``gate`` decided: its ``when:`` compares a value the gate wrote, or it
    reads one of the gate's branches (``†state.ok || †state.no``: a branch is written only when its answer
    came). Reading the decision as data (an argument, a placeholder in a text, a prompt) is not a route: it
    would act on a refusal."""
    from ...dsl.condition import condition_refs

    gate_id = gate.id
    branching = gate.output is not None and len(gate.output.alternatives) > 1

    if step.guard is not None:
        for compared in condition_refs(step.guard.condition):
            if compared.root == "state" and any(writer == gate_id for writer, _ in writers_of(analysis, compared)):
                return True
    for node in step_reads(step, guard=False):
        if isinstance(node, Placeholder):
            continue
        for ref in refs_of(node):
            if ref.root == "state" and any(w == gate_id and (branching or alt > 0)
                                           for w, alt in writers_of(analysis, ref)):  # fmt: skip
                return True
    return False


def refused_inside(unit: Any) -> bool:
    """Whether a sub-plan's or loop's unit failed because a person refused a gate inside it."""
    return unit.status is StepStatus.FAILED and (unit.error or {}).get("cause") == Cause.REFUSED


def refused(unit: Any) -> bool:
    """Whether a gate's unit holds a person's no: it failed (refused, no answer in time, an answer off its
    choices), its refusal took the branch the plan routes it to (handled), or its answer is a refusal a
    ``when:`` reads (completed with it)."""
    from ...dsl.compose import is_refusal

    if unit.status in (StepStatus.FAILED, StepStatus.HANDLED):
        return True
    return unit.status is StepStatus.COMPLETED and is_refusal(unit.output)
