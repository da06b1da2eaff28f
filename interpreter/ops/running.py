"""What starting a run and resuming one (:mod:`.driver`) and a streamed run (:mod:`.streamed`) share: the
preflight of models, keys and tool sources, tracing, a lazy plan's approval, and running the engine to the end
with what the run holds let go."""

from __future__ import annotations

import asyncio
from typing import Any, Callable, Mapping

from ...dsl.errors import RunError
from ...dsl.ir import Plan
from ...dsl.schedule import analysis_of
from ..engine.execution import Execution
from ..engine.results import RunResult
from ..engine.scope import Options, RunScope
from ..stores.journal import release
from ..llm.preflight import preflight
from ..tools.catalog import Tool

Approve = Callable[[Any], Any]


def traced(options: Options, plan: Plan) -> Options:
    """The options with a tracing subscriber when OpenTelemetry is configured (else unchanged, nothing imported)."""
    from dataclasses import replace

    from ..observe.otel import tracer_for

    tracer = tracer_for(plan.source, lambda: {s.id: s.tool or str(s.kind) for s in plan.steps})
    return options if tracer is None else replace(options, subscribers=[*options.subscribers, tracer])


def preflight_run(plan: Plan, options: Options, tools: Mapping[str, Tool]) -> None:
    """The preflight of models and keys, and of the tool sources the plan calls (an MCP server's
    ``${VAR}``), unless no real model or tool can be called (mocks, a cassette); and the clock's offset (a
    bad one is said before anything runs, not by the first gate that reads the clock)."""
    from ..core.clock import now

    now()
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
            await release(scope.journal)


async def approve_plan(plan: Plan, approve: Approve | None, always: bool = False, ran: str = "nothing ran",
                       tools: Mapping[str, Tool] | None = None) -> None:  # fmt: skip
    """A lazy plan (``always``: any plan) runs only once ``approve(preview)`` said yes; ``ran``: what the
    refusal says had run by then."""
    if plan.mode != "lazy" and not always:
        return
    if approve is None:
        raise RunError.make(
            "approval-required",
            "this plan is lazy: it runs only after approval",
            hint="pass approve=callback (API) or --yes (CLI), or preview it first",
        )
    from ..engine.preview import build_preview

    answer = approve(build_preview(plan, analysis_of(plan), tools=tools))
    if asyncio.iscoroutine(answer):
        answer = await answer
    if not answer:
        raise RunError.make("not-approved", f"the plan was not approved; {ran}")
