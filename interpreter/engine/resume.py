"""The resume policy: what a resumed run takes from its journal, and what it runs again.

One rule for every unit of work -- a step, a fan-out item (``review[3]``), a sub-plan's
step (``sub.fetch``), a loop iteration's step (``poll[2].check``):

- completed (or handled) units replay their recorded result and call nothing;
- pending, failed, skipped and waiting units run (a gate finds its recorded answer);
- an interrupted unit (started, never settled) follows the policy for its class
  (``Config.resume``, :func:`dsl.ir.resume_class`: every step that can act is ``side_effect``):
  ``retry`` runs it again (at least once), ``adopt`` records it as completed with no output,
  ``ask`` asks ``on_interrupted(unit, purity)``. With no one to ask (no terminal, CI, a worker)
  nothing is guessed: the run stops before anything runs, in the durable ``needs_decision`` state,
  until an operator says ``retry`` or ``adopt``; so a side effect
  is never repeated silently, and no later step acts on a failure nobody saw. An interrupted composition
  step (fan-out, sub-plan, loop, gate) always runs again: its children decide.

:class:`Replay` makes every decision up front, before anything runs, so all questions are
asked at once; the engine then only looks units up.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping

from ...dsl.errors import RunError
from ...dsl.ir import Plan, Step, can_act, resume_class
from ...dsl.schedule import analysis_of
from ..core.config import RESUME_DEFAULTS
from ..core.progress import Progress
from ..core.vocabulary import Event, EventType, StepStatus

AskInterrupted = Callable[[str, str], str]  # (unit id, purity) -> "retry" | "adopt" | "fail" | "decide"
RETRY, ADOPT, ASK, FAIL, REPLAY, RUN = "retry", "adopt", "ask", "fail", "replay", "run"
DECIDE = "decide"  # nobody can settle it now: the run stops in needs_decision


INTERRUPTED_ERROR = "Interrupted"  # the error type of a unit failed because nobody could say whether it ran


def action_for(
    status: StepStatus, purity: str | None, policy: Mapping[str, str], error: Mapping[str, Any] | None = None
) -> str:
    """What resuming does with one unit the journal left in ``status`` (the one rule).

    A unit an earlier resume failed as :data:`INTERRUPTED_ERROR` is still interrupted: the
    next resume asks again (or follows the policy), never runs a side effect silently."""
    if status.has_output:
        return REPLAY
    if (
        status is StepStatus.INTERRUPTED
        or status is StepStatus.RUNNING
        or (status is StepStatus.FAILED and (error or {}).get("type") == INTERRUPTED_ERROR)
        or (status is StepStatus.FAILED and (error or {}).get("outcome") == "unknown")
    ):
        return policy.get(purity or "undeclared", RETRY)
    return RUN


def interrupted_text(unit_id: str) -> str:
    return f"{unit_id} was interrupted and may or may not have happened; it was not run again"


# --- locating a unit in the plan ---------------------------------------------------------------


def step_at(plan: Plan, unit_id: str) -> Step | None:
    """The step definition a unit follows: ``review[3]`` -> review; ``sub.fetch`` -> fetch of sub's plan."""
    step: Step | None = None
    current: Plan | None = plan
    for part in unit_id.split("."):
        name = part.split("[", 1)[0]
        if current is None or name not in current.by_id:
            return None
        step = current.by_id[name]
        child = step.plan or (step.loop.child if step.loop is not None else None)
        current = child.plan if child is not None else None
    return step


def is_composite(step: Step) -> bool:
    """A step whose work is done by children (each of which resumes on its own)."""
    return step.for_each is not None or step.kind in ("plan", "loop", "gate")


def _composite_unit(step: Step, unit_id: str) -> bool:
    if "[" in unit_id.rsplit(".", 1)[-1]:  # an item or an iteration: composite when what it runs is
        return step.kind in ("plan", "loop", "gate")
    return is_composite(step)


# --- the analysis, for reports ----------------------------------------------------------------


@dataclass(frozen=True)
class ResumePlan:
    """What a resume does with each step of the plan: ``replay`` | ``run`` | ``retry`` | ``adopt`` | ``ask``."""

    policy: str  # retry_pending | discard
    classes: Mapping[str, StepStatus]
    actions: Mapping[str, str]

    def asking(self) -> list[str]:
        """Interrupted side-effecting steps whose fate a person must decide."""
        return [sid for sid, action in self.actions.items() if action == ASK]


def resume_plan(
    progress: Progress, plan: Plan, tools: Mapping[str, Any] | None = None, policy: Mapping[str, str] | None = None
) -> ResumePlan:
    """Apply the resume policy to the plan's own steps (children decide when they are reached)."""
    policy = {**RESUME_DEFAULTS, **(policy or {})}
    classes, actions = {}, {}
    for step in plan.steps:
        found = progress.steps.get(step.id)
        status = found.status if found is not None else StepStatus.PENDING
        classes[step.id] = status
        action = action_for(status, resume_class(step, tools or {}), policy, found.error if found else None)
        actions[step.id] = RUN if action in (ADOPT, ASK, RETRY) and is_composite(step) else action
    return ResumePlan(policy["default"], classes, actions)


# --- what the engine replays -------------------------------------------------------------------


