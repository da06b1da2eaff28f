"""Step kinds as runners: one table, one narrow context.

A runner knows how to do one kind of step: :class:`ToolRunner`, :class:`GateRunner` here,
:class:`~.llm_step.LLMRunner`, :class:`~.compose.SubPlanRunner` and
:class:`~.compose.LoopRunner`; :class:`~.compose.FanOut` wraps any of them for ``for_each``.
Each has two methods:

- ``prepare(ctx, step)``: resolve what the step needs, once its dependencies settled
  (raises ``Dead`` when it reads what a branch not taken never wrote: the step is skipped);
- ``run(ctx, step, prepared)``: one attempt, returning an awaitable of the output.

The engine wraps ``run`` in the attempt policy (:mod:`.attempts`), unless the runner's
``per_child`` says its children are the attempts (a fan-out's items, a loop's iterations).

A runner sees only :class:`~.context.StepContext`, never the engine: resolve references, call a
tool, emit an event, read the memo and the recorded answers, spend budget, ask a person,
run children. Adding a kind of step means adding a runner to :data:`RUNNERS`.
"""

from __future__ import annotations

from typing import Any, Awaitable, Mapping

from ...dsl.compose import is_refusal
from ...dsl.ir import Plan, Step, StepKind
from .attempts import StepFailure, no_answer_within
from ..core.context import Runner, StepContext
from ..core.vocabulary import EventType


# --- tools -----------------------------------------------------------------------------------


class ToolRunner:
    per_child = False

    def prepare(self, ctx: StepContext, step: Step) -> Any:
        return ctx.resolve(step.args)

    def run(self, ctx: StepContext, step: Step, prepared: Any) -> Awaitable[Any]:
        ctx.emit(EventType.TOOL_CALLED, name=step.tool, args=prepared)  # the journal's record of the call
        return ctx.call_tool(step.tool or "", prepared)


# --- approval gates ----------------------------------------------------------------------------


class GateRunner:
    per_child = False

    def prepare(self, ctx: StepContext, step: Step) -> Any:
        assert step.gate is not None  # the table chose this runner because it is set
        return ctx.resolve(step.gate.question)

    async def run(self, ctx: StepContext, step: Step, question: Any) -> Any:
        gate = step.gate
        assert gate is not None
        request = {
            "step": ctx.unit_id,
            "question": question,
            "choices": list(gate.choices) if gate.choices else None,
            "schema": dict(gate.schema) if gate.schema else None,
        }
        if gate.timeout is not None:  # the deadline is counted from the first wait (ctx.answer keeps it)
            request.update(timeout=gate.timeout, on_timeout=gate.on_timeout)
        if gate.notify:
            request["notify"] = list(gate.notify)
        if gate.answered_by == "person" or ctx.options.person_gates:
            request["answered_by"] = "person"
        answer = await ctx.answer(request)
        if request.get("timed_out") and is_refusal(answer):
            raise StepFailure(f"{no_answer_within(gate.timeout or 0)}: {answer} (its on_timeout)")
        if is_refusal(answer) and decided_on(ctx.plan, step) and not answer_problem(request, answer):
            return answer  # the plan decides on the answer (a when: reads it): refusing is a decision
        return check_answer(request, answer)


def decided_on(plan: Plan, gate: Step) -> bool:
    """Whether a step's ``when:`` reads what the gate writes (one path, no ``||`` route: a route takes a
    refusal to its last path already): then the plan decides on the answer, and a refusal is a value like
    any other (the gate completes), not a failure."""
    from ...dsl.condition import condition_refs

    if gate.output is None or gate.output.branching:
        return False
    heads = {ref.path[:1] for alternative in gate.output.alternatives for ref in alternative}
    guards = [step.guard.condition for step in plan.steps if step.guard is not None]
    return any(ref.root == "state" and ref.path[:1] in heads for guard in guards for ref in condition_refs(guard))


def check_answer(request: Mapping[str, Any], answer: Any) -> Any:
    """The answer as the gate's output; a refusal or an answer outside the choices/schema fails."""
    problem = answer_problem(request, answer)
    if problem:
        raise StepFailure(problem)
    if is_refusal(answer):
        raise StepFailure(f"refused by a person ({answer})")
    return answer


def answer_problem(request: Mapping[str, Any], answer: Any) -> str | None:
    """Why ``answer`` is not acceptable for the gate (not one of its choices, or off its schema)."""
    choices = request.get("choices")
    if choices and answer not in choices:
        shown = repr(answer) if len(repr(answer)) <= 80 else repr(answer)[:77] + "..."
        return f"{shown} is not one of {', '.join(map(str, choices))}"
    if request.get("schema"):
        from jsonschema import Draft202012Validator

        errors = [e.message for e in Draft202012Validator(request["schema"]).iter_errors(answer)]
        if errors:
            return f"the answer does not match the gate's schema: {errors[0]}"
    return None


# --- the table -------------------------------------------------------------------------------


def _table() -> tuple[dict[StepKind, Runner], dict[StepKind, Runner]]:
    from .compose import FanOut, LoopRunner, SubPlanRunner
    from ..llm.llm_step import LLMRunner

    plain: dict[StepKind, Runner] = {
        StepKind.TOOL: ToolRunner(),
        StepKind.LLM: LLMRunner(),
        StepKind.PLAN: SubPlanRunner(),
        StepKind.LOOP: LoopRunner(),
        StepKind.GATE: GateRunner(),
    }
    return plain, {kind: FanOut(runner) for kind, runner in plain.items()}


RUNNERS, FAN_OUTS = _table()


def runner_for(step: Step) -> Runner:
    """The runner of a step: its kind's, wrapped in a fan-out when it has ``for_each``."""
    return (FAN_OUTS if step.for_each is not None else RUNNERS)[step.kind]
