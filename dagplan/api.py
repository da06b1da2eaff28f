"""The public API: load -> preview / run, with an async twin of every run function."""

from __future__ import annotations

import asyncio
import os
import secrets
import time
from dataclasses import replace
from typing import Any, Callable, Iterable, Mapping

from .dsl import check as _check
from .dsl.errors import PlanInvalid, RunError
from .dsl.ir import Plan
from .dsl.schedule import Analysis, analyze

ToolsArg = Iterable[Any] | Mapping[str, Any] | None
Approve = Callable[[Any], "bool | Any"]


def load(source: str | os.PathLike | None = None, *, text: str | bytes | None = None, name: str | None = None,
         tools: ToolsArg = None, config: Any = None) -> Plan:
    """Load, check and parse a plan (any dialect); raises :class:`PlanInvalid` listing every problem.

    With ``tools``, tool names and argument types are checked too; with ``config``, its
    ``max_items`` (default cap of for_each steps) and ``max_steps`` budget apply.
    """
    specs = _specs(tools) if tools is not None else None
    result = _check(source, text=text, name=name, tools=specs, budget=_budget(config))
    if not result.ok:
        raise PlanInvalid(result.diagnostics)
    plan = result.plan
    if plan.document is None and result.document is not None:
        plan = replace(plan, document=result.document.data)
    return plan


def preview(plan: Plan | str | os.PathLike):
    """What the plan would run, running nothing: a :class:`Preview` (``.to_json()``)."""
    from .interpreter.preview import build_preview

    plan = _as_plan(plan)
    return build_preview(plan, analyze(plan))


async def arun(
    plan: Plan | str | os.PathLike,
    *,
    tools: ToolsArg = None,
    inputs: Mapping[str, Any] | None = None,
    approve: Approve | None = None,
    subscribers: Iterable[Callable] = (),
    max_concurrency: int | None = None,
    on_limit_exceeded: Callable | None = None,
    durable: bool = False,
    state_dir: str | os.PathLike | None = None,
    run_id: str | None = None,
    model: str | None = None,
    completion_kwargs: Mapping[str, Any] | None = None,
    max_cost: float | None = None,
    max_tokens: int | None = None,
    config: Any = None,
    on_run_created: Callable[[str], None] | None = None,
    ask_gate: Callable[[Mapping[str, Any]], Any] | None = None,
):
    """Run a plan; returns a :class:`RunResult`. See :func:`run`."""
    from .interpreter.config import load_config
    from .interpreter.engine import Execution, Options
    from .interpreter.inputs import prepare_inputs
    from .interpreter.tools import registry

    cfg = config or load_config()
    plan = _as_plan(plan, tools, cfg)
    analysis = analyze(plan)
    registered = registry(tools)
    values = prepare_inputs(plan, inputs)
    await _approve(plan, analysis, approve)
    options = Options.from_config(
        cfg, max_concurrency=max_concurrency, on_limit_exceeded=on_limit_exceeded, subscribers=subscribers,
        model=model, completion_kwargs=completion_kwargs, max_cost=max_cost, max_tokens=max_tokens,
        ask_gate=ask_gate, default_max_items=cfg.max_items,
    )
    journal = None
    if durable:
        journal = _create_run(plan, values, state_dir or cfg.state_dir)
        run_id = journal.id
    run_id = run_id or new_run_id()
    if on_run_created:
        on_run_created(run_id)
    execution = Execution(plan, analysis, registered, values, run_id, options, journal=journal)
    return await _execute(execution, journal)


def run(plan: Plan | str | os.PathLike, **kwargs: Any):
    """Run a plan to the end and return its :class:`RunResult`.

    ``tools``: decorated functions, :class:`Tool` objects, or a ``{name: callable}``
    mapping; the plan may call only these. ``inputs``: values of ``†input``.
    ``approve(preview) -> bool`` is asked before a ``mode: lazy`` plan runs.
    ``ask_gate(request) -> answer`` answers approval gates (``gate:`` steps); without it a
    durable run stops in the ``waiting`` state (answer later: ``dagplan answer``).
    ``subscribers``: callables receiving every :class:`Event`. ``durable=True``
    checkpoints the run under ``state_dir`` so it can be resumed.
    """
    return asyncio.run(arun(plan, **kwargs))


async def aresume(run_id: str, **kwargs: Any):
    from .interpreter.resume import aresume as _aresume

    return await _aresume(run_id, **kwargs)


def resume(run_id: str, **kwargs: Any):
    """Resume an interrupted durable run: completed steps replay, the rest runs."""
    return asyncio.run(aresume(run_id, **kwargs))


def new_run_id() -> str:
    return time.strftime("%Y%m%d-%H%M%S-") + secrets.token_hex(2)


# --- helpers ------------------------------------------------------------------------------


def _as_plan(plan: Plan | str | os.PathLike, tools: ToolsArg = None, config: Any = None) -> Plan:
    return plan if isinstance(plan, Plan) else load(plan, tools=tools, config=config)


def _budget(config: Any):
    """What check enforces from the configuration: the default max_items cap and max_steps."""
    if config is None or (getattr(config, "max_items", None) is None and config.max_steps is None):
        return None
    from .dsl.compose import Budget

    return Budget(config.max_items, config.max_steps)


def _specs(tools: ToolsArg):
    from .interpreter.tools import registry

    return {name: t.spec for name, t in registry(tools).items()}


async def _approve(plan: Plan, analysis: Analysis, approve: Approve | None) -> None:
    if plan.mode != "lazy":
        return
    if approve is None:
        raise RunError.make(
            "approval-required",
            "this plan is lazy: it runs only after approval",
            hint="pass approve=callback (API) or --yes (CLI), or preview it first",
        )
    from .interpreter.preview import build_preview

    answer = approve(build_preview(plan, analysis))
    if asyncio.iscoroutine(answer):
        answer = await answer
    if not answer:
        raise RunError.make("not-approved", "the plan was not approved; nothing ran")


def _create_run(plan: Plan, inputs: Mapping[str, Any], state_dir: Any):
    from .interpreter.store import RunStore

    if plan.document is None:
        raise RunError.make("not-durable", "a durable run needs a plan loaded from a document", hint="use dagplan.load()")
    store = RunStore(state_dir)
    run = store.create(plan_doc=plan.document, plan_name=plan.source, inputs=dict(inputs), meta={"dialect": plan.dialect})
    run.acquire()
    return run


async def _execute(execution, journal):
    try:
        return await execution.run()
    finally:
        if journal is not None:
            journal.release()
