"""Starting and resuming runs: inputs, approval, the journal, the replay, then the engine.

The public API (``dagplan.arun`` / ``dagplan.aresume``) is a thin layer over these two
functions; both end in :func:`execute`, so a fresh run and a resumed one are run the
same way.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from ...dsl.errors import PlanInvalid, RunError, first_line
from ...dsl.ir import Plan
from ...dsl.schedule import analysis_of
from ..engine.results import RunResult
from ..stores.journal import Journal, check_step, clear_from, new_run_id, release
from ..stores.registry import open_registry
from ..core.progress import plan_step_ids
from ..engine.resume import AskInterrupted, Replay, needs_decision, rerun_refused, side_effects_again
from ..engine.scope import Options, RunScope
from ..tools.catalog import Tool
from ..core.vocabulary import Event, EventType, RunStatus
from .running import Approve, approve_plan, execute, preflight_run, traced


@dataclass(frozen=True)
class RunRequest:
    """One new run, as asked: built once (by the API, a plan test, the agent) and passed down whole."""

    plan: Plan
    tools: Mapping[str, Tool]
    options: Options
    inputs: Mapping[str, Any] | None = None
    approve: Approve | None = None
    durable: bool = False
    state: Any = None
    run_id: str | None = None
    meta: Mapping[str, Any] | None = None
    on_run_created: Callable[[str], None] | None = None


@dataclass(frozen=True)
class ResumeRequest:
    """One resume of a durable run, as asked: built once (by the API, a worker) and passed down whole."""

    run_id: str
    tools: Mapping[str, Tool]
    options: Options
    config: Any
    state: Any = None
    from_step: str | None = None
    on_interrupted: AskInterrupted | None = None
    on_run_created: Callable[[str], None] | None = None
    journal: Journal | None = None  # the run's journal when the caller holds it already (a worker's claim)
    rerun_side_effects: bool = False
    adopted_output: Any = None
    approve: Approve | None = None  # a streamed run stopped before its plan was whole: its plan is approved then


async def start(request: RunRequest) -> RunResult:
    """A new run of a loaded plan: inputs checked, a lazy plan approved, then executed (durably if asked)."""
    from ..engine.inputs import prepare_inputs

    plan, tools, options, state, run_id = request.plan, request.tools, request.options, request.state, request.run_id
    inputs, approve, durable, meta, on_run_created = (request.inputs, request.approve, request.durable, request.meta,
                                                      request.on_run_created)  # fmt: skip

    values = prepare_inputs(plan, inputs, strict=True)
    preflight_run(plan, options, tools)  # before approval: nothing to approve in vain
    await approve_plan(plan, approve, tools=tools)  # its preview says what acts, by these tools
    journal = None
    if durable:
        if plan.document is None:
            raise RunError.make(
                "not-durable", "a durable run needs a plan loaded from a document", hint="use dagplan.load()"
            )
        journal = open_registry(state).create(
            plan_doc=plan.document,
            plan_name=plan.source,
            inputs=dict(values),
            meta={"dialect": plan.dialect, "options": options.recorded(), **(meta or {})},
        )
        journal.acquire()
        run_id = journal.id
    run_id = run_id or new_run_id()
    if on_run_created:
        on_run_created(run_id)
    scope = RunScope(run_id, tools, traced(options, plan).limited_by(plan), journal)
    return await execute(plan, values, scope)


async def resume(request: ResumeRequest) -> RunResult:
    """Resume a durable run: completed units replay, interrupted ones follow the resume policy, the rest runs.
    ``journal``: the run's journal when the caller holds it already (a worker that claimed it).
    ``from_step`` refuses to run a side effect that already ran again unless ``rerun_side_effects``."""
    tools, options, config, from_step = request.tools, request.options, request.config, request.from_step
    on_interrupted, on_run_created = request.on_interrupted, request.on_run_created
    journal = request.journal if request.journal is not None else open_registry(request.state).open(request.run_id)
    refuse_finished(journal)  # a run that ended for good says so before anything else
    options = options.resumed(journal.meta.get("options"))
    if journal.meta.get("streamed"):  # its steps started early are taken back by fingerprint
        from dataclasses import replace

        from ..engine.reuse import Reuse
        from .streamed import is_streamed_unwritten, request_of, resume_streamed

        options = replace(options, reuse=Reuse.of([journal]))
        if is_streamed_unwritten(journal):  # stopped while the model wrote the plan: plan again (memoized)
            return await resume_streamed(journal, request_of(
                journal, tools, options, completion_kwargs=options.completion_kwargs, approve=request.approve,
                on_run_created=on_run_created, state=request.state))  # fmt: skip
    plan = stored_plan(journal, tools, config, from_step)
    still_approved(journal, plan, tools)
    preflight_run(plan, options, tools)
    order = list(analysis_of(plan).order)
    if (config.resume or {}).get("default") == "discard":
        raise RunError.make(
            "resume-discarded",
            f"the resume policy is `discard`: run {journal.id} was not resumed",
            hint=f"dagplan discard {journal.id}, then start a new run",
        )
    if from_step is not None and not request.rerun_side_effects:
        again = side_effects_again(journal.progress(), plan, tools, from_step)
        if again:
            raise rerun_refused(journal.id, from_step, again)
    journal.acquire()
    try:
        if on_run_created:
            on_run_created(journal.id)
        if from_step is not None:
            clear_from(journal, from_step, order)
        replay = Replay.of(journal, plan, tools, config.resume, on_interrupted, request.adopted_output)
        if replay.undecided:  # stop durably before anything runs: no later step acts on an unknown outcome
            journal.record(Event(EventType.PLAN_NEEDS_DECISION, journal.id, None, data={"units": replay.undecided}))
            await journal.commit()
            raise needs_decision(journal.id, replay.undecided)
        scope = RunScope(journal.id, tools, traced(options, plan).limited_by(plan), journal, replay)
        resumed: dict[str, Any] = {"from": from_step, "replayed": sorted(replay.units)}  # "from": a keyword
        scope.emit(EventType.PLAN_RESUMED, **resumed)
        return await execute(plan, journal.inputs, scope, own_journal=False)
    finally:
        await release(journal)


def still_approved(journal: Journal, plan: Plan, tools: Mapping[str, Tool] | None) -> None:
    """A run started under a person's approval resumes only with the tools approved: code changed since
    (a later commit, another branch checked out) is refused before any step runs, in the approval's words."""
    approval = journal.meta.get("approval")
    if not approval or tools is None:
        return
    from .approval import tools_differences

    found = tools_differences(approval, plan, tools)
    if found:
        raise RunError.make("not-approved", f"run {journal.id} was approved with other tools: " + "; ".join(found),
                            hint="restore the approved code, or have a person approve the plan again and start "
                                 "a new run: dagplan preview PLAN --approve -o FILE")  # fmt: skip


