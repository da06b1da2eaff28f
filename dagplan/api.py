"""The public API: load -> preview / run, the recorded runs, with an async twin of every run function.

Each function is a thin layer over the pipeline (:mod:`dagplan.dsl`) and the interpreter
(:mod:`dagplan.interpreter`); the CLI calls only these.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any, Callable, Iterable, Mapping

from .dsl import check as _check
from .dsl.errors import PlanInvalid
from .dsl.ir import Plan

ToolsArg = Iterable[Any] | Mapping[str, Any] | None
Approve = Callable[[Any], "bool | Any"]


def load(
    source: str | os.PathLike | None = None,
    *,
    text: str | bytes | None = None,
    name: str | None = None,
    tools: ToolsArg = None,
    config: Any = None,
) -> Plan:
    """Load, check and parse a plan (any dialect); raises :class:`PlanInvalid` listing every problem.

    With ``tools``, tool names and argument types are checked too; with ``config``, its
    ``max_items`` (default cap of for_each steps) and ``max_steps`` budget apply. The plan
    carries its analysis (graph, order, groups): running it again costs no re-analysis.
    """
    from .dsl.compose import Budget

    specs = _specs(tools) if tools is not None else None
    result = _check(source, text=text, name=name, tools=specs, budget=Budget.of(config))
    if not result.ok or result.plan is None:
        raise PlanInvalid(result.diagnostics)
    return result.plan


def check_files(paths: Iterable[str | os.PathLike], tool_sources: Iterable[str] = (), config: Any = None) -> list:
    """``dagplan check``: each file checked as ``run`` will load it, with the same configuration
    (its ``tools`` and the given ones, ``max_items``, ``max_steps``). Raises RunError ``tools-import``
    when the tools cannot be loaded."""
    from .dsl.compose import Budget

    cfg = config or load_config()
    sources = [*cfg.tools, *tool_sources]
    specs = None
    if sources:  # importing user code (and the tool registry) only when there is some
        from .interpreter.tools import load_tool_specs

        specs = load_tool_specs(sources)
    budget = Budget.of(cfg)
    from .dsl import with_diagnostics
    from .interpreter.preflight import check_warnings

    results = [_check(path, name=os.fspath(path) if os.fspath(path) != "-" else None, tools=specs, budget=budget)
               for path in paths]  # fmt: skip
    return [  # the preflight as far as check can know it (an LLM step with no model to call)
        with_diagnostics(r, check_warnings(r.plan, cfg.default_model)) if r.plan is not None else r for r in results
    ]


def preview(plan: Plan | str | os.PathLike):
    """What the plan would run, running nothing: a :class:`Preview` (``.to_json()``)."""
    from .interpreter.preview import build_preview

    plan = _as_plan(plan)
    return build_preview(plan, plan.analysis)


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
    state_dir: Any = None,
    run_id: str | None = None,
    model: str | None = None,
    completion_kwargs: Mapping[str, Any] | None = None,
    max_cost: float | None = None,
    max_tokens: int | None = None,
    config: Any = None,
    on_run_created: Callable[[str], None] | None = None,
    ask_gate: Callable[[Mapping[str, Any]], Any] | None = None,
    tool_sources: Iterable[str] = (),
):
    """Run a plan; returns a :class:`RunResult`. See :func:`run`. ``tool_sources``: the files or
    modules the tools came from, recorded (with content hashes) so a resume loads the same ones."""
    from .interpreter.driver import start
    from .interpreter.scope import Options
    from .interpreter.tools import registry

    cfg = config or load_config()
    plan = _as_plan(plan, tools, cfg)
    options = Options.from_config(
        cfg,
        max_concurrency=max_concurrency,
        on_limit_exceeded=on_limit_exceeded,
        subscribers=subscribers,
        model=model,
        completion_kwargs=completion_kwargs,
        max_cost=max_cost,
        max_tokens=max_tokens,
        ask_gate=ask_gate,
    )
    from .interpreter.tools import source_record

    return await start(
        plan,
        meta={"tool_sources": source_record(tool_sources), "config": str(cfg.path) if cfg.path else None},
        tools=registry(tools),
        inputs=inputs,
        options=options,
        approve=approve,
        durable=durable,
        state=state_dir or cfg.state_dir,
        run_id=run_id,
        on_run_created=on_run_created,
    )


def run(plan: Plan | str | os.PathLike, **kwargs: Any):
    """Run a plan to the end and return its :class:`RunResult`.

    ``tools``: decorated functions, :class:`Tool` objects, or a ``{name: callable}``
    mapping; the plan may call only these. ``inputs``: values of ``†input``.
    ``approve(preview) -> bool`` is asked before a ``mode: lazy`` plan runs.
    ``ask_gate(request) -> answer`` answers approval gates (``gate:`` steps); without it a
    durable run stops in the ``waiting`` state (answer later: :func:`answer`).
    ``subscribers``: callables receiving every :class:`Event`. ``durable=True``
    checkpoints the run under ``state_dir`` (a directory, or a registry such as
    ``MemoryRegistry()``) so it can be resumed.
    """
    return asyncio.run(arun(plan, **kwargs))


async def aresume(
    run_id: str,
    *,
    tools: ToolsArg = None,
    from_step: str | None = None,
    state_dir: Any = None,
    on_interrupted: Callable[[str, str], str] | None = None,
    subscribers: Iterable[Callable] = (),
    on_limit_exceeded: Callable | None = None,
    on_run_created: Callable[[str], None] | None = None,
    config: Any = None,
    max_concurrency: int | None = None,
    model: str | None = None,
    completion_kwargs: Mapping[str, Any] | None = None,
    ask_gate: Callable[[Mapping[str, Any]], Any] | None = None,
):
    """Resume a durable run. See :func:`resume`."""
    from .interpreter.driver import resume as _resume
    from .interpreter.scope import Options
    from .interpreter.tools import registry

    cfg = config or load_config()
    options = Options.from_config(
        cfg,
        max_concurrency=max_concurrency,
        on_limit_exceeded=on_limit_exceeded,
        subscribers=subscribers,
        model=model,
        completion_kwargs=completion_kwargs,
        ask_gate=ask_gate,
    )
    return await _resume(
        run_id,
        tools=registry(tools),
        options=options,
        config=cfg,
        state=state_dir or cfg.state_dir,
        from_step=from_step,
        on_interrupted=on_interrupted,
        on_run_created=on_run_created,
    )


def resume(run_id: str, **kwargs: Any):
    """Resume an interrupted (or waiting) durable run: completed steps replay, the rest runs.

    ``on_interrupted(step, purity) -> "retry" | "adopt" | "fail"`` decides about steps with a
    side effect that were running when the run stopped (without it they fail, never silently repeated).
    """
    return asyncio.run(aresume(run_id, **kwargs))


# --- recorded runs ---------------------------------------------------------------------------


def runs(state_dir: Any = None):
    """Every recorded run, newest first: a list of :class:`RunInfo`."""
    from .interpreter.runs import list_runs

    return list_runs(_state(state_dir))


def run_report(run_id: str, state_dir: Any = None):
    """One run's :class:`RunReport`: status, each step's status, attempts, output and error."""
    from .interpreter.runs import run_report as report

    return report(run_id, _state(state_dir))


def events(run_id: str, state_dir: Any = None, types: Iterable[str] | None = None):
    """A run's journaled :class:`Event` values, oldest first (``types``: only those)."""
    from .interpreter.runs import run_events

    return run_events(run_id, _state(state_dir), types)


