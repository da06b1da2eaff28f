"""A streamed run: the model writes the plan, safe steps start as their text completes, the rest waits.

One durable run holds it all. It is created before the model is asked (its plan empty, the task and the
planner's settings in its meta), so a run killed while the model writes is a run to resume like any other:

1. the planner streams its answer (:func:`..llm.planner.aplan` ``on_prefix``); each prefix that completes a
   step is checked, and :class:`..engine.early.EarlyStarts` starts its ``pure`` / ``idempotent`` tool steps
   whose dependencies started early too; each result is made durable in the run's journal (a memo keyed by
   the step's fingerprint) before anything reads it;
2. each model answer is memoized once complete; a plan that fails check is repaired as always (its early
   results are kept by fingerprint: the repaired plan does not pay for them again);
3. the whole plan passed check: it is approved (``approve``: every streamed plan, as ``dagplan plan --run``
   asks; without it a lazy plan is refused as any lazy plan is), written to the journal (``plan_written``:
   from then on it is the run's plan for resume, the viewer and ``runs show``), and run; a step that started
   early is taken back by its fingerprint (``reused``: started while the plan was being written).

Nothing with a side effect, no gate, no model step and nothing after them starts before step 3.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Callable, Mapping

from ..core.vocabulary import Event, EventType
from ..engine.early import EarlyStarts
from ..engine.reuse import Reuse
from ..engine.scope import Options, RunScope
from ..stores.journal import StepMemo, json_copy, new_run_id
from ..stores.registry import open_registry
from ..tools.catalog import Tool
from .running import Approve, approve_plan, execute, preflight_run, traced

PLANNER = "planner"  # the unit the planner's memo entries belong to
# what ends a streamed run for good
FINAL = frozenset({"planning-failed", "no-tool-fits", "not-approved", "approval-required"})
KEPT = ("repair", "guide", "structured_output")  # the planner's settings a resume plans with again


@dataclass(frozen=True)
class StreamRequest:
    """One streamed plan-and-run, as asked."""

    task: str
    tools: Mapping[str, Tool]
    options: Options  # how the plan runs (its LLM steps' model, limits, subscribers...)
    model: str  # the planner's model
    planner: Mapping[str, Any] = field(default_factory=dict)  # aplan's settings: repair, guide, structured_output
    completion_kwargs: Mapping[str, Any] = field(default_factory=dict)
    inputs: Mapping[str, Any] | None = None
    approve: Approve | None = None  # asked for the whole plan before anything but an early step runs
    durable: bool = True
    state: Any = None
    meta: Mapping[str, Any] | None = None
    on_run_created: Callable[[str], None] | None = None
    on_event: Callable[[Mapping[str, Any]], None] | None = None  # started_early, early_done, prefix_failed...
    on_attempt: Callable[[Any], None] | None = None


async def plan_and_run(request: StreamRequest) -> Any:
    """Plan ``request.task`` streamed and run it (see the module doc): the PlanResult, its ``run`` set."""
    journal = None
    run_id = new_run_id()
    if request.durable:
        settings = {k: _plain(v) for k, v in request.planner.items() if k in KEPT}
        journal = open_registry(request.state).create(
            plan_doc={"steps": []},
            plan_name=f"(planned) {request.task[:60]}",
            inputs=dict(request.inputs or {}),
            meta={
                "streamed": {"task": request.task, "model": request.model, **settings},
                "options": request.options.recorded(),
                **(request.meta or {}),
            },  # fmt: skip
        )
        journal.acquire()
        run_id = journal.id
    if request.on_run_created:
        request.on_run_created(run_id)
    return await _continue(request, journal, run_id)


def is_streamed_unwritten(journal: Any) -> bool:
    """A streamed run whose plan the model had not finished (or that never passed check) when it stopped."""
    return bool(journal.meta.get("streamed")) and not journal.plan_written


async def resume_streamed(journal: Any, request: StreamRequest) -> Any:
    """Go on with a streamed run that stopped before its plan was written: the model's complete answers come
    from the memo, the early results by fingerprint; the rest as for a new one. The RunResult, as any
    resume's."""
    journal.acquire()
    if request.on_run_created:
        request.on_run_created(journal.id)
    return (await _continue(request, journal, journal.id)).run


