"""Starting and resuming runs: inputs, approval, the journal, the replay, then the engine.

The public API (``dagplan.arun`` / ``dagplan.aresume``) is a thin layer over these two
functions; both end in :func:`execute`, so a fresh run and a resumed one are run the
same way.
"""

from __future__ import annotations

import asyncio
import json
import os
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from ...dsl.errors import PlanInvalid, RunError, first_line
from ...dsl.ir import Plan
from ...dsl.schedule import analysis_of
from ..engine.execution import Execution, RunResult
from ..stores.journal import Journal, check_step, clear_from, new_run_id
from ..stores.registry import open_registry
from ..llm.preflight import preflight
from ..core.progress import plan_step_ids
from ..engine.resume import AskInterrupted, Replay, needs_decision, rerun_refused, side_effects_again
from ..engine.scope import Options, RunScope
from ..tools.catalog import Tool
from ..core.vocabulary import Event, EventType, RunStatus

Approve = Callable[[Any], Any]


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


async def start(request: RunRequest) -> RunResult:
    """A new run of a loaded plan: inputs checked, a lazy plan approved, then executed (durably if asked)."""
    from ..engine.inputs import prepare_inputs

    plan, tools, options, state, run_id = request.plan, request.tools, request.options, request.state, request.run_id
    inputs, approve, durable, meta, on_run_created = (request.inputs, request.approve, request.durable, request.meta,
                                                      request.on_run_created)  # fmt: skip

    values = prepare_inputs(plan, inputs, strict=True)
    _preflight(plan, options, tools)  # before approval: nothing to approve in vain
    await approve_plan(plan, approve)
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
    scope = RunScope(run_id, tools, _traced(options, plan).limited_by(plan), journal)
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
    plan = stored_plan(journal, tools, config, from_step)
    _preflight(plan, options, tools)
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
        scope = RunScope(journal.id, tools, _traced(options, plan).limited_by(plan), journal, replay)
        resumed: dict[str, Any] = {"from": from_step, "replayed": sorted(replay.units)}  # "from": a keyword
        scope.emit(EventType.PLAN_RESUMED, **resumed)
        return await execute(plan, journal.inputs, scope, own_journal=False)
    finally:
        journal.release()


def _traced(options: Options, plan: Plan) -> Options:
    """The options with a tracing subscriber when OpenTelemetry is configured (else unchanged, nothing imported)."""
    from dataclasses import replace

    from ..observe.otel import tracer_for

    tracer = tracer_for(plan.source, {s.id: s.tool or str(s.kind) for s in plan.steps})
    return options if tracer is None else replace(options, subscribers=[*options.subscribers, tracer])


def _preflight(plan: Plan, options: Options, tools: Mapping[str, Tool]) -> None:
    """The preflight of models and keys, and of the tool sources the plan calls (an MCP server's
    ``${VAR}``), unless no real model or tool can be called (mocks, a cassette)."""
    if options.calls is None or not options.calls.offline:
        preflight(plan, options.model, options.completion_kwargs)
        used = {id(t.source): t.source for name in plan.tool_names if (t := tools.get(name)) and t.source}
        problems = [p for source in used.values() for p in source.preflight()] + _notifier_problems(plan, options)
        if problems:
            raise RunError(problems)


def _notifier_problems(plan: Plan, options: Options) -> list:
    """A gate naming a notifier the configuration does not declare, or whose webhook's ``${VAR}`` is unset."""
    from ..core.config import expand_env, unknown_notifier

    out = []
    for step in plan.gate_steps:
        for name in step.gate.notify if step.gate is not None else ():
            table = options.notifiers.get(name)
            if table is None:
                out.append(unknown_notifier(step, name, options.notifiers))
            elif "webhook" in table:
                try:
                    expand_env(f"notify.{name}.webhook", table["webhook"])
                except RunError as exc:
                    out += exc.diagnostics
    return out


async def execute(plan: Plan, inputs: Mapping[str, Any], scope: RunScope, own_journal: bool = True) -> RunResult:
    """Run the engine; the journal (when this call owns it) and the worker threads are let go at the end."""
    try:
        return await Execution(plan, inputs, scope).run()
    finally:
        scope.close()
        await scope.close_sources()
        await scope.settle_notices()
        if own_journal and scope.journal is not None:
            scope.journal.release()


def stored_plan(journal: Journal, tools: Mapping[str, Tool] | None, config: Any, from_step: str | None = None) -> Plan:
    """A run's own plan, from its artifact (never re-derived), checked against today's tools (None: not
    checked against any, for a viewer).

    A ``from_step`` (``resume --from``) is checked first: a wrong step id is the caller's
    mistake whatever else is wrong."""
    if from_step is not None:
        check_step(journal.id, from_step, plan_step_ids(journal.plan_doc))
    if journal.meta.get("kind") == "agent":
        raise RunError.make(
            "agent-run",
            f"run {journal.id} is an agent loop, not a plan run",
            hint=f"resume it with dagplan.durable_agent_loop(run_id={journal.id!r}, tools=..., run_plan=...)",
        )
    from ...dsl import check
    from ...dsl.compose import Budget

    specs, budget = ({name: t.spec for name, t in tools.items()} if tools is not None else None), Budget.of(config)
    found = check(text=json.dumps(journal.plan_doc), name=journal.plan_name or journal.id, tools=specs, budget=budget)
    if not found.ok or found.plan is None:
        raise PlanInvalid(_at_original_lines(journal, found.diagnostics, specs, budget))
    return found.plan


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


async def approve_plan(plan: Plan, approve: Approve | None) -> None:
    """A lazy plan runs only once ``approve(preview)`` said yes."""
    if plan.mode != "lazy":
        return
    if approve is None:
        raise RunError.make(
            "approval-required",
            "this plan is lazy: it runs only after approval",
            hint="pass approve=callback (API) or --yes (CLI), or preview it first",
        )
    from ..engine.preview import build_preview

    answer = approve(build_preview(plan, analysis_of(plan)))
    if asyncio.iscoroutine(answer):
        answer = await answer
    if not answer:
        raise RunError.make("not-approved", "the plan was not approved; nothing ran")


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