def stored_plan(journal: Journal, tools: Mapping[str, Tool] | None, config: Any, from_step: str | None = None) -> Plan:
    """A run's own plan, from its artifact (never re-derived), checked against today's tools (None: not
    checked against any, for a viewer).

    A ``from_step`` (``resume --from``) is checked first: a wrong step id is the caller's
    mistake whatever else is wrong."""
    if from_step is not None:
        check_step(journal.id, from_step, plan_step_ids(journal.plan_doc))
    if journal.meta.get("streamed") and not journal.plan_written:
        raise RunError.make(
            "plan-not-written",
            f"run {journal.id} stopped while the model was still writing its plan: it has none yet",
            hint=f"dagplan resume {journal.id} plans it again (what the model finished and the steps that "
            "completed are kept)",
        )
    if journal.meta.get("kind") == "agent":
        raise RunError.make(
            "agent-run",
            f"run {journal.id} is an agent loop, not a plan run",
            hint=f"resume it with dagplan.durable_agent_loop(run_id={journal.id!r}, tools=..., run_plan=...)",
        )
    from ...dsl import check
    from ...dsl.compose import Budget

    specs, budget = ({name: t.spec for name, t in tools.items()} if tools is not None else None), Budget.of(config)
    text, name = json.dumps(journal.plan_doc), journal.plan_name or journal.id
    key = (text, name, repr(budget), None if specs is None else tuple(sorted((n, repr(s)) for n, s in specs.items())))
    found = _CHECKED.get(key)
    if found is None:
        result = check(text=text, name=name, tools=specs, budget=budget)
        if not result.ok or result.plan is None:
            raise PlanInvalid(_at_original_lines(journal, result.diagnostics, specs, budget))
        found = result.plan
        if _self_contained(found):  # a sub-plan read from a file is read again each time
            _CHECKED[key] = found
        while len(_CHECKED) > 32:
            _CHECKED.pop(next(iter(_CHECKED)))
    return found


def _self_contained(plan: Plan) -> bool:
    """No step of it or of its children runs a plan from a file."""
    for step in plan.all_steps:
        for child in (step.plan, step.loop.child if step.loop is not None else None):
            if child is not None and child.path:
                return False
    return True


# Plans checked for runs of this process, by their text, name, budget and the tool specs they were checked
# against (each spec's full text: name, parameters, purity): a worker running 100 runs of one plan checks it
# once (a 20-step plan: 1.6 ms a run). A Plan is immutable; runs share it as they share a loaded one.
_CHECKED: dict[tuple, Plan] = {}


def _at_original_lines(journal: Journal, diagnostics: Any, specs: Any, budget: Any) -> Any:
    """The diagnostics at the plan file's own lines when that file still holds the run's plan (the
    stored artifact is one JSON line: its columns mean nothing to the author)."""
    from ...dsl import check

    name = journal.plan_name
    if not name or not os.path.isfile(name):
        return diagnostics
    original = check(name, tools=specs, budget=budget)
    same = original.plan is not None and original.plan.document == journal.plan_doc
    return original.diagnostics if same and not original.ok else diagnostics


def refuse_finished(journal: Any) -> None:
    """A ``run-finished`` error for a run that ended for good: cancelled, discarded, or aborted by itself
    (a budget, a replay's miss, ``on_failure: abort``, with its reason); nothing for any other."""
    progress = journal.progress()
    if progress.status not in (RunStatus.ABORTED, RunStatus.CANCELLED):
        return
    final = progress.final or {}
    if progress.status is RunStatus.CANCELLED:
        what = "cancelled"
    elif final.get("status") == RunStatus.ABORTED:
        what = "aborted" + (f" ({first_line(final['message'], 160)})" if final.get("message") else "")
    else:
        what = "discarded"
    raise RunError.make("run-finished", f"run {journal.id} was {what}", hint="start a new run")