def request_of(journal: Any, tools: Mapping[str, Tool], options: Options, **given: Any) -> StreamRequest:
    """The request a streamed run was started with, from its meta (tools and options as given now)."""
    said = dict(journal.meta.get("streamed") or {})
    planner = {k: tuple(v) if k == "guide" and isinstance(v, list) else v for k, v in said.items() if k in KEPT}
    return StreamRequest(said.get("task", ""), tools, options, said.get("model", ""), planner,
                         inputs=journal.inputs, **given)  # fmt: skip


async def _continue(request: StreamRequest, journal: Any, run_id: str) -> Any:
    from ..engine.inputs import prepare_inputs
    from ..llm.planner import aplan

    reuse = Reuse.of([journal]) if journal is not None else Reuse()
    early = EarlyStarts(run_id, request.tools, request.options, reuse, request.inputs,
                        record=_recorder(journal), commit=journal.commit if journal is not None else None,
                        on_event=request.on_event)  # fmt: skip
    said = request.on_event or (lambda event: None)

    checked_ids: set[tuple[int, str]] = set()

    def prefix(streamed: Any) -> None:
        checked, attempt = streamed.checked, streamed.attempt
        if streamed.complete or checked.ok:
            for step in checked.plan.steps[: streamed.complete]:
                if (attempt, step.id) not in checked_ids:
                    checked_ids.add((attempt, step.id))
                    said({"type": "step_checked", "attempt": attempt, "step": step.id})
            early.offer(checked.plan, streamed.complete, attempt)
        else:  # a step failed check: nothing after it starts early; the whole plan is judged at the end
            errors = [d.format() for d in checked.diagnostics if d.severity == "error"]
            said({"type": "prefix_failed", "attempt": attempt, "diagnostic": errors[0] if errors else "",
                  "diagnostics": errors})  # fmt: skip
        if streamed.final:
            said({"type": "answer_complete", "attempt": attempt})

    specs = {name: tool.spec for name, tool in request.tools.items()}
    try:
        try:
            result = await aplan(request.task, tools=specs, model=request.model, on_prefix=prefix,
                                 memo=StepMemo(journal, PLANNER) if journal is not None else None,
                                 completion_kwargs=request.completion_kwargs, on_attempt=request.on_attempt,
                                 **request.planner)  # fmt: skip
        finally:
            await early.settle()  # a result still coming is taken, never asked for twice
        plan = result.plan
        if request.options.gate_acting:  # recorded with the run: a resume before the plan was written gates it too
            from .approval import acting_gated

            plan = acting_gated(plan, request.tools)
        values = prepare_inputs(plan, request.inputs, strict=True)
        preflight_run(plan, request.options, request.tools)
        # every streamed plan with `approve` is shown whole and asked; without it, a lazy plan is refused
        await approve_plan(plan, request.approve, always=request.approve is not None,
                           ran="only steps that change nothing ran", tools=request.tools)  # fmt: skip
    except BaseException as exc:
        if journal is not None:
            await _stopped(journal, exc)
        raise
    said({"type": "plan_complete", "steps": len(plan.steps), "started_early": list(early.started)})
    options = replace(traced(request.options, plan).limited_by(plan), reuse=reuse)
    scope = RunScope(run_id, request.tools, options, journal)
    if journal is not None:
        scope.emit(EventType.PLAN_WRITTEN, plan=json_copy(plan.document), dialect=plan.dialect,
                   started_early=list(early.started))  # fmt: skip
    run = await execute(plan, values, scope)
    return replace(result, run=run)


def _recorder(journal: Any) -> Callable[[str, str, Mapping[str, Any]], None] | None:
    if journal is None:
        return None

    def record(fp: str, unit: str, value: Mapping[str, Any]) -> None:
        journal.record(Event(EventType.MEMO, journal.id, PLANNER, data={"key": fp, "value": dict(value)}))

    return record


async def _stopped(journal: Any, exc: BaseException) -> None:
    """The run stopped before its plan was written: said in its journal. No valid plan, or a person's no,
    ends it; anything else (the model unreachable, its stream cut, a kill, Ctrl-C) leaves it to resume."""

    from ...dsl.errors import DagplanError

    codes = {d.code for d in exc.diagnostics} if isinstance(exc, DagplanError) else set()
    try:
        if not codes & FINAL:
            journal.record(Event(EventType.PLAN_INTERRUPTED, journal.id))
            journal.commit_sync()
        else:
            message = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            journal.record(Event(EventType.PLAN_ABORTED, journal.id, data={"message": message}))
            await journal.commit()
    finally:
        journal.release()


def _plain(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


__all__ = ["StreamRequest", "plan_and_run", "resume_streamed", "request_of"]