def answer(run_id: str, step: str, value: Any, state_dir: Any = None, *, text: bool = False) -> str:
    """Answer the approval gate ``step`` a waiting run stopped at; :func:`resume` then continues it."""
    from .interpreter.runs import answer_gate

    return answer_gate(run_id, step, value, _state(state_dir), text=text)


def discard(run_id: str, state_dir: Any = None) -> str:
    """Cancel a run (if running), record ``plan_aborted`` and remove it; returns its full id."""
    from .interpreter.runs import discard_run

    return discard_run(run_id, _state(state_dir))


def stored_plan(
    run_id: str, tools: ToolsArg = None, state_dir: Any = None, *, config: Any = None, from_step: str | None = None
) -> Plan:
    """The plan a recorded run runs (from its artifact, never re-derived), checked against ``tools``
    (and ``from_step``, a ``resume --from`` step, checked first)."""
    from .interpreter.driver import stored_plan as plan_of
    from .interpreter.journal import open_registry
    from .interpreter.tools import registry

    cfg = config or load_config()
    journal = open_registry(state_dir if state_dir is not None else cfg.state_dir).open(run_id)
    return plan_of(journal, registry(tools), cfg, from_step)


def run_config(run_id: str, state_dir: Any = None):
    """The configuration to resume a run with: the working directory's, else the one the run started
    with (so ``dagplan resume RUN`` works from anywhere)."""
    from .interpreter.journal import open_registry

    here = load_config()
    if here.path is not None:
        return here
    started = open_registry(state_dir if state_dir is not None else here.state_dir).open(run_id).meta.get("config")
    return load_config(os.path.dirname(started)) if started and os.path.isfile(started) else here


def resume_tools(run_id: str, state_dir: Any = None) -> tuple[list[str], list[str]]:
    """(the tool sources a run was started with, those of them whose file changed since)."""
    from .interpreter.journal import open_registry
    from .interpreter.tools import changed_sources, recorded_sources

    record = open_registry(_state(state_dir)).open(run_id).meta.get("tool_sources") or []
    return recorded_sources(record), changed_sources(record)


def load_config(start: str | os.PathLike | None = None):
    """The project configuration that applies in ``start`` (default: the working directory)."""
    from .interpreter.config import load_config as read

    return read(start)


def new_run_id() -> str:
    from .interpreter.store import new_run_id as new

    return new()


# --- helpers ------------------------------------------------------------------------------


def _as_plan(plan: Plan | str | os.PathLike, tools: ToolsArg = None, config: Any = None) -> Plan:
    return plan if isinstance(plan, Plan) else load(plan, tools=tools, config=config)


def _state(state_dir: Any) -> Any:
    return state_dir if state_dir is not None else load_config().state_dir


def _specs(tools: ToolsArg):
    from .interpreter.tools import registry

    return {name: t.spec for name, t in registry(tools).items()}