@dataclass(frozen=True)
class Recorded:
    """A unit's settled result taken from the journal instead of running it."""

    status: StepStatus  # completed | handled | failed
    output: Any = None
    attempts: int = 0
    alternative: int = 0
    error: Mapping[str, Any] | None = None
    usage: Mapping[str, Any] | None = None
    routes: Mapping[str, list] | None = None  # a fan-out's catch paths: alternative -> error objects
    fingerprint: str | None = None  # what determined the result (reuse.py), as recorded
    tainted: str | None = None  # the failed unit whose failure its value carries (world.py), as recorded
    adopted: bool = False  # a person took an interrupted call as done (``--on-interrupted adopt``)


class Replay:
    """Every unit a resumed run does not run again, decided before anything runs."""

    def __init__(
        self,
        units: Mapping[str, Recorded] | None = None,
        answers: Mapping[str, Any] | None = None,
        undecided: Mapping[str, str] | None = None,
        waited: Mapping[str, Mapping[str, Any]] | None = None,
    ):
        self.units = dict(units or {})
        self.answers = dict(answers or {})
        self.undecided = dict(undecided or {})  # unit id -> purity: interrupted side effects nobody settled
        self.waited = dict(waited or {})  # gate unit id -> the request it waited with (its deadline)

    def get(self, unit_id: str) -> Recorded | None:
        return self.units.get(unit_id)

    def answer(self, unit_id: str) -> tuple[bool, Any]:
        """A gate's recorded answer."""
        return (True, self.answers[unit_id]) if unit_id in self.answers else (False, None)

    @classmethod
    def of(
        cls,
        journal: Any,
        plan: Plan,
        tools: Mapping[str, Any],
        policy: Mapping[str, str] | None,
        ask: AskInterrupted | None,
        adopted_output: Any = None,
    ) -> "Replay":
        """Decide every unit the journal mentions; adoptions are recorded in the journal (acquired), with
        ``adopted_output`` as their output (what the operator says the side effect returned)."""
        policy = {**RESUME_DEFAULTS, **(policy or {})}
        progress = journal.progress()
        units: dict[str, Recorded] = {}
        undecided: dict[str, str] = {}
        for unit_id, found in progress.steps.items():
            step = step_at(plan, unit_id)
            if step is None:
                continue
            kind = resume_class(step, tools)
            action = action_for(found.status, kind, policy, found.error)
            if action in (ADOPT, ASK, RETRY) and _composite_unit(step, unit_id):
                continue  # a composition step runs again: its children decide
            if action == ASK:
                action = ask(unit_id, kind) if ask is not None else DECIDE
            if action == DECIDE:
                undecided[unit_id] = kind
                continue
            decided = _decided(journal, unit_id, found, action, adopted_output)
            if decided is not None:
                units[unit_id] = decided
        waited = {uid: found.fields["request"] for uid, found in progress.steps.items() if found.fields.get("request")}
        return cls(units, progress.answers, undecided, waited)


def needs_decision(run_id: str, undecided: Mapping[str, str]) -> RunError:
    """The error of a run stopped in ``needs_decision``: which steps, what is known, the exact commands."""
    names = ", ".join(f"{unit} ({purity})" for unit, purity in undecided.items())
    return RunError.make(
        "needs-decision",
        f"run {run_id} needs a decision: {names} started and its result was never recorded, so nobody knows"
        " whether it happened; nothing after it was started",
        hint=f"if it did not happen: dagplan resume {run_id} --on-interrupted retry (the tool gets the same"
        f" idempotency_key argument, when it takes one); if it did: dagplan resume {run_id} --on-interrupted adopt",
    )


def _decided(journal: Any, unit_id: str, found: Any, action: str, adopted_output: Any = None) -> Recorded | None:
    if action == REPLAY:
        return Recorded(
            found.status,
            found.output,
            found.attempts,
            found.alternative,
            found.error,
            found.fields.get("usage"),
            found.fields.get("routes"),
            found.fields.get("fingerprint"),
            found.fields.get("tainted"),
            bool(found.fields.get("adopted")),
        )
    if action == ADOPT:
        journal.record(
            Event(
                EventType.STEP_COMPLETED,
                journal.id,
                unit_id,
                data={"output": adopted_output, "attempts": found.attempts, "adopted": True},
            )
        )
        return Recorded(StepStatus.COMPLETED, adopted_output, found.attempts, adopted=True)
    if action == FAIL:
        error = {"step": unit_id, "type": INTERRUPTED_ERROR, "message": interrupted_text(unit_id)}
        return Recorded(StepStatus.FAILED, None, found.attempts, error=error)
    return None


def side_effects_again(progress: Any, plan: Plan, tools: Mapping[str, Any], from_step: str) -> list[str]:
    """The side-effecting units ``resume --from from_step`` would run again although they already ran (or
    started): each would touch the world a second time."""
    from ..stores.journal import cleared_ids

    again = []
    for unit_id in cleared_ids(progress, from_step, list(analysis_of(plan).order)):
        found, step = progress.steps.get(unit_id), step_at(plan, unit_id)
        if found is None or step is None or found.status in (StepStatus.PENDING, StepStatus.SKIPPED):
            continue
        if can_act(step, tools) and not is_composite(step):
            again.append(unit_id)
    return again


def rerun_refused(run_id: str, from_step: str, again: list[str]) -> RunError:
    return RunError.make(
        "rerun-side-effects",
        f"resuming run {run_id} from {from_step} would run side effects again: {', '.join(again)}",
        hint=f"if that is what you want: dagplan resume {run_id} --from {from_step} --rerun-side-effects",
    )
